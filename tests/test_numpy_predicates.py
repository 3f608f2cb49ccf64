"""isclose, allclose, array_equal, array_equiv, heaviside, angle and the real-valued complex
queries (frontend/numpy/_predicates.py) against NumPy."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import ShapeError

INF, NAN = np.inf, np.nan
A = np.array([1, INF, -INF, NAN, 1e10, 0, -0.0, 1, 1, 5], np.float32)
B = np.array([1.000001, INF, INF, NAN, 1.00001e10, 1e-9, 0, NAN, 1.1, -5], np.float32)


@pytest.mark.parametrize("kw", [{}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.5, "rtol": 0}])
def test_isclose_and_allclose(kw):
    got = lf.jit(lambda a, b: lnp.isclose(a, b, **kw))(A, B)
    np.testing.assert_array_equal(np.asarray(got), np.isclose(A, B, **kw))
    for a, b in ((A[:3], B[:3]), (A[:2], B[:2]), (A[3:4], B[3:4])):
        assert bool(lf.jit(lambda a, b: lnp.allclose(a, b, **kw))(a, b)) == np.allclose(a, b, **kw)
    # broadcasting, ints and a weak scalar
    i = np.array([[1, 2], [3, 4]], np.int32)
    np.testing.assert_array_equal(np.asarray(lnp.isclose(i, 2)), np.isclose(i, 2))
    np.testing.assert_array_equal(np.asarray(lnp.isclose(i, np.float32([1, 4]))), np.isclose(i, np.float32([1, 4])))


def test_array_equal_and_equiv():
    f = lf.jit(lambda a, b: (lnp.array_equal(a, b), lnp.array_equal(a, b, equal_nan=True), lnp.array_equiv(a, b)))
    cases = [(A, A), (A, B), (A[:3], A[:3].copy()), (np.ones((2, 3), np.float32), np.ones(3, np.float32)),
             (np.ones((2, 3), np.float32), np.ones((2, 2), np.float32)), (np.arange(3), np.arange(3.0))]
    for a, b in cases:
        got = [bool(v) for v in f(a, b)]
        want = [np.array_equal(a, b), np.array_equal(a, b, equal_nan=True), np.array_equiv(a, b)]
        assert got == want, (a, b, got, want)
        assert np.asarray(f(a, b)[0]).shape == ()
    g = lf.jit(lambda a, b: lnp.array_equal(a, b), dynamic_axes={"a": {0: "s"}})
    with pytest.raises(ShapeError, match="array_equal: cannot tell whether shapes"):
        g(np.ones(3, np.float32), np.ones(3, np.float32))
    h = lf.jit(lambda a: lnp.array_equal(a, a * 1), dynamic_axes={"a": {0: "s"}})
    assert bool(h(np.ones(3, np.float32))) and bool(h(np.array([NAN, 1], np.float32))) is False


def test_heaviside_and_angle():
    x = np.array([-2, -0.0, 0, 3, NAN, -INF, INF], np.float32)
    np.testing.assert_array_equal(np.asarray(lnp.heaviside(x, 0.5)), np.heaviside(x, np.float32(0.5)))
    h2 = np.array([7, 8, 9, 1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(np.asarray(lf.jit(lnp.heaviside)(x, h2)), np.heaviside(x, h2))
    i = np.array([-3, 0, 4], np.int32)
    got = lnp.heaviside(i, np.int32(7))
    assert np.asarray(got).dtype == np.float32  # NumPy: float64 (float loops only); float32 here
    np.testing.assert_array_equal(np.asarray(got), np.heaviside(i, 7).astype(np.float32))
    for deg in (False, True):
        np.testing.assert_allclose(np.asarray(lnp.angle(x, deg=deg)), np.angle(x, deg=deg), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(lnp.angle(i)), np.angle(i).astype(np.float32))


def test_real_valued_complex_queries():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for name in ("iscomplex", "isreal", "imag"):
        got, want = np.asarray(getattr(lnp, name)(x)), getattr(np, name)(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert np.asarray(lnp.imag(np.int32([1, 2]))).dtype == np.int32
    assert lnp.isscalar(3.0) and lnp.isscalar(np.float32(1)) and not lnp.isscalar(np.ones(2))
    assert lf.jit(lambda a: lnp.zeros(1) + lnp.isscalar(a))(np.ones(2)).tolist() == [0.0]
    assert not lnp.iscomplexobj(x) and lnp.isrealobj(x)

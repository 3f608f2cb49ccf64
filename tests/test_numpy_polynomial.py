"""convolve, correlate, the poly* functions, NumPy 2's array-API functions (vecdot, matvec,
vecmat, matrix_transpose, unstack, cumulative_sum/prod) and its spellings of old names, each
against NumPy under jit."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(31)


def _r(*shape):
    return R.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(1, 1), (5, 1), (1, 4), (7, 3), (3, 7), (8, 4), (6, 6), (40, 9)])
def test_convolve_and_correlate_match_numpy(fn, mode, n, m):
    a, v = _r(n), _r(m)
    got = lf.jit(lambda x, y: getattr(lnp, fn)(x, y, mode))(a, v)
    want = getattr(np, fn)(a.astype(np.float64), v.astype(np.float64), mode)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_convolve_dtypes_and_errors():
    ai, vi = np.array([1, 2, 3], np.int32), np.array([0, 1, -1], np.int32)
    got = lf.jit(lnp.convolve)(ai, vi)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.convolve(ai, vi))
    b, c = np.array([True, False, True]), np.array([True, True])
    np.testing.assert_array_equal(lnp.convolve(b, c), np.convolve(b, c))
    np.testing.assert_array_equal(lnp.correlate(b, c, "full"), np.correlate(b, c, "full"))
    np.testing.assert_allclose(lnp.convolve(ai, 0.5), np.convolve(ai, [0.5]))  # a scalar is a 1-vector
    with pytest.raises(lf.ShapeError, match="convolve: a and v must not be empty"):
        lnp.convolve(np.zeros(0, np.float32), ai)
    with pytest.raises(lf.ShapeError, match="correlate: a must be 1-D"):
        lnp.correlate(np.zeros((2, 2), np.float32), ai)
    with pytest.raises(lf.ArgumentError, match="convolve: mode must be one of"):
        lnp.convolve(ai, vi, "wide")


def test_poly_arithmetic_matches_numpy():
    p, q = np.array([3, -2, 0.5, 1], np.float32), np.array([1, -1], np.float32)
    for ours, theirs in [(lnp.polyadd, np.polyadd), (lnp.polysub, np.polysub), (lnp.polymul, np.polymul)]:
        for x, y in [(p, q), (q, p), (p, p)]:
            np.testing.assert_allclose(lf.jit(ours)(x, y), theirs(x, y), rtol=1e-6, err_msg=theirs.__name__)
    np.testing.assert_array_equal(lnp.polyadd(np.int32([1, 2]), np.int32([5])), np.polyadd([1, 2], [5]))
    for m in range(5):
        np.testing.assert_allclose(lnp.polyder(p, m), np.polyder(p, m), err_msg=f"polyder m={m}")
    assert lnp.polyder(np.int32([4, 3, 2]), 1).dtype == np.int32
    for m, k in [(1, None), (1, 2.5), (2, [1.0, -2.0]), (3, 0.5)]:
        np.testing.assert_allclose(lnp.polyint(p, m, k), np.polyint(p, m, k), rtol=1e-6, err_msg=f"m={m} k={k}")
    with pytest.raises(lf.ArgumentError, match="polyint: k must be a scalar or 2 constants"):
        lnp.polyint(p, 2, [1.0])
    with pytest.raises(lf.ArgumentError, match="polyder: the order m must be a non-negative int"):
        lnp.polyder(p, -1)


def test_polydiv_keeps_the_remainder_untrimmed_as_jax():
    u, v = np.array([2, -3, 0, 5, 1], np.float32), np.array([0.5, 1, -1], np.float32)
    q, r = lf.jit(lnp.polydiv)(u, v)
    wq, wr = np.polydiv(u.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(q, wq, rtol=1e-5)
    assert r.shape == u.shape  # NumPy trims the leading zeros; JAX and this keep u's length
    np.testing.assert_allclose(r[-len(wr):], wr, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r[:-len(wr)], 0, atol=1e-5)
    # q * v + r gives u back
    np.testing.assert_allclose(np.polyadd(np.polymul(q, v), r), u, rtol=1e-5, atol=1e-5)


def test_poly_from_roots():
    roots = np.array([1, -2, 0.5, 3], np.float32)
    np.testing.assert_allclose(lf.jit(lnp.poly)(roots), np.poly(roots.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(lnp.poly(np.zeros(0, np.float32)), [1.0])
    with pytest.raises(lf.ShapeError, match="poly: a matrix's characteristic polynomial"):
        lnp.poly(np.eye(2, dtype=np.float32))


@pytest.mark.parametrize("sa,sb,axis", [((3, 4), (4,), -1), ((3, 4), (3, 4), 0), ((2, 1, 5), (3, 5), -1),
                                        ((6,), (6,), 0)])
def test_vecdot_matches_numpy(sa, sb, axis):
    a, b = _r(*sa), _r(*sb)
    got = lf.jit(lambda x, y: lnp.vecdot(x, y, axis=axis))(a, b)
    np.testing.assert_allclose(got, np.vecdot(a, b, axis=axis), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lnp.linalg.vecdot(a, b, axis=axis), np.linalg.vecdot(a, b, axis=axis),
                               rtol=1e-5, atol=1e-6)


def test_vecdot_refuses_vectors_of_two_lengths():
    with pytest.raises(lf.ShapeError, match="vecdot: the vectors along axis -1"):
        lnp.vecdot(_r(3, 4), _r(3, 1))


def test_matvec_and_vecmat_match_numpy():
    m, v, w = _r(2, 3, 4), _r(4), _r(2, 3)
    np.testing.assert_allclose(lf.jit(lnp.matvec)(m, v), np.matvec(m, v), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lf.jit(lnp.vecmat)(w, m), np.vecmat(w, m), rtol=1e-5, atol=1e-6)
    with pytest.raises(lf.ShapeError, match="matvec: needs a matrix"):
        lnp.matvec(v, v)


def test_array_api_shapes_and_scans():
    x = _r(2, 3, 4)
    np.testing.assert_array_equal(lnp.matrix_transpose(x), np.matrix_transpose(x))
    got = lf.jit(lambda a: lnp.unstack(a, axis=1))(x)
    assert isinstance(got, tuple) and len(got) == 3
    for g, w in zip(got, np.unstack(x, axis=1)):
        np.testing.assert_array_equal(g, w)
    for axis in (0, 2, -2):
        for initial in (False, True):
            for ours, theirs in [(lnp.cumulative_sum, np.cumulative_sum), (lnp.cumulative_prod, np.cumulative_prod)]:
                np.testing.assert_allclose(lf.jit(lambda a: ours(a, axis=axis, include_initial=initial))(x),
                                           theirs(x, axis=axis, include_initial=initial), rtol=1e-5, atol=1e-6)
    v = np.int32([3, 1, 2])
    np.testing.assert_array_equal(lnp.cumulative_sum(v, include_initial=True), np.cumulative_sum(v, include_initial=True))
    with pytest.raises(lf.ShapeError, match="cumulative_sum: x has shape"):
        lnp.cumulative_sum(x)
    with pytest.raises(lf.ShapeError, match="matrix_transpose: x must be at least 2-D"):
        lnp.matrix_transpose(v)


@pytest.mark.parametrize("name", ["acos", "acosh", "asin", "asinh", "atan", "atanh", "conjugate"])
def test_numpy2_spellings_of_unary_functions(name):
    x = (np.linspace(-0.9, 0.9, 7) if name not in ("acosh",) else np.linspace(1, 4, 7)).astype(np.float32)
    np.testing.assert_allclose(lf.jit(getattr(lnp, name))(x), getattr(np, name)(x), rtol=2e-6, atol=2e-7)


def test_numpy2_spellings_of_binary_functions():
    y, x = _r(5), _r(5)
    np.testing.assert_allclose(lnp.atan2(y, x), np.atan2(y, x), rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(lnp.pow(np.abs(x), y), np.pow(np.abs(x), y), rtol=2e-6)
    np.testing.assert_array_equal(lnp.row_stack([x, y]), np.vstack([x, y]))

"""Traced luminal_fn.numpy vs NumPy on the same inputs (float32 within 1e-5 relative)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(7)


def f32(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def check(fn_l, fn_n, *args, rtol=1e-5, atol=1e-6):
    got = np.asarray(lf.jit(fn_l)(*args))
    want = np.asarray(fn_n(*args))
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want.astype(np.float32), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


UNARY = ["negative", "square", "absolute", "sign", "floor", "ceil", "trunc", "rint", "exp", "exp2",
         "expm1", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arctan", "arcsinh", "isnan", "isinf",
         "isfinite", "logical_not", "deg2rad", "rad2deg", "signbit", "cbrt", "sinc"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    # tan is ill-conditioned near +-pi/2 (1 ulp of x moves tan(x) by far more than rtol there)
    x = f32(3, 4, lo=-1.3, hi=1.3) if name == "tan" else f32(3, 4)
    check(lambda x: getattr(lnp, name)(x), lambda x: getattr(np, name)(x), x, atol=2e-6)


POSITIVE = ["log", "log2", "log10", "log1p", "sqrt", "reciprocal", "arccosh"]


@pytest.mark.parametrize("name", POSITIVE)
def test_unary_positive(name):
    x = f32(5, 2, lo=1.1, hi=4.0)
    check(lambda x: getattr(lnp, name)(x), lambda x: getattr(np, name)(x), x)


@pytest.mark.parametrize("name", ["arcsin", "arccos", "arctanh"])
def test_unary_unit(name):
    x = f32(7, lo=-0.9, hi=0.9)
    check(lambda x: getattr(lnp, name)(x), lambda x: getattr(np, name)(x), x, atol=5e-6)


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax", "fmin", "less",
          "less_equal", "greater", "greater_equal", "equal", "not_equal", "logaddexp", "hypot",
          "arctan2", "copysign", "fmod", "mod", "floor_divide", "logical_and", "logical_or",
          "logical_xor"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (2, 3, 4))])
def test_binary_broadcast(name, shapes):
    a, b = f32(*shapes[0]), f32(*shapes[1], lo=0.5, hi=3.0)
    check(lambda a, b: getattr(lnp, name)(a, b), lambda a, b: getattr(np, name)(a, b), a, b, atol=3e-6)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "mod", "floor_divide", "maximum", "minimum"])
def test_binary_int(name):
    a = R.integers(-20, 20, (4, 5)).astype(np.int32)
    b = R.integers(1, 7, (4, 5)).astype(np.int32) * np.where(R.random((4, 5)) < 0.5, -1, 1).astype(np.int32)
    check(lambda a, b: getattr(lnp, name)(a, b), lambda a, b: getattr(np, name)(a, b), a, b)


@pytest.mark.parametrize("name,kw", [("sum", {}), ("mean", {}), ("max", {}), ("min", {}), ("prod", {}),
                                     ("var", {}), ("std", {"ddof": 1}), ("argmax", {}), ("argmin", {}),
                                     ("any", {}), ("all", {}), ("cumsum", {}), ("logsumexp", {}),
                                     ("ptp", {})])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_reductions(name, kw, axis):
    x = f32(3, 5, lo=0.5, hi=1.5)
    if name in ("any", "all"):
        x = x > 1.0
    if name == "logsumexp":
        def ref(x):
            m = np.max(x, axis=axis, keepdims=True)
            out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
            return out.reshape(np.sum(x, axis=axis).shape)
        check(lambda x: lnp.logsumexp(x, axis=axis), ref, x)
        return
    if name in ("cumsum", "argmax", "argmin") and axis is None:
        check(lambda x: getattr(lnp, name)(x), lambda x: getattr(np, name)(x), x)
        return
    check(lambda x: getattr(lnp, name)(x, axis=axis, **kw), lambda x: getattr(np, name)(x, axis=axis, **kw), x,
          rtol=2e-5)


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.booleans())
def test_sum_keepdims_hypothesis(shape, keepdims):
    x = f32(*shape)
    ax = -1
    check(lambda x: lnp.sum(x, axis=ax, keepdims=keepdims), lambda x: np.sum(x, axis=ax, keepdims=keepdims), x)


SHAPE_CASES = [
    (lambda x: x.reshape(6, 4), (2, 3, 4)),
    (lambda x: x.T.reshape(-1), (3, 4)),
    (lambda x: x[1:, ::-1], (3, 4)),
    (lambda x: x[None, ..., 0], (3, 4)),
    (lambda x: x[::2, 1:3], (5, 4)),
    (lambda x: x[[0, 2, 1]], (3, 4)),
    (lambda x: x[:, [1, 1, 0]], (3, 4)),
    (lambda x: x[np.array([True, False, True])], (3, 4)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).transpose(x, (1, 0, 2)), (2, 3, 4)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).concatenate([x, x * 2], axis=1), (2, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).stack([x, x + 1], axis=-1), (2, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).pad(x, ((1, 0), (2, 1))), (2, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).flip(x, 0), (3, 2)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).roll(x, 1, axis=1), (2, 4)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).tile(x, (2, 1)), (2, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).repeat(x, 2, axis=0), (2, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).tril(x), (4, 4)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).triu(x, 1), (4, 4)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).sort(x, axis=-1), (3, 5)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).argsort(x, axis=0), (4, 2)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).einsum("ij,kj->ik", x, x), (3, 4)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).outer(x[0], x[1]), (2, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).diagonal(x), (3, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).clip(x, -0.5, 0.5), (3, 3)),
    (lambda x: (np if isinstance(x, np.ndarray) else lnp).where(x > 0, x, 0.0), (3, 3)),
]


@pytest.mark.parametrize("k", range(len(SHAPE_CASES)))
def test_shape_and_index(k):
    fn, shape = SHAPE_CASES[k]
    x = f32(*shape)
    check(fn, fn, x)


@pytest.mark.parametrize("ashape,bshape", [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 3, 4), (4, 5)),
                                           ((2, 3, 4), (2, 4, 5)), ((5,), (5,))])
def test_matmul(ashape, bshape):
    a, b = f32(*ashape), f32(*bshape)
    check(lambda a, b: a @ b, lambda a, b: a @ b, a, b, rtol=2e-5, atol=2e-5)


def test_at_updates():
    x = f32(5, 3)
    idx = np.array([0, 2, 0], np.int32)
    check(lambda x: x.at[idx].add(1.0), lambda x: _np_add_at(x, idx), x)
    check(lambda x: x.at[1:3, 0].set(7.0), lambda x: _np_set(x), x)


def _np_add_at(x, idx):
    y = x.copy()
    np.add.at(y, idx, 1.0)
    return y


def _np_set(x):
    y = x.copy()
    y[1:3, 0] = 7.0
    return y


def test_creation():
    check(lambda: lnp.arange(2, 11, 3), lambda: np.arange(2, 11, 3))
    check(lambda: lnp.linspace(0.0, 1.0, 5), lambda: np.linspace(0.0, 1.0, 5))
    check(lambda: lnp.eye(3, 4, k=1), lambda: np.eye(3, 4, k=1))
    check(lambda: lnp.zeros((2, 3)) + lnp.ones((3,)), lambda: np.zeros((2, 3)) + np.ones((3,)))


def test_weak_scalar_promotion():
    x = np.arange(4, dtype=np.int32)
    out = lf.jit(lambda x: x * 2.5)(x)
    assert out.dtype == lf.float32
    np.testing.assert_allclose(np.asarray(out), x * 2.5)
    assert lf.jit(lambda x: x * 2)(x).dtype == lf.int32


def test_arctan2_of_subnormal_and_tiny_pairs():
    """atan2(0, 1.04e-43) is 0, not NaN (hypothesis found it: the subnormal x's reciprocal
    overflowed); tiny pairs keep their angle."""
    y = np.array([0.0, -0.0, 1e-44, 0.0, 1.0, 1e-40, 3.0, 1e30], np.float32)
    x = np.array([1.04e-43, 1.04e-43, -1e-43, -1e-43, 1e-43, 1e-43, -4.0, 1e-30], np.float32)
    got = np.asarray(lf.jit(lambda a, b: lnp.arctan2(a, b))(y, x))
    want = np.arctan2(y, x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_arctan2_of_two_infinities_is_a_diagonal():
    """inf / inf is NaN, but atan2(+-inf, +-inf) is +-pi/4 or +-3pi/4, as in C and NumPy."""
    inf = np.inf
    y = np.array([inf, -inf, inf, -inf, inf, 2.0, -inf, np.nan], np.float32)
    x = np.array([inf, inf, -inf, -inf, 1.0, inf, -3.0, inf], np.float32)
    got = np.asarray(lf.jit(lambda a, b: lnp.arctan2(a, b))(y, x))
    np.testing.assert_allclose(got, np.arctan2(y, x), rtol=1e-6, atol=0)

"""lnp.quantile / percentile / median and their nan forms against NumPy (float64 reference)."""
import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import LuminalError

R = np.random.default_rng(21)
X = R.standard_normal((4, 7, 5)).astype(np.float32)
XN = X.copy()
XN[1, 2, 3] = np.nan
XN[2, :, 1] = np.nan  # a row of NaN only along axis 1


def check(fn_l, fn_n, *args, rtol=1e-6):
    got = np.asarray(lf.jit(fn_l)(*args))
    want = fn_n(*[np.asarray(a, np.float64) for a in args])
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
def test_quantile_methods_and_axes(method, axis):
    q = [0.0, 0.1, 0.25, 0.5, 0.77, 1.0]
    check(lambda a: lnp.quantile(a, q, axis=axis, method=method),
          lambda a: np.quantile(a, q, axis=axis, method=method), X)


@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_median_and_percentile_keepdims(axis):
    check(lambda a: lnp.median(a, axis=axis, keepdims=True),
          lambda a: np.median(a, axis=axis, keepdims=True), X)
    check(lambda a: lnp.percentile(a, [5, 50, 95], axis=axis, keepdims=True),
          lambda a: np.percentile(a, [5, 50, 95], axis=axis, keepdims=True), X)


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_nan_rows_and_the_nan_forms():
    """A row holding NaN gives NaN; the nan forms skip NaN, and a row of only NaN gives NaN."""
    check(lambda a: lnp.quantile(a, 0.3, axis=1), lambda a: np.quantile(a, 0.3, axis=1), XN)
    check(lambda a: lnp.median(a, axis=1), lambda a: np.median(a, axis=1), XN)
    check(lambda a: lnp.nanquantile(a, [0.3, 0.9], axis=1), lambda a: np.nanquantile(a, [0.3, 0.9], axis=1), XN)
    check(lambda a: lnp.nanmedian(a, axis=1), lambda a: np.nanmedian(a, axis=1), XN)
    check(lambda a: lnp.nanpercentile(a, 75, axis=2, keepdims=True),
          lambda a: np.nanpercentile(a, 75, axis=2, keepdims=True), XN)
    got = np.asarray(lf.jit(lambda a: lnp.nanmedian(a, axis=1))(XN))
    assert np.isnan(got[2, 1]) and np.isfinite(got[1, 3])


def test_integers_a_traced_q_and_a_0d_input():
    ints = R.integers(-50, 50, (6, 3)).astype(np.int32)
    got = lf.jit(lambda a: lnp.median(a, axis=0))(ints)
    assert got.dtype == lnp.float32
    np.testing.assert_allclose(np.asarray(got), np.median(ints, axis=0), rtol=1e-6)
    q = np.array([0.2, 0.8], np.float32)
    check(lambda a, q: lnp.quantile(a, q, axis=-1), lambda a, q: np.quantile(a, q, axis=-1), X, q)
    check(lambda a: lnp.median(a), lambda a: np.median(a), np.float32(2.5))


def test_bfloat16_rounds_once():
    x = X.astype(ml_dtypes.bfloat16)
    got = lf.jit(lambda a: lnp.quantile(a, 0.37, axis=1))(x)
    assert got.dtype == lnp.bfloat16
    want = np.quantile(x.astype(np.float64), 0.37, axis=1)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=2**-8, atol=1e-6)


def test_median_along_a_dynamic_axis():
    f = lf.jit(lambda a: (lnp.median(a, axis=0), lnp.quantile(a, [0.1, 0.9], axis=0)),
               dynamic_axes={"a": {0: "s"}})
    for s in (1, 2, 5, 8):
        y = R.standard_normal((s, 3)).astype(np.float32)
        med, qs = f(y)
        np.testing.assert_allclose(np.asarray(med), np.median(y, axis=0), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(qs), np.quantile(y, [0.1, 0.9], axis=0), rtol=1e-6, atol=1e-6)
    assert f.trace_count == 1


def test_bad_arguments_name_the_function():
    with pytest.raises(ValueError, match=r"quantile: q must lie in \[0, 1\]"):
        lf.jit(lambda a: lnp.quantile(a, 1.5))(X)
    with pytest.raises(ValueError, match=r"percentile: q must lie in \[0, 100\]"):
        lf.jit(lambda a: lnp.percentile(a, -1))(X)
    with pytest.raises(ValueError, match="method 'inverted_cdf' is not supported"):
        lf.jit(lambda a: lnp.quantile(a, 0.5, method="inverted_cdf"))(X)
    with pytest.raises(TypeError, match="median: out= is not supported"):
        lf.jit(lambda a: lnp.median(a, out=a))(X)
    with pytest.raises(LuminalError, match="repeated axis"):
        lf.jit(lambda a: lnp.median(a, axis=(1, -2)))(X)


def test_eager_median():
    np.testing.assert_allclose(np.asarray(lnp.median(np.array([3.0, 1.0, 2.0, 10.0], np.float32))), 2.5)

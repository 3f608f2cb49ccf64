"""The NaN-ignoring reductions and scans (nanmax ... nanargmin) against NumPy in float64, slices of
NaN only included, and var/std with ``where`` and with ddof past the count."""
import warnings

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(5)
X = R.standard_normal((4, 5)).astype(np.float32)
X[0, 1] = np.nan
X[2, :] = np.nan  # a row of NaN only
X[3, :4] = np.nan
X[:, 3] = np.nan  # a column of NaN only

NAMES = ["nanmax", "nanmin", "nanprod", "nancumsum", "nancumprod", "nanvar", "nanstd", "nansum",
         "nanmean", "nanargmax", "nanargmin"]


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("name", NAMES)
def test_nan_functions_match_numpy(name, axis):
    if name.startswith("nanarg") and axis is None:
        axis = 1
    got = np.asarray(lf.jit(lambda a: getattr(lnp, name)(a, axis=axis))(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name.startswith("nanarg"):  # NumPy raises for a slice of NaN only; -1 there (JAX's)
            filled = np.where(np.isnan(X), -np.inf if name == "nanargmax" else np.inf, X)
            want = getattr(np, name[3:])(filled, axis=axis)
            want = np.where(np.all(np.isnan(X), axis=axis), -1, want)
        else:
            want = getattr(np, name)(X.astype(np.float64), axis=axis)
    assert got.shape == np.shape(want)
    # sums of a few unit values: an absolute bound for the cancellation in running sums
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_nan_functions_keepdims_ddof_and_ints():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ddof in (0, 1, 2, 5):
            np.testing.assert_allclose(np.asarray(lnp.nanvar(X, axis=1, ddof=ddof, keepdims=True)),
                                       np.nanvar(X.astype(np.float64), axis=1, ddof=ddof, keepdims=True),
                                       rtol=1e-5, equal_nan=True)
    i = R.integers(-5, 6, (3, 4)).astype(np.int32)
    for name in ("nanmax", "nanmin", "nanprod", "nansum", "nanargmax", "nanargmin"):
        got, want = np.asarray(getattr(lnp, name)(i, axis=0)), getattr(np, name)(i, axis=0)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.int32


def test_var_and_std_take_where_and_a_ddof_past_the_count():
    x = R.standard_normal((3, 6)).astype(np.float32)
    w = R.random((3, 6)) > 0.4
    w[1] = False
    w[2, 1:] = False  # one element: ddof=1 divides by 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ddof in (0, 1):
            for fn in ("var", "std"):
                got = lf.jit(lambda a, m: getattr(lnp, fn)(a, axis=1, ddof=ddof, where=m))(x, w)
                want = getattr(np, fn)(x.astype(np.float64), axis=1, ddof=ddof, where=w)
                np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, equal_nan=True)
        for ddof in (2, 3):  # past the count: NumPy divides by max(n - ddof, 0), so inf
            np.testing.assert_array_equal(np.asarray(lnp.var(np.float32([1, 2]), ddof=ddof)),
                                          np.var(np.float32([1, 2]), ddof=ddof))
        f = lf.jit(lambda a: lnp.var(a, ddof=3), dynamic_axes={"a": {0: "s"}})
        for n in (2, 5):
            v = R.standard_normal(n).astype(np.float32)
            np.testing.assert_allclose(np.asarray(f(v)), np.var(v.astype(np.float64), ddof=3), rtol=1e-5)

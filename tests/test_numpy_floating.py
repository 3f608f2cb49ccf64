"""frexp and ldexp (frontend/numpy/_floating.py) bit for bit against NumPy: normal, subnormal,
huge, signed zeros, infinities and NaN, and exponents that overflow or underflow."""
import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(17)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38,
           3.4028235e38, -3.4028235e38, 1.0, 0.5, 2.0, -4.0, 0.99999994, 1.0000001]
X = np.concatenate([R.standard_normal(300) * 10.0 ** R.integers(-45, 39, 300), SPECIAL]).astype(np.float32)


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want)), "the sign of a zero or NaN differs"


def test_frexp_matches_numpy_bit_for_bit():
    man, exp = lf.jit(lnp.frexp)(X)
    want_man, want_exp = np.frexp(X)
    _same_bits(man, want_man)
    _same_bits(exp, want_exp.astype(np.int32))
    man16, exp16 = lnp.frexp(np.array([3.0, -0.0, 6e-5, 65504.0], np.float16))
    want16 = np.frexp(np.array([3.0, -0.0, 6e-5, 65504.0], np.float16))
    _same_bits(man16, want16[0])
    _same_bits(exp16, want16[1].astype(np.int32))


def test_ldexp_matches_numpy_bit_for_bit():
    n = R.integers(-330, 330, X.size).astype(np.int32)
    with np.errstate(over="ignore", under="ignore"):
        _same_bits(lf.jit(lnp.ldexp)(X, n), np.ldexp(X, n))
        # results near and below the smallest normal, where the one rounding happens
        m = ((R.random(4000) + 0.5) * 2.0 ** R.integers(-30, 30, 4000)).astype(np.float32)
        k = R.integers(-200, -90, 4000).astype(np.int32)
        _same_bits(lf.jit(lnp.ldexp)(m, k), np.ldexp(m, k))
        _same_bits(lnp.ldexp(np.float32(1.5), 200), np.ldexp(np.float32(1.5), 200))  # inf
    _same_bits(lnp.ldexp(np.array([1.5], np.float16), 3), np.ldexp(np.array([1.5], np.float16), np.int32(3)))
    _same_bits(lnp.ldexp(np.int32([3, -5]), 2), np.ldexp(np.int32([3, -5]), 2).astype(np.float32))
    # frexp's parts put back together give x again
    man, exp = lnp.frexp(X)
    _same_bits(lnp.ldexp(man, exp), X)

"""Unary math at the edges of float32, against NumPy: infinities, NaN, signed zeros, subnormals,
the overflow thresholds and huge arguments, on every backend. Each function is built from HLIR
primitives, so an edge a formula misses (floor(inf) = inf - fmod(inf, 1) = nan, cos(1e5) =
sin(1e5 + pi/2) with the sum rounded, sinh(89) through an overflowing exp(89), asinh(1e-7) by
log(1 + ...) cancelling) shows here as a wrong value, not a small error."""
import importlib.util
import warnings

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

EDGES = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-38, 1.17549435e-38, 3.4028235e38,
                  -3.4028235e38, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-7, -1e-7, 1e7, 88.7, 89.0, -89.0, -87.0, -104.0,
                  1e20, -1e20, 3.0, 0.99999994, 1.0000001, -0.99999994, 100.0, -100.0, 1e-20, 16777217.0, 2.5, -2.5,
                  0.1, 8388607.5, 1.5707964, 4.712389, 1e5, -3e9], np.float32)

UNARY = ["sqrt", "cbrt", "absolute", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
         "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad",
         "rad2deg", "sinc", "floor", "ceil", "trunc", "rint", "square", "reciprocal", "negative", "isnan", "isinf",
         "isfinite", "signbit", "nan_to_num", "isposinf", "isneginf"]


def _backends():
    out = ["numpy"]
    if importlib.util.find_spec("mlx") is not None:
        out.append("mlx")
    return out + [pytest.param("cuda", marks=pytest.mark.gpu)]


def _wrong(got, want, rtol):
    """(x, got, want) where got is not want: NaN where NumPy is not (or the reverse), another
    infinity, or a finite value off by more than rtol (absolute near zero: 1e-37)."""
    bad = []
    for x, a, b in zip(EDGES, np.asarray(got, np.float64), np.asarray(want, np.float64)):
        if np.isnan(a) != np.isnan(b) or (np.isinf(b) and a != b) or (
                np.isfinite(b) and not np.isclose(a, b, rtol=rtol, atol=1e-37)):
            bad.append((float(x), float(a), float(b)))
    return bad


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", UNARY)
def test_unary_functions_at_the_edges(backend, name):
    got = lf.jit(getattr(lnp, name), backend=backend)(EDGES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, name)(EDGES)  # NumPy's float32 results (sinc(1) is sin(float32 pi) / pi)
    rtol = 2e-5 if backend == "numpy" else 5e-5  # (a backend's own sin/exp/log2 differ by ulps)
    assert not _wrong(got, want, rtol), f"{name} on {backend}: (x, got, NumPy) {_wrong(got, want, rtol)[:6]}"


def _zero_signs_differ(got, want):
    """The inputs where both results are zeros of different signs (-0.0 against +0.0)."""
    got, want = np.asarray(got), np.asarray(want)
    z = (got == 0) & (want == 0)
    return EDGES[z & (np.signbit(got) != np.signbit(want))]


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("isnan", "isinf", "isfinite", "signbit",
                                                                "isposinf", "isneginf")])
@pytest.mark.parametrize("shape", [(42,), (6, 7)], ids=["1d", "2d"])
def test_zero_results_keep_numpy_sign(backend, name, shape):
    """The sign of a zero result is NumPy's: odd functions keep -0.0 (tanh, arctan, cbrt, sin),
    trunc(-0.5) and ceil(-0.5) are -0.0, abs(-0.0) is +0.0. A 1-d array is where the search kept
    lnp.where's stacked form, whose Add made every chosen -0.0 a +0.0."""
    x = EDGES.reshape(shape)
    got = lf.jit(getattr(lnp, name), backend=backend)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, name)(x)
    bad = _zero_signs_differ(np.asarray(got).reshape(-1), want.reshape(-1))
    assert bad.size == 0, f"{name} on {backend}, shape {shape}: zero of the other sign at x = {bad}"


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("shape", [(), (1,), (4,), (2, 2), (2, 3, 4)])
def test_where_keeps_signed_zeros_and_nans(backend, shape):
    """lnp.where returns the chosen element itself: -0.0 and NaN from either branch, a literal
    -0.0 too, at every rank (0-d and 1-d select through their own rule)."""
    n = int(np.prod(shape))
    a = np.resize(np.array([-0.0, 0.5, 3.0, np.nan, -0.0, -2.0], np.float32), n).reshape(shape)
    b = np.resize(np.array([1.0, -0.0, -0.0, -0.0, np.nan, 0.0], np.float32), n).reshape(shape)
    cases = {
        "x_or_y": (lambda a, b: lnp.where(a < 1, a, b), lambda a, b: np.where(a < 1, a, b)),
        "y_or_x": (lambda a, b: lnp.where(a < 1, b, a), lambda a, b: np.where(a < 1, b, a)),
        "literal": (lambda a, b: lnp.where(b == 0, -0.0, a), lambda a, b: np.where(b == 0, np.float32(-0.0), a)),
        "scalar_y": (lambda a, b: lnp.where(a < 1, a, 2.0), lambda a, b: np.where(a < 1, a, np.float32(2.0))),
    }
    for what, (f, ref) in cases.items():
        got = np.asarray(lf.jit(f, backend=backend)(a, b))
        want = ref(a, b)
        np.testing.assert_array_equal(got, want, err_msg=f"{what} on {backend}, shape {shape}")
        assert (np.signbit(got) == np.signbit(want)).all(), \
            f"{what} on {backend}, shape {shape}: signs {np.signbit(got)} against NumPy's {np.signbit(want)}"


@pytest.mark.gpu
def test_exp_on_cuda_is_the_devices_expf():
    """A fused exp renders as CUDA's expf (within 2 ulp), not exp2f of x * log2(e) rounded to
    float32 (|x| * 6e-8 relative: 5e-6 near 88). One kernel: the generic genome fuses it."""
    x = np.linspace(-103.0, 88.72, 200001, dtype=np.float32)
    got = np.asarray(lf.jit(lnp.exp, backend="cuda", search=lf.SearchOptions(limit=1, cache=False))(x))
    want = np.exp(x.astype(np.float64))
    normal = want > np.finfo(np.float32).tiny
    rel = np.abs(got[normal] - want[normal]) / want[normal]
    assert rel.max() <= 2.5e-7, f"exp on cuda: worst relative error {rel.max():.3g} at x = {x[normal][rel.argmax()]}"


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("lo,hi", [(0, 7), (7, 1e3), (1e3, 1e5), (1e5, 1e7), (1e7, 1e15), (1e15, 3.4e38)])
def test_cos_and_tan_over_the_whole_range(backend, lo, hi):
    """cos keeps its relative accuracy near its zeros up to |x| = 1e15 (the Sin primitive reduces
    exactly; cos is read from sin(x) and sin(2x), exact arguments); beyond, 1 - 2 sin(x/2)^2 is
    right to 1e-7 absolute."""
    r = np.random.default_rng(int(lo) % 1000)
    x = (r.uniform(lo, hi, 4000) * r.choice([-1, 1], 4000)).astype(np.float32)
    x = np.concatenate([x, np.float32([np.pi / 2, 3 * np.pi / 2, 1.5707964, 4.712389, 7853.9824])])
    # (MLX's own sin is right to ~1.2e-7 absolute past 1e5, not relative near its zeros)
    tol = 1e-6 if backend == "numpy" else (2e-5 if hi <= 1e5 else 2e-4)
    for name in ("cos", "tan"):
        got = np.asarray(lf.jit(getattr(lnp, name), backend=backend)(x), np.float64)
        want = getattr(np, name)(x.astype(np.float64))
        if lo >= 1e15:  # absolute there (tan's relative to 1 + tan^2, its derivative's scale)
            err = np.abs(got - want) / (1 + want * want) if name == "tan" else np.abs(got - want)
            tol = 3e-7 if backend == "numpy" else 2e-6
        else:
            err = np.abs(got - want) / np.maximum(np.abs(want), 1e-3)
        assert err.max() < tol, f"{name} on {backend} in [{lo:g}, {hi:g}]: x = {x[err.argmax()]!r}, error {err.max():.2e}"


@pytest.mark.parametrize("name,xs", [
    ("sinh", [1e-7, -3e-6, 1e-30, 88.5, 89.4, -89.4]), ("cosh", [88.5, 89.4, -89.4, 1e-7]),
    ("arcsinh", [1e-7, -2e-5, 1e-30, 3e19, -3e38]), ("arccosh", [1.0, 1.0000001, 1.5, 3e19, 3e38]),
    ("arctanh", [1e-7, -2e-5, 1e-30, 0.9999999, -0.5]), ("log1p", [1e-8, -1e-8, 3e38, np.inf]),
])
def test_hyperbolics_near_zero_and_near_overflow(name, xs):
    """Cancellation near 0 and overflow near 89 give wrong values, not small errors. (exp is
    exp2(x * log2 e): the product's rounding costs up to |x| * 6e-8 relative, 3.6e-6 at 89.4 on
    CUDA and MLX, run DO; the NumPy backend reads it as np.exp. Hence 1e-5.)"""
    x = np.array(xs, np.float32)
    got = np.asarray(lf.jit(getattr(lnp, name))(x), np.float64)
    want = getattr(np, name)(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=name)


PAIR_VALUES = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, 1e-38, 3.4e38, -3.4e38, 1.0, -1.0, 0.5, -2.5, 2.0,
                        3.0, 1e20, -7.0, 1e-20, 10.0], np.float32)
BINARY = ["add", "subtract", "multiply", "divide", "power", "float_power", "hypot", "logaddexp", "logaddexp2", "fmod",
          "mod", "remainder", "floor_divide", "copysign", "maximum", "minimum", "fmax", "fmin", "arctan2", "heaviside"]


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", BINARY)
def test_binary_functions_at_the_edges(backend, name):
    """Every pair of edge values (C99's special cases of pow, hypot(inf, nan) = inf, logaddexp
    of two equal infinities, atan2 of nan)."""
    a, b = (np.array(v, np.float32) for v in zip(*[(p, q) for p in PAIR_VALUES for q in PAIR_VALUES]))
    got = np.asarray(lf.jit(getattr(lnp, name), backend=backend)(a, b), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, name)(a, b).astype(np.float32).astype(np.float64)
    rtol = 2e-5 if backend == "numpy" else 5e-5
    bad = [(float(x), float(y), float(p), float(q)) for x, y, p, q in zip(a, b, got, want)
           if np.isnan(p) != np.isnan(q) or (np.isinf(q) and p != q)
           or (np.isfinite(q) and not np.isclose(p, q, rtol=rtol, atol=1e-37))]
    assert not bad, f"{name} on {backend}: (x, y, got, NumPy) {bad[:6]}"


ROWS = np.array([[1, 2, 3, 4], [np.inf, 1, 2, 3], [-np.inf, 1, 2, 3], [np.nan, 1, 2, 3], [np.inf, -np.inf, 0, 1],
                 [-np.inf] * 4, [np.inf] * 4, [3e38, 3e38, 1, 1], [-0.0, 0.0, -0.0, 0.0], [1e-45, 1e-45, 0, 0]],
                np.float32)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "ptp",
                                  "nansum", "nanmax", "nanmean", "cumsum", "cumprod", "median", "nanmedian",
                                  "logsumexp"])
def test_row_reductions_at_the_edges(name):
    """Rows of infinities, NaN, overflowing sums and signed zeros (median of equal infinities is
    that infinity: NumPy takes the mean of the middle two, not a lerp through inf - inf)."""
    got = np.asarray(lf.jit(lambda x: getattr(lnp, name)(x, axis=1))(ROWS), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "logsumexp":
            m = np.max(ROWS.astype(np.float64), axis=1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            want = np.log(np.sum(np.exp(ROWS - m), axis=1)) + m[:, 0]
        else:
            want = np.asarray(getattr(np, name)(ROWS, axis=1), np.float64)
    bad = [(k, float(p), float(q)) for k, (p, q) in enumerate(zip(got.ravel(), want.ravel()))
           if np.isnan(p) != np.isnan(q) or (np.isinf(q) and p != q) or (np.isfinite(q) and not np.isclose(p, q, rtol=1e-5))]
    assert not bad, f"{name}: (row, got, NumPy) {bad}"


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", ["equal", "not_equal", "less_equal", "greater_equal", "less", "greater"])
@pytest.mark.parametrize("literal", [0.0, -2.5, 3.4028235e38, np.inf, -np.inf, np.nan])
def test_comparisons_with_a_literal_at_the_edges(backend, name, literal):
    """Against a finite literal, equal / less_equal test NaN with one compare of the array (the
    other compare already excludes the infinity on its side); either operand order."""
    fn = getattr(lnp, name)
    ref = getattr(np, name)
    c = np.float32(literal)
    for order in (0, 1):
        jf = lf.jit(lambda a: fn(a, literal) if order == 0 else fn(literal, a), backend=backend)
        got = np.asarray(jf(EDGES))
        want = ref(EDGES, c) if order == 0 else ref(c, EDGES)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} order {order} on {backend}")


@pytest.mark.parametrize("backend", _backends())
def test_abs_and_copysign_give_the_sign_of_zero(backend):
    x = np.array([-0.0, 0.0, -1.5, np.nan, -np.inf], np.float32)
    got = np.asarray(lf.jit(lnp.abs, backend=backend)(x))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.abs(x)))
    got = np.asarray(lf.jit(lambda a: lnp.copysign(a, 1.0), backend=backend)(x))
    np.testing.assert_array_equal(np.signbit(got[:3]), [False, False, False])


@pytest.mark.parametrize("backend", _backends())
def test_expm1_in_bfloat16_is_computed_in_float32_and_rounded_once(backend):
    """Half-precision inputs go through float32 and are rounded once (computed_in_float32):
    within half a bfloat16 unit of the exact value (a bfloat16 intermediate gave a whole unit)."""
    import ml_dtypes

    x = np.linspace(-3, 3, 257).astype(ml_dtypes.bfloat16)
    got = np.asarray(lf.jit(lnp.expm1, backend=backend)(x)).astype(np.float64)
    want = np.expm1(x.astype(np.float64))
    unit = 2.0 ** (np.floor(np.log2(np.abs(want) + 1e-30)) - 7)
    assert np.max(np.abs(got - want) / unit) <= 0.5 + 1e-9

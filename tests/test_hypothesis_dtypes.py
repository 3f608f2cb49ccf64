"""Traced luminal_fn.numpy vs NumPy over every dtype, with hypothesis-drawn shapes (size-1 and
broadcast dims, 0-d arrays), values and axes (negative ones included).

References are computed by NumPy in float64 on the very same input values (every float16,
bfloat16 and int32 value is exact in float64). Tolerances are the documented ones
(docs/api.md, "Dtypes"): float32 1e-5 relative; float16 and bfloat16 one unit of their
precision (eps = 2^-10 resp. 2^-7) relative plus one eps absolute, because half-precision
math is computed in float32 and rounded once. Integer and bool results are exact.
"""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.ir import dtypes as dt

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, I32, BOOL = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
FLOATS = [F32, F16, BF16]
IDS = {F32: "float32", F16: "float16", BF16: "bfloat16", I32: "int32", BOOL: "bool"}

# (rtol, atol) against the float64 reference: the documented tolerance of each float dtype
TOL = {F32: (1e-5, 2e-6), F16: (2.0 ** -10, 2.0 ** -10), BF16: (2.0 ** -7, 2.0 ** -7)}

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def values(draw, dtype, shape, lo, hi):
    """An array of ``dtype`` with values in [lo, hi] (ints: the integers in it, bool: any)."""
    if dtype == BOOL:
        return draw(hnp.arrays(BOOL, shape))
    if dtype == I32:
        return draw(hnp.arrays(I32, shape, elements=st.integers(math.ceil(lo), math.floor(hi))))
    lo32, hi32 = np.float32(lo), np.float32(hi)  # the float32 bounds inside [lo, hi]
    lo32 = lo32 if lo32 >= lo else np.nextafter(lo32, np.float32(np.inf))
    hi32 = hi32 if hi32 <= hi else np.nextafter(hi32, np.float32(-np.inf))
    x = draw(hnp.arrays(F32, shape, elements=st.floats(float(lo32), float(hi32), width=32)))
    return x.astype(dtype)


_REFERENCE = lf.get_backend("numpy")


def traced(fn, *args) -> lf.Array:
    """``fn`` traced by lf.jit, its HLIR run on the NumPy backend's reference executor.

    A full ``lf.jit`` call also builds the e-graph and searches kernels, 50-600 ms per drawn
    case; the dtype semantics tested here live in the traced graph, every candidate the search
    can pick is checked against this reference in test_optimizer.py / test_search.py, and
    test_compiled_path_every_dtype below runs samples through the whole pipeline."""
    tr = lf.jit(fn).trace(*args)
    bufs = [_REFERENCE.from_numpy(dt.narrow_array(np.asarray(a))) for a in args]
    (out,) = _REFERENCE.compile(tr.hlir).run(bufs, {})
    return lf.Array(out, _REFERENCE, tuple(out.shape), dt.canonicalize(out.dtype))


def run(fn, *args):
    return np.asarray(traced(fn, *args))


def assert_matches(got, ref, dtype, scale=None, what=""):
    """got (luminal, dtype ``dtype``) against the float64 reference ``ref``."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    if dtype in TOL:
        rtol, atol = TOL[dtype]
        if scale is not None:  # sums: the error scales with the magnitudes summed
            atol = atol * np.maximum(np.asarray(scale, np.float64), 1.0)
        g = got.astype(np.float64)
        bad = ~(np.abs(g - ref) <= rtol * np.abs(ref) + atol)
        bad &= ~(np.isnan(g) & np.isnan(ref))
        bad &= ~(np.isinf(ref) & (g == ref))
        # a result beyond the dtype's range is inf in it (float16 cumprod of sixteen 2s: 65536)
        top = float(ml_dtypes.finfo(dtype).max)
        bad &= ~((np.abs(ref) > top) & np.isinf(g) & (np.sign(g) == np.sign(ref)))
        assert not bad.any(), f"{what} {IDS.get(dtype, dtype)}: got {got[bad]} want {ref[bad]}"
    else:
        np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64), err_msg=what)


# ---- elementwise unary ------------------------------------------------------------------------
def _rsqrt(x):
    return 1.0 / np.sqrt(x)


# name -> (low, high, NumPy reference)
UNARY = {
    "negative": (-6, 6, np.negative), "square": (-6, 6, np.square), "absolute": (-6, 6, np.abs),
    "sign": (-3, 3, np.sign), "floor": (-6, 6, np.floor), "ceil": (-6, 6, np.ceil),
    "trunc": (-6, 6, np.trunc), "rint": (-6, 6, np.rint), "exp": (-6, 6, np.exp),
    "exp2": (-8, 8, np.exp2), "expm1": (-3, 3, np.expm1), "log": (0.05, 50, np.log),
    "log2": (0.05, 50, np.log2), "log10": (0.05, 50, np.log10), "log1p": (-0.5, 6, np.log1p),
    "sqrt": (0, 50, np.sqrt), "rsqrt": (0.05, 50, _rsqrt), "reciprocal": (0.1, 20, np.reciprocal),
    "sin": (-6, 6, np.sin), "cos": (-6, 6, np.cos), "tan": (-1.2, 1.2, np.tan),
    "sinh": (-4, 4, np.sinh), "cosh": (-4, 4, np.cosh), "tanh": (-4, 4, np.tanh),
    "arctan": (-6, 6, np.arctan), "arcsinh": (-6, 6, np.arcsinh), "arccosh": (1, 8, np.arccosh),
    "arcsin": (-0.95, 0.95, np.arcsin), "arccos": (-0.95, 0.95, np.arccos),
    "arctanh": (-0.9, 0.9, np.arctanh), "cbrt": (-8, 8, np.cbrt), "sinc": (-3, 3, np.sinc),
    "deg2rad": (-360, 360, np.deg2rad), "rad2deg": (-6, 6, np.rad2deg),
}
# int32 input keeps its dtype for these (NumPy and JAX agree); the rest give float32
INT_PRESERVING = {"negative", "square", "absolute", "sign", "floor", "ceil", "trunc", "rint"}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data(), dtype=st.sampled_from(FLOATS + [I32]), shape=shapes)
def test_unary_every_dtype(name, data, dtype, shape):
    lo, hi, ref_fn = UNARY[name]
    if dtype == I32 and math.ceil(lo) > math.floor(hi):
        return
    x = values(data.draw, dtype, shape, lo, hi)
    out = traced(lambda x: getattr(lnp, name)(x), x)
    want_dtype = dtype if (dtype != I32 or name in INT_PRESERVING) else F32
    assert np.dtype(out.dtype.np) == want_dtype, (name, out.dtype)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    assert_matches(np.asarray(out), ref, want_dtype, what=name)


@given(data=st.data(), shape=shapes)
def test_bool_unary_and_predicates(data, shape):
    x = values(data.draw, BOOL, shape, 0, 1)
    for name in ("logical_not", "isnan", "isinf", "isfinite", "absolute", "bitwise_not"):
        got = run(lambda x: getattr(lnp, name)(x), x)
        want = getattr(np, name)(x)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)


@given(data=st.data(), dtype=st.sampled_from(FLOATS), shape=shapes)
def test_float_predicates_with_special_values(data, dtype, shape):
    specials = st.sampled_from([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan])
    x = data.draw(hnp.arrays(F32, shape, elements=specials)).astype(dtype)
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit", "sign"):
        got = run(lambda x: getattr(lnp, name)(x), x)
        want = getattr(np, name)(x.astype(np.float64))
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=name)


# ---- elementwise binary with broadcasting -----------------------------------------------------
# name -> (low, high for both operands, NumPy reference, second operand kept away from 0)
BINARY = {
    "add": (-8, 8, np.add, False), "subtract": (-8, 8, np.subtract, False),
    "multiply": (-8, 8, np.multiply, False), "divide": (-8, 8, np.divide, True),
    "maximum": (-8, 8, np.maximum, False), "minimum": (-8, 8, np.minimum, False),
    "fmax": (-8, 8, np.fmax, False), "fmin": (-8, 8, np.fmin, False),
    "power": (0.25, 3, np.power, False), "arctan2": (-4, 4, np.arctan2, False),
    "hypot": (-8, 8, np.hypot, False), "logaddexp": (-6, 6, np.logaddexp, False),
    "logaddexp2": (-6, 6, np.logaddexp2, False), "copysign": (-8, 8, np.copysign, False),
    "fmod": (-8, 8, np.fmod, True), "mod": (-8, 8, np.mod, True),
    "floor_divide": (-8, 8, np.floor_divide, True),
}
COMPARE = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
           "logical_and", "logical_or", "logical_xor"]
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=4)


def _away_from_zero(y, dtype):
    """Move |y| < 0.25 to 0.5 (same sign): division by ~0 only tests overflow."""
    if dtype == I32:
        return np.where(y == 0, 1, y).astype(I32)
    yf = y.astype(np.float32)
    return np.where(np.abs(yf) < 0.25, np.copysign(0.5, yf), yf).astype(dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data(), dtype=st.sampled_from(FLOATS + [I32]), shapes=pairs)
def test_binary_broadcast_every_dtype(name, data, dtype, shapes):
    lo, hi, ref_fn, nonzero = BINARY[name]
    if dtype == I32 and name in ("power", "arctan2", "hypot", "logaddexp", "logaddexp2", "copysign"):
        dtype = F32  # float-only in the suite (their int forms are float32 results, tested below)
    (sa, sb), _ = shapes
    a = values(data.draw, dtype, sa, lo, hi)
    b = values(data.draw, dtype, sb, lo, hi)
    if nonzero:
        b = _away_from_zero(b, dtype)
    out = traced(lambda a, b: getattr(lnp, name)(a, b), a, b)
    want_dtype = F32 if (dtype == I32 and name == "divide") else dtype
    assert np.dtype(out.dtype.np) == want_dtype, (name, out.dtype)
    with np.errstate(all="ignore"):
        ref = ref_fn(a.astype(np.float64), b.astype(np.float64))
    if name in ("fmod", "mod") and dtype in FLOATS:
        # exact in any binary format, but mod's r + y rounds once to the dtype
        ref_rounded = ref.astype(dtype).astype(np.float64)
        assert_matches(np.asarray(out), ref_rounded, dtype, what=name)
        return
    assert_matches(np.asarray(out), ref, want_dtype, what=name)


@pytest.mark.parametrize("name", COMPARE)
@given(data=st.data(), dtype=st.sampled_from(FLOATS + [I32, BOOL]), shapes=pairs)
def test_comparisons_and_logic_every_dtype(name, data, dtype, shapes):
    (sa, sb), _ = shapes
    # a small value set makes ties (equal elements) common
    a = values(data.draw, dtype, sa, -2, 2)
    b = values(data.draw, dtype, sb, -2, 2)
    got = run(lambda a, b: getattr(lnp, name)(a, b), a, b)
    want = getattr(np, name)(a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want, err_msg=name)


PROMOTIONS = [(F32, F16, F32), (F16, BF16, F32), (I32, F16, F16), (I32, BF16, BF16),
              (BOOL, I32, I32), (BOOL, F16, F16), (I32, F32, F32), (BF16, F32, F32)]


@pytest.mark.parametrize("da,db,want", PROMOTIONS, ids=lambda d: IDS.get(d, str(d)))
@given(data=st.data(), shapes=pairs)
def test_mixed_dtype_promotion(da, db, want, data, shapes):
    (sa, sb), _ = shapes
    a = values(data.draw, da, sa, -4, 4)
    b = values(data.draw, db, sb, -4, 4)
    for name, ref_fn in (("add", np.add), ("multiply", np.multiply), ("maximum", np.maximum)):
        out = traced(lambda a, b: getattr(lnp, name)(a, b), a, b)
        assert np.dtype(out.dtype.np) == want, (name, out.dtype)
        assert_matches(np.asarray(out), ref_fn(a.astype(np.float64), b.astype(np.float64)), want,
                       what=name)


@given(data=st.data(), dtype=st.sampled_from(FLOATS + [I32]), shape=shapes,
       scalar=st.sampled_from([2, -3, 0.5, 1.25]))
def test_weak_python_scalars_keep_the_array_dtype(data, dtype, shape, scalar):
    x = values(data.draw, dtype, shape, -4, 4)
    out = traced(lambda x: x * scalar + scalar, x)
    want = F32 if (dtype == I32 and isinstance(scalar, float)) else dtype
    assert np.dtype(out.dtype.np) == want, out.dtype
    assert_matches(np.asarray(out), x.astype(np.float64) * scalar + scalar, want, what="x*s+s")


@given(data=st.data(), dtype=st.sampled_from(FLOATS + [I32, BOOL]), shapes=hnp.mutually_broadcastable_shapes(
    num_shapes=3, min_dims=0, max_dims=3, min_side=1, max_side=4))
def test_where_every_dtype(data, dtype, shapes):
    (sc, sa, sb), _ = shapes
    c = values(data.draw, BOOL, sc, 0, 1)
    a = values(data.draw, dtype, sa, -4, 4)
    b = values(data.draw, dtype, sb, -4, 4)
    out = traced(lnp.where, c, a, b)
    assert np.dtype(out.dtype.np) == dtype
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64),
                                  np.where(c, a.astype(np.float64), b.astype(np.float64)))


# ---- reductions -------------------------------------------------------------------------------
@st.composite
def array_and_axis(draw, dtypes, lo=-4, hi=4, tuple_axes=True):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes)
    x = values(draw, dtype, shape, lo, hi)
    nd = len(shape)
    choices = [st.none()]
    if nd:
        choices.append(st.integers(-nd, nd - 1))
        if tuple_axes:
            choices.append(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                                    unique_by=lambda a: a % nd).map(tuple))
    axis = draw(st.one_of(*choices))
    return x, axis, draw(st.booleans())


def _reduced_dtype(name, dtype):
    """The luminal result dtype (JAX's rules: int32 sums stay int32, bool sums become int32)."""
    if name in ("argmax", "argmin", "count_nonzero"):
        return I32
    if name in ("any", "all"):
        return BOOL
    if name in ("mean", "var", "std", "logsumexp"):
        return dtype if dtype in FLOATS else F32
    if name in ("sum", "prod", "cumsum") and dtype == BOOL:
        return I32
    return dtype


REDUCE = {  # name -> (dtypes, value range, NumPy reference(x, axis, keepdims) in float64)
    "sum": (FLOATS + [I32, BOOL], (-4, 4), lambda x, a, k: np.sum(x, a, keepdims=k)),
    "mean": (FLOATS + [I32, BOOL], (-4, 4), lambda x, a, k: np.mean(x, a, keepdims=k)),
    "max": (FLOATS + [I32, BOOL], (-4, 4), lambda x, a, k: np.max(x, a, keepdims=k)),
    "min": (FLOATS + [I32, BOOL], (-4, 4), lambda x, a, k: np.min(x, a, keepdims=k)),
    "prod": (FLOATS + [I32], (-2, 2), lambda x, a, k: np.prod(x, a, keepdims=k)),
    "var": (FLOATS + [I32], (-4, 4), lambda x, a, k: np.var(x, a, keepdims=k)),
    "std": (FLOATS + [I32], (-4, 4), lambda x, a, k: np.std(x, a, keepdims=k)),
    "ptp": (FLOATS + [I32], (-4, 4), lambda x, a, k: np.ptp(x, a, keepdims=k)),
    "any": (FLOATS + [I32, BOOL], (-1, 1), lambda x, a, k: np.any(x, a, keepdims=k)),
    "all": (FLOATS + [I32, BOOL], (-1, 1), lambda x, a, k: np.all(x, a, keepdims=k)),
    "count_nonzero": (FLOATS + [I32, BOOL], (-1, 1),
                      lambda x, a, k: np.count_nonzero(x, a, keepdims=k)),
    "logsumexp": (FLOATS, (-6, 6), None),
}


def _logsumexp64(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else None)


@pytest.mark.parametrize("name", sorted(REDUCE))
@given(data=st.data())
def test_reductions_every_dtype(name, data):
    dtypes, (lo, hi), ref_fn = REDUCE[name]
    x, axis, keepdims = data.draw(array_and_axis(dtypes, lo, hi))
    if name == "count_nonzero" and x.ndim == 0:
        axis = None
    out = traced(lambda x: getattr(lnp, name)(x, axis=axis, keepdims=keepdims), x)
    want_dtype = _reduced_dtype(name, x.dtype)
    assert np.dtype(out.dtype.np) == want_dtype, (name, out.dtype, want_dtype)
    x64 = x.astype(np.float64)
    ref = _logsumexp64(x64, axis, keepdims) if name == "logsumexp" else ref_fn(x64, axis, keepdims)
    if name == "prod" and x.dtype == I32:  # int32 products wrap modulo 2^32 (docs/api.md, as JAX)
        ref = np.prod(x, axis, keepdims=keepdims, dtype=np.int32)
    ref = np.asarray(ref, np.float64)
    scale = None
    if name in ("sum", "mean", "var", "std") and want_dtype in TOL:
        # the float32 accumulation error grows with the summed magnitudes
        n = max(x.size // max(ref.size, 1), 1)
        scale = np.sum(np.abs(x64), axis=axis, keepdims=keepdims) * (1.0 if name == "sum" else 4.0 / n)
    assert_matches(np.asarray(out), ref, want_dtype, scale=scale if want_dtype == F32 else None,
                   what=f"{name}(axis={axis}, keepdims={keepdims})")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(data=st.data())
def test_argmax_argmin_ties_pick_the_first(name, data):
    # values from {-1, 0, 1} make ties the rule, not the exception
    x, axis, keepdims = data.draw(array_and_axis(FLOATS + [I32, BOOL], -1, 1, tuple_axes=False))
    if data.draw(st.booleans()) and x.dtype in FLOATS:
        x = np.round(x.astype(np.float32)).astype(x.dtype)
    out = traced(lambda x: getattr(lnp, name)(x, axis=axis, keepdims=keepdims), x)
    want = getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert out.dtype == lf.int32
    np.testing.assert_array_equal(np.asarray(out), want)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@given(data=st.data())
def test_cumulative_every_dtype(name, data):
    dtypes = FLOATS + [I32, BOOL] if name == "cumsum" else FLOATS + [I32]
    x, axis, _ = data.draw(array_and_axis(dtypes, -2, 2, tuple_axes=False))
    out = traced(lambda x: getattr(lnp, name)(x, axis=axis), x)
    want_dtype = _reduced_dtype(name, x.dtype)
    assert np.dtype(out.dtype.np) == want_dtype, (name, out.dtype)
    ref = getattr(np, name)(x.astype(np.float64), axis=axis)
    if name == "cumprod" and x.dtype == I32:  # int32 products wrap modulo 2^32, as prod's do
        ref = np.cumprod(x, axis=axis, dtype=np.int32).astype(np.float64)
    scale = np.cumsum(np.abs(x.astype(np.float64)), axis=axis) if name == "cumsum" else None
    assert_matches(np.asarray(out), ref, want_dtype, scale=scale if want_dtype == F32 else None,
                   what=f"{name}(axis={axis})")



@pytest.mark.parametrize("name", ["sum", "prod", "any", "all", "count_nonzero", "mean", "max", "argmax"])
@given(dtype=st.sampled_from(FLOATS + [I32, BOOL]),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3).filter(lambda s: 0 in s),
       data=st.data())
def test_reductions_over_empty_axes(name, dtype, shape, data):
    # identities where NumPy has them (any of nothing is False, all is True), errors where not
    if name == "prod" and dtype == BOOL:
        return
    x = np.zeros(shape, dtype)
    axis = data.draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))))
    with np.errstate(all="ignore"):
        try:
            want = getattr(np, name)(x.astype(np.float64) if dtype != BOOL else x, axis=axis)
        except ValueError:
            with pytest.raises(lf.ShapeError, match=name[:3]):
                traced(lambda x: getattr(lnp, name)(x, axis=axis), x)
            return
    got = np.asarray(traced(lambda x: getattr(lnp, name)(x, axis=axis), x))
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_array_equal(got.astype(np.float64), np.asarray(want, np.float64))

# ---- matmul -----------------------------------------------------------------------------------
@given(data=st.data(), dtype=st.sampled_from(FLOATS + [I32]),
       dims=st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(1, 4)),
       batch=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
def test_matmul_every_dtype(data, dtype, dims, batch):
    m, k, n = dims
    a = values(data.draw, dtype, batch + (m, k), -3, 3)
    b = values(data.draw, dtype, (k, n), -3, 3)
    out = traced(lambda a, b: a @ b, a, b)
    assert np.dtype(out.dtype.np) == dtype
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    if dtype in FLOATS:
        # each product is rounded to the dtype before the float32 sum: one eps per term
        rtol, _ = TOL[dtype]
        err = np.abs(np.asarray(out).astype(np.float64) - ref)
        bound = rtol * (np.abs(a64) @ np.abs(b64)) + TOL[dtype][1]
        assert (err <= bound).all(), (err.max(), bound.min())
    else:
        np.testing.assert_array_equal(np.asarray(out), ref.astype(np.int64))


# ---- regressions the drawn cases found or could miss --------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: IDS[d])
def test_float_floor_divide_and_mod_at_rounding_boundaries(dtype):
    # 1 // 0.1 is 9 in NumPy (0.1 is a bit above 1/10); floor(1 * (1/0.1)) gave 10
    x = np.array([1.0, 0.3, -1.0, 7.0, 2.0, -2.0, 1.0, 0.0, -3.0], np.float32).astype(dtype)
    y = np.array([0.1, 0.1, 0.1, 0.7, -0.3, 0.3, 0.0, 0.0, np.inf], np.float32).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.floor_divide(x.astype(np.float64), y.astype(np.float64))
        want_r = np.mod(x.astype(np.float64), y.astype(np.float64))
    got = run(lnp.floor_divide, x, y)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    # x == (x // y) * y + x % y up to one rounding of the dtype
    got_r = run(lnp.mod, x, y).astype(np.float64)
    ok = np.isfinite(want_r)
    np.testing.assert_allclose(got_r[ok], want_r[ok].astype(dtype).astype(np.float64), rtol=TOL[dtype][0])


def test_arctan2_signed_zeros_follow_c():
    y = np.array([0.0, 0.0, -0.0, -0.0, -0.0, 0.0, 1.0, -1.0], np.float32)
    x = np.array([0.0, -0.0, 0.0, -0.0, -1.0, -1.0, -0.0, 0.0], np.float32)
    got = np.asarray(lf.jit(lnp.arctan2)(y, x))  # compiled: the traced graph's where is an Add
    want = np.arctan2(y, x)  # of zero-padded halves (-0.0 + 0.0 is +0.0); the compiled select is not
    np.testing.assert_array_equal(got, want)  # +-pi on the negative x axis
    assert (np.signbit(got) == np.signbit(want)).all(), (got, want)  # atan2(-0.0, 0.0) is -0.0


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: IDS[d])
def test_sinc_at_subnormal_and_tiny_inputs(dtype):
    # sin(pi x) / (pi x) divided by a subnormal: the reciprocal overflowed to inf
    x = np.array([1e-45, -3e-39, 0.0, 1e-6, 1e-4, 2e-3, 0.5], np.float32).astype(dtype)
    got = run(lnp.sinc, x)
    assert_matches(got, np.sinc(x.astype(np.float64)), np.dtype(dtype), what="sinc")


# ---- nn helpers in half precision ---------------------------------------------------------------
def _softmax64(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


NN = {
    "softmax": (lambda x: lf.nn.softmax(x, axis=-1), _softmax64),
    "log_softmax": (lambda x: lf.nn.log_softmax(x, axis=-1), lambda x: np.log(_softmax64(x))),
    "layer_norm": (lambda x: lf.nn.layer_norm(x),
                   lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
    "rms_norm": (lambda x: lf.nn.rms_norm(x), lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)),
    "silu": (lambda x: lf.nn.silu(x), lambda x: x / (1 + np.exp(-x))),
    "sigmoid": (lambda x: lf.nn.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
}


@pytest.mark.parametrize("name", sorted(NN))
@given(data=st.data(), dtype=st.sampled_from(FLOATS),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
def test_nn_helpers_in_every_float_dtype(name, data, dtype, shape):
    fn, ref_fn = NN[name]
    x = values(data.draw, dtype, shape, -4, 4)
    out = traced(fn, x)
    assert np.dtype(out.dtype.np) == dtype
    x64 = x.astype(np.float64)
    scale = None
    if name == "layer_norm":
        # x - mean cancels: one rounding of the mean, divided by the row's std, is the floor
        # (a constant row of 3.89 gave 7.5e-5 instead of 0 in float32, as NumPy's float32 would)
        scale = 2 * np.max(np.abs(x64), -1, keepdims=True) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    assert_matches(np.asarray(out), ref_fn(x64), dtype, scale=scale, what=name)


# ---- the whole pipeline (e-graph, search, compiled kernels) in every dtype ----------------------
@pytest.mark.parametrize("dtype", FLOATS + [I32, BOOL], ids=lambda d: IDS[d])
def test_compiled_path_every_dtype(dtype):
    rng = np.random.default_rng(5)
    if dtype == BOOL:
        x, y = rng.random((3, 1, 4)) < 0.5, rng.random((2, 1)) < 0.5
    else:
        x = rng.uniform(-3, 3, (3, 1, 4)).astype(np.float32)
        y = rng.uniform(-3, 3, (2, 1)).astype(np.float32)
        if dtype == I32:
            x, y = np.round(x), np.round(y)
        x, y = x.astype(dtype), y.astype(dtype)

    def f(x, y):
        out = {"max": lnp.max(x, axis=(0, -1), keepdims=True), "argmax": lnp.argmax(x, axis=-1),
               "where": lnp.where(x > y, x, y), "any": lnp.any(x, axis=-2)}
        if dtype != BOOL:
            out.update(sum=lnp.sum(x + y, axis=-1), mm=x[:, 0] @ x[0, 0][:, None],
                       floordiv=lnp.floor_divide(x, lnp.where(y == 0, 1, y).astype(y.dtype)))
        if dtype in FLOATS:
            out.update(exp=lnp.exp(x), tanh=lnp.tanh(x * y), mean=lnp.mean(x, axis=0),
                       std=lnp.std(x, axis=-1))
        return out

    got = lf.jit(f)(x, y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    want = {"max": np.max(x64, axis=(0, -1), keepdims=True), "argmax": np.argmax(x64, axis=-1),
            "where": np.where(x64 > y64, x64, y64), "any": np.any(x64, axis=-2)}
    if dtype != BOOL:
        want.update(sum=np.sum(x64 + y64, axis=-1), mm=x64[:, 0] @ x64[0, 0][:, None],
                    floordiv=np.floor_divide(x64, np.where(y64 == 0, 1, y64)))
    if dtype in FLOATS:
        want.update(exp=np.exp(x64), tanh=np.tanh(x64 * y64), mean=np.mean(x64, axis=0),
                    std=np.std(x64, axis=-1))
    assert set(got) == set(want)
    for k, w in want.items():
        g = np.asarray(got[k])
        out_dtype = {"argmax": I32, "any": BOOL}.get(k, dtype)
        assert g.dtype == out_dtype, (k, g.dtype)
        if k in ("tanh", "mm") and dtype in FLOATS:
            # x * y and the products of x @ x round to the dtype before the float32 step
            w = {"tanh": np.tanh((x * y).astype(np.float64)),
                 "mm": (x[:, 0].astype(np.float64) @ x[0, 0][:, None].astype(np.float64))}[k]
            rtol = TOL[dtype][0] * (4 if k == "mm" else 1)
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol, atol=4 * TOL[dtype][1], err_msg=k)
            continue
        assert_matches(g, w, out_dtype, what=k)

"""Elementwise math, comparisons and logic, decomposed into the HLIR primitives."""
from __future__ import annotations

import functools
import math

import numpy as np

from ...ir import dtypes as dt, series
from ..errors import DTypeError
from ..tracer import (Tracer, _ctx_of, binary, broadcast_shapes, broadcast_to, cast, lift,
                      result_dtype, unary)

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _float(x) -> Tracer:
    x = lift(x, _ctx_of(x))
    return x if x.dtype.is_float else cast(x, dt.float32)


_HALF = dt.HALF


def _is_array(a) -> bool:
    """A Tracer, NumPy array or scalar, or luminal_fn.Array (eager calls pass the last)."""
    return isinstance(a, (Tracer, np.ndarray, np.generic)) or hasattr(a, "__luminal_array__")


def _dtype_of(a):
    if isinstance(a, Tracer):
        return a.dtype
    try:
        return dt.canonicalize(a.dtype)
    except Exception:
        return None


def computed_in_float32(fn):
    """Half-precision math computed in float32 and rounded once at the end.

    A composite such as exp = Exp2(x * log2(e)), tanh or var rounds after every primitive when its
    intermediates are float16/bfloat16, and those roundings compound (exp(6) in bfloat16 came out
    2% off). Like XLA, compute the whole function in float32 and round its result once: float16
    and bfloat16 results then stay within one unit of their precision (docs/api.md, "Dtypes")."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs.get("dtype") is not None:  # an explicit dtype is the caller's choice
            return fn(*args, **kwargs)
        arrays = [a for a in (*args, *kwargs.values()) if _is_array(a)]
        if not any(_dtype_of(a) in _HALF for a in arrays):
            return fn(*args, **kwargs)
        ctx = _ctx_of(*arrays)
        lifted = [lift(a, ctx) for a in arrays]
        target = functools.reduce(dt.promote, [t.dtype for t in lifted if not t.weak])
        if target not in _HALF:  # mixed float16/bfloat16 already promotes to float32
            return fn(*args, **kwargs)

        def up(a):
            if _is_array(a) and _dtype_of(a) in _HALF:
                return cast(lift(a, ctx), dt.float32)
            return a

        out = fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
        return cast(out, target) if isinstance(out, Tracer) and out.dtype is dt.float32 else out

    return wrapper


# ---- arithmetic -------------------------------------------------------------------------------
def add(x, y):
    return binary("Add", x, y, opname="add")


def multiply(x, y):
    return binary("Mul", x, y, opname="multiply")


def negative(x):
    x = lift(x, _ctx_of(x))
    if x.dtype.is_bool:
        raise DTypeError("negative: not defined for bool arrays (use logical_not)")
    return binary("Mul", x, -1, opname="negative")


def subtract(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    if x.dtype.is_bool and y.dtype.is_bool:
        raise DTypeError("subtract: not defined for two bool arrays (use logical_xor)")
    return add(x, negative(y))


def reciprocal(x):
    return unary("Recip", _float(x))


@computed_in_float32
def true_divide(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    if not x.dtype.is_float and not (y.dtype.is_float and not y.weak):
        x = cast(x, dt.float32) if not x.weak else x
    if not y.dtype.is_float:
        y = cast(y, dt.float32)
    return multiply(x, reciprocal(y))


divide = true_divide


def fmod(x, y):
    """C-style remainder (sign of the dividend), the HLIR Mod."""
    return binary("Mod", x, y, opname="fmod")


def floor(x):
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return x
    t = trunc(x)
    # a select, not t - (x < t): CUDA gave +0.0 for floor(-0.0) from -0.0 - (float)false
    return where(less(x, t), subtract(t, 1.0), t)


def trunc(x):
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return x
    # from 2^23 on every float32 is an integer; inf among them (fmod(inf, 1) is nan). |x| < 2^23
    # read as x * x < 2^46 (exact for the largest non-integer, 2^23 - 1/2): no abs select. Below
    # 1 the result is a zero with x's sign, x * 0 (x - fmod(x, 1) would be +0.0 for -0.5)
    sq = multiply(x, x)
    return where(less(sq, 70368744177664.0),
                 where(less(sq, 1.0), multiply(x, 0.0), subtract(x, fmod(x, 1.0))), x)


fix = trunc


def ceil(x):
    return negative(floor(negative(x)))


def rint(x):
    """Round half to even, as NumPy does."""
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return x
    f = floor(x)
    diff = subtract(x, f)
    up = greater(diff, 0.5)
    tie = equal(diff, 0.5)
    f_is_odd = not_equal(fmod(f, 2.0), 0.0)
    bump = logical_or(up, logical_and(tie, f_is_odd))
    r = add(f, cast(bump, x.dtype))
    # a zero result has x's sign (rint(-0.3) is -0.0; -1 + 1 is +0.0)
    return where(equal(r, 0.0), multiply(x, 0.0), r)


round_ = rint


@computed_in_float32
def around(x, decimals=0):
    if decimals == 0:
        return rint(x)
    s = 10.0 ** decimals
    return true_divide(rint(multiply(x, s)), s)


@computed_in_float32
def floor_divide_float(x, y):
    """NumPy's float floor division. floor(x * (1/y)) is off by one where the rounded quotient
    reaches an integer the exact one does not (1 // 0.1 is 9, not 10). x - fmod(x, y) is a
    multiple of y, so the rounded quotient (x - r) / y lies next to an integer that rint
    recovers; a remainder whose sign differs from y's moves it one down."""
    r = fmod(x, y)
    q = rint(true_divide(subtract(x, r), y))
    q = subtract(q, cast(logical_and(not_equal(r, 0), not_equal(less(r, 0), less(y, 0))), q.dtype))
    return where(equal(y, 0), true_divide(x, y), q)  # x // 0 is +-inf or nan, as in NumPy


def mod(x, y):
    """Python/NumPy remainder: the sign of the divisor."""
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    r = fmod(x, y)
    fix_ = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(y, 0)))
    return where(fix_, add(r, y), r)


remainder = mod


@computed_in_float32
def power(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    if y.weak and not x.dtype.is_bool:
        from ..tracer import current  # noqa: F401

        # small integer exponents by repeated multiplication: exact and sign-correct
        node = x._ctx.graph.node(y._node)
        v = node.attrs.get("value") if node.op == "Constant" else None
        if isinstance(v, (int, float)) and float(v).is_integer() and -8 <= v <= 8:  # abs is lnp.abs here
            n = int(v)
            if n == 0:
                return add(multiply(x, 0), 1)
            out = x
            for _ in range((n if n > 0 else -n) - 1):
                out = multiply(out, x)
            return reciprocal(out) if n < 0 else out
        if v == 0.5:
            return sqrt(x)
    if not x.dtype.is_float and not y.dtype.is_float:
        from ._integer import power_int  # (it builds on this module)

        return power_int(x, y)
    d = result_dtype(x, y)
    xf, yf = cast(x, d) if not x.dtype.is_float else x, y
    mag = exp2(multiply(yf, log2(absolute(xf))))
    # a finite negative base: defined when the exponent is an integer; the sign from its parity
    # (odd: fmod is +-1, never for an infinite exponent), for -0.0 and -inf too, as C's pow
    yint = equal(trunc(yf), yf)
    odd = equal(absolute(fmod(yf, 2.0)), 1.0)
    sign = where(logical_and(signbit(xf), odd), -1.0, 1.0)
    res = multiply(mag, sign)
    res = where(logical_and(logical_and(less(xf, 0), isfinite(xf)), logical_not(yint)), float("nan"), res)
    # 1 ** y and (-1) ** +-inf are 1 (the exp2 form gives inf * 0 = nan)
    res = where(logical_or(equal(xf, 1.0), logical_and(equal(xf, -1.0), isinf(yf))), 1.0, res)
    return where(equal(yf, 0), 1.0, res)


@computed_in_float32
def float_power(x, y):
    return power(_float(x), _float(y))


def square(x):
    return multiply(x, x)


def absolute(x):
    x = lift(x, _ctx_of(x))
    if x.dtype.is_bool:
        return x
    if not x.dtype.is_float:
        return where(less(x, 0), negative(x), x)
    # zero becomes the literal +0.0: negating -0.0 is right but negating +0.0 is not, and
    # x + 0.0 would fold away (abs(-0.0) is 0.0 in NumPy, and copysign builds on abs)
    return where(equal(x, 0), 0.0, where(less(x, 0), negative(x), x))


abs = absolute  # noqa: A001


def fabs(x):
    return absolute(_float(x))


def sign(x):
    x = lift(x, _ctx_of(x))
    pos = cast(greater(x, 0), x.dtype)
    neg = cast(less(x, 0), x.dtype)
    out = subtract(pos, neg)
    if x.dtype.is_float:
        out = where(isnan(x), x, out)
    return out


def copysign(x, y):
    ax = absolute(_float(x))
    neg = signbit(y)
    return where(neg, negative(ax), ax)


def signbit(x):
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return less(x, 0)
    # -0.0 has its sign bit set: 1/-0 = -inf
    return logical_or(less(x, 0), logical_and(equal(x, 0), less(reciprocal(x), 0)))


def maximum(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    take_y = less(x, y)
    if result_dtype(x, y).is_float and not _not_nan_literal(y):
        take_y = logical_or(take_y, isnan(y))  # NaN propagates as in NumPy (x NaN: x is kept)
    return where(take_y, y, x)


def minimum(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    take_y = less(y, x)
    if result_dtype(x, y).is_float and not _not_nan_literal(y):
        take_y = logical_or(take_y, isnan(y))
    return where(take_y, y, x)


def fmax(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    r = where(less(x, y), y, x)
    if r.dtype.is_float:
        r = where(isnan(x), y, where(isnan(y), x, r))
    return r


def fmin(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    r = where(less(y, x), y, x)
    if r.dtype.is_float:
        r = where(isnan(x), y, where(isnan(y), x, r))
    return r


def clip(a, a_min=None, a_max=None):
    out = lift(a, _ctx_of(a))
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


# ---- exponentials and logs ------------------------------------------------------------------
def exp2(x):
    return unary("Exp2", x)


@computed_in_float32
def exp(x):
    return exp2(multiply(_float(x), LOG2E))


def _horner(x, coefs):
    """c0 + x * (c1 + x * (c2 + ...)) for Python float coefficients."""
    p = coefs[-1]
    for c in reversed(coefs[:-1]):
        p = add(c, multiply(x, p))
    return p


@computed_in_float32
def expm1(x):
    x = _float(x)
    # below |x| = 1/2 exp(x) - 1 cancels (it was 6e-5 off at 1e-3): the Taylor series there
    # (ir/series.py); above, exp(x) - 1 loses at most a bit or two. The NumPy backend reads the
    # whole select as np.expm1 (backends/numpy/tree_peephole.py).
    below = less(multiply(x, x), series.EXPM1_BELOW ** 2)
    return where(below, multiply(x, _horner(x, series.EXPM1)), subtract(exp(x), 1.0))


def log2(x):
    return unary("Log2", x)


@computed_in_float32
def log(x):
    return multiply(log2(_float(x)), LN2)


@computed_in_float32
def log10(x):
    return multiply(log2(_float(x)), math.log10(2.0))


@computed_in_float32
def log1p(x):
    x = _float(x)
    u = add(x, 1.0)
    # log(u) * x / (u - 1) corrects the rounding of 1 + x (Goldberg's trick)
    d = subtract(u, 1.0)
    exact = where(equal(d, 0.0), x, multiply(log(u), true_divide(x, where(equal(d, 0.0), 1.0, d))))
    return where(equal(u, 1.0), x, where(isposinf(u), u, exact))  # (inf / inf would be nan)


@computed_in_float32
def logaddexp(x, y):
    m = maximum(x, y)
    out = add(m, log1p(exp(negative(absolute(subtract(x, y))))))
    return where(equal(x, y), add(m, LN2), out)  # (inf - inf is nan: equal infinities give m)


@computed_in_float32
def logaddexp2(x, y):
    m = maximum(x, y)
    out = add(m, true_divide(log1p(exp2(negative(absolute(subtract(x, y))))), LN2))
    return where(equal(x, y), add(m, 1.0), out)  # (inf - inf is nan: equal infinities give m)


def sqrt(x):
    return unary("Sqrt", x)


@computed_in_float32
def rsqrt(x):
    return reciprocal(sqrt(x))


@computed_in_float32
def cbrt(x):
    x = _float(x)
    return odd_from_magnitude(x, exp2(multiply(log2(absolute(x)), 1.0 / 3.0)))


def odd_from_magnitude(x, mag):
    """An odd function's value at x from its value ``mag`` at |x|: -mag below zero, and a zero x
    returned as it is (f(-0.0) is -0.0; a ``x < 0`` test alone would give +0.0 for it)."""
    return where(less(x, 0), negative(mag), where(equal(x, 0), x, mag))


# ---- comparisons and logic --------------------------------------------------------------------
def less(x, y):
    return binary("LessThan", x, y, out_dtype=dt.bool_, opname="less")


def greater(x, y):
    return less(y, x)


def less_equal(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    r = logical_not(less(y, x))
    if result_dtype(x, y).is_float:  # NaN compares false
        r = _and_ordered(r, x, y)
    return r


def _and_ordered(r, x, y):
    """r and neither x nor y NaN, for a comparison r that implies not y < x. Against a finite
    literal one comparison of the other side says it: r is already false for x = +inf (y the
    literal; x < inf is false only for NaN and +inf) or for y = -inf (x the literal). Else the
    form the argmax rule reads (optimize/rules/specialize_argmax.egg)."""
    if _finite_literal(y):
        return logical_and(r, less(x, float("inf")))
    if _finite_literal(x):
        return logical_and(r, less(float("-inf"), y))
    return logical_and(r, logical_not(logical_or(isnan(x), isnan(y))))


def _finite_literal(t: Tracer) -> bool:
    node = t._ctx.graph.node(t._node)
    v = node.attrs.get("value") if node.op == "Constant" else None
    return isinstance(v, (int, float)) and math.isfinite(v)


def greater_equal(x, y):
    return less_equal(y, x)


def equal(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    if x.dtype.is_bool and y.dtype.is_bool:
        return logical_not(logical_xor(x, y))
    if _finite_literal(x) and not _finite_literal(y):
        x, y = y, x
    if not _finite_literal(y) or not result_dtype(x, y).is_float:
        return logical_and(less_equal(x, y), less_equal(y, x))
    # x == c: neither below nor above c, and not NaN (three compares instead of eight)
    return _and_ordered(logical_not(logical_or(less(x, y), less(y, x))), x, y)


def not_equal(x, y):
    return logical_not(equal(x, y))


def _as_bool(x) -> Tracer:
    x = lift(x, _ctx_of(x))
    if x.dtype.is_bool:
        return x
    return not_equal(x, 0)


def logical_not(x):
    x = _as_bool(x)
    return less(cast(x, dt.int32), 1)


def logical_and(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    return cast(binary("Mul", cast(_as_bool(x), dt.int32), cast(_as_bool(y), dt.int32)), dt.bool_)


def logical_or(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    s = binary("Add", cast(_as_bool(x), dt.int32), cast(_as_bool(y), dt.int32))
    return less(0, s)


def logical_xor(x, y):
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    s = binary("Add", cast(_as_bool(x), dt.int32), cast(_as_bool(y), dt.int32))
    return cast(binary("Mod", s, 2), dt.bool_)


def isnan(x):
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return less(cast(x, dt.int32), cast(x, dt.int32))  # all False, same shape
    # NaN is neither below +inf nor above -inf
    lt_inf = less(x, float("inf"))
    gt_ninf = less(float("-inf"), x)
    return logical_and(logical_not(lt_inf), logical_not(gt_ninf))


def isinf(x):
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return isnan(x)
    return logical_or(logical_and(logical_not(less(x, float("inf"))), less(float("-inf"), x)),
                      logical_and(logical_not(less(float("-inf"), x)), less(x, float("inf"))))


def isfinite(x):
    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        return logical_not(isnan(x))
    return logical_and(less(x, float("inf")), less(float("-inf"), x))


def isposinf(x):
    return logical_and(isinf(x), greater(x, 0))


def isneginf(x):
    return logical_and(isinf(x), less(x, 0))


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    x = _float(x)
    big = float(_finfo_max(x.dtype))
    x = where(isnan(x), nan, x)
    x = where(isposinf(x), big if posinf is None else posinf, x)
    return where(isneginf(x), -big if neginf is None else neginf, x)


def _finfo_max(d: dt.DType):
    import numpy as np

    return np.finfo(dt.to_numpy(d)).max if d is not dt.bfloat16 else 3.3895313892515355e38


def where(condition, x, y):
    """Select x where condition else y, broadcasting all three. Exact for inf/nan in the branch
    not taken: both branches are laid side by side on a new leading axis and one element is
    gathered per output, ``Gather(Iota(z) + Cast(not c) * n, Add(pad(x), pad(y)))``; the
    optimizer recognises that pattern as a fused select."""
    ctx = _ctx_of(condition, x, y)
    c, x, y = lift(condition, ctx), lift(x, ctx), lift(y, ctx)
    if not c.dtype.is_bool:
        c = not_equal(c, 0)
    from ..tracer import _new, iota, pad_axis, reshape_any, result_dtype
    from ...ir.expr import Z, as_expr, prod

    d = result_dtype(x, y)
    weak = x.weak and y.weak
    if d.is_bool:  # select in int32: the side-by-side layout adds, and bool has no Add
        return cast(where(c, cast(x, dt.int32), cast(y, dt.int32)), dt.bool_)
    shape = broadcast_shapes(c.shape, x.shape, y.shape, op="where")
    n = prod(shape)
    xs = broadcast_to(cast(x, d), shape)
    ys = broadcast_to(cast(y, d), shape)
    xs.weak = ys.weak = False
    both = binary("Add", pad_axis(_lead(xs), 0, 0, 1), pad_axis(_lead(ys), 0, 1, 0))
    # flat index: z into the x half, plus n where y is taken
    take_y = cast(broadcast_to(logical_not(c), shape), dt.int32)
    pos = reshape_any(iota(Z, n, ctx), shape)
    half = reshape_any(iota(as_expr(n), 1, ctx), (1,) * len(shape)) if shape else \
        reshape_any(iota(as_expr(n), 1, ctx), ())
    idx = binary("Add", pos, binary("Mul", take_y, half))
    out = _new(ctx, "Gather", [idx, both], shape, d)
    out.weak = weak
    return out


def _lead(t: Tracer) -> Tracer:
    """t with a new leading axis of size 1 (a view)."""
    return Tracer(t._ctx, t._node, t._view.insert_axis(0, 1), t.dtype, t.weak)


def _not_nan_literal(t: Tracer) -> bool:
    """A scalar literal that is not NaN (so NaN checks against it can be skipped)."""
    node = t._ctx.graph.node(t._node)
    v = node.attrs.get("value") if node.op == "Constant" else None
    return isinstance(v, (int, float, bool)) and v == v


def bitwise_not(x):
    x = lift(x, _ctx_of(x))
    if x.dtype.is_bool:
        return logical_not(x)
    return subtract(negative(x), 1)


invert = bitwise_not


def positive(x):
    return lift(x, _ctx_of(x))


def conj(x):
    return lift(x, _ctx_of(x))


def real(x):
    return lift(x, _ctx_of(x))


@computed_in_float32
def sigmoid(x):
    x = _float(x)
    return reciprocal(add(exp(negative(x)), 1.0))


# the trigonometric functions live in _trig.py (imported last: it builds on the functions above)
from ._trig import (
    arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, cos, cosh, deg2rad, degrees,
    hypot, rad2deg, radians, sin, sinc, sinh, tan, tanh
)  # noqa: E402,F401

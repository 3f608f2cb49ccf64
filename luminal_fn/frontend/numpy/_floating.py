"""A float's exponent and mantissa: frexp and ldexp, exact.

The HLIR has no bit casts, so powers of two come from a table (2^-149 .. 2^127, each exact in
float32) read by a gather, and the exponent from log2 corrected by one comparison each way.
Multiplying by a power of two is exact while the result stays normal; ldexp therefore scales
the normalised mantissa in one step, or, for a subnormal result, in two steps of which only the
last can round (NumPy rounds once too). Half-precision arrays are computed in float32.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ..errors import DTypeError
from ..tracer import Tracer, _ctx_of, cast, lift
from . import _math as m
from ._index import take
from ._integer import floor_divide_int

__all__ = ["frexp", "ldexp", "modf"]

_LOW, _HIGH = -149, 127  # the exponents of the smallest subnormal and the largest power of two
_POW2 = np.array([2.0 ** k for k in range(_LOW, _HIGH + 1)], np.float32)


def _pow2(k: Tracer) -> Tracer:
    """2^k as float32 for int32 k in [-149, 127] (clipped there)."""
    return take(lift(_POW2, k._ctx), m.subtract(m.clip(k, _LOW, _HIGH), _LOW))


def _frexp32(x: Tracer):
    """(mantissa, exponent) of float32 x: x = mantissa * 2^exponent, 0.5 <= |mantissa| < 1;
    zeros, infinities and NaN give (x, 0)."""
    ordinary = m.logical_and(m.isfinite(x), m.not_equal(x, 0.0))
    ax = m.where(ordinary, m.absolute(x), 1.0)
    e = m.add(cast(m.floor(m.log2(ax)), dt.int32), 1)  # within one of the exponent
    half = floor_divide_int(e, lift(2, e._ctx, dt.int32))
    man = m.multiply(m.multiply(x, _pow2(m.negative(half))), _pow2(m.subtract(half, e)))  # exact
    # one step each way where log2 rounded across a power of two (scaled by a selected positive
    # constant, not a select of the value, so that -0.0 keeps its sign on every backend)
    big = m.greater_equal(m.absolute(man), 1.0)
    man, e = m.multiply(man, m.where(big, 0.5, 1.0)), m.add(e, cast(big, dt.int32))
    small = m.less(m.absolute(man), 0.5)
    man, e = m.multiply(man, m.where(small, 2.0, 1.0)), m.subtract(e, cast(small, dt.int32))
    # zeros, infinities and NaN came through the scaling as themselves (a select would lose a
    # -0.0's sign on the NumPy backend); only their exponent is set
    return man, m.where(ordinary, e, 0)


def frexp(x):
    """NumPy's frexp: (mantissa in x's float dtype, int32 exponent), exact."""
    x = m._float(x)
    d = x.dtype
    man, e = _frexp32(cast(x, dt.float32))
    return cast(man, d), e


def ldexp(x1, x2):
    """NumPy's ldexp: x1 * 2^x2 for integer x2, rounded once (exact unless the result is
    subnormal; out of range it is 0 or inf with x1's sign, as NumPy's)."""
    ctx = _ctx_of(x1, x2)
    x = m._float(lift(x1, ctx))
    n = lift(x2, ctx)
    if not (n.dtype.is_int or n.dtype.is_bool):
        raise DTypeError(f"ldexp: the exponent x2 must hold integers, got {n.dtype}")
    d = x.dtype
    man, e = _frexp32(cast(x, dt.float32))
    # x = (2 man) * 2^(e - 1) with 2|man| in [1, 2): scale by 2^t, t = e - 1 + n
    t = m.add(m.subtract(e, 1), m.clip(cast(n, dt.int32), -1000, 1000))
    t = m.clip(t, -191, 128)
    normal = m.greater_equal(t, -126)
    # a subnormal result: first to 2^(t + 64), still normal and exact, then one rounding step;
    # past the range: 2^127 * 2 overflows to inf; below it (t = -191) the product rounds to 0.
    # Only positive constants are selected, so zeros, infinities and NaN pass through as
    # themselves with their signs (a select of the value would lose a -0.0's)
    first = _pow2(m.where(normal, t, m.add(t, 64)))
    second = m.where(m.greater_equal(t, 128), 2.0, m.where(normal, 1.0, 2.0 ** -64))
    return cast(m.multiply(m.multiply(m.multiply(man, 2.0), first), second), d)


def modf(x):
    """(fractional, integral) parts, both with x's sign (modf(-3.0) is (-0.0, -3.0)), as NumPy's;
    float32 for integer x (NumPy: float64)."""
    t = m._float(lift(x, _ctx_of(x)))
    whole = m.trunc(t)
    frac = m.where(m.isinf(t), 0.0, m.subtract(t, whole))
    return m.copysign(frac, t), whole

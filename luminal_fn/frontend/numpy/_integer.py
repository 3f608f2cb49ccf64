"""Exact int32 arithmetic built from the primitives: floor division, bitwise and/or/xor, shifts.

The HLIR has no integer division or bit operations; its integer ``Mod`` (C's ``%``) is exact,
and so are ``Add``, ``Mul`` (wrapping, as NumPy's int32 does) and ``LessThan``. A float32 quotient
is only near the true one for large values (24 bits of mantissa), so floor division refines it
with exact remainders. Bits come from floored remainders by powers of two: bit k of x is set
where x mod 2^(k+1) >= 2^k. A bitwise op of two arrays combines the 32 bits one by one (one fused
elementwise kernel); against a Python int it needs one pair of remainders per run of set bits in
that int (``x & 0xF`` is ``x mod 16``). Results match NumPy on int32, wraparound included; bool
operands give the logical forms, as in NumPy.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ..errors import DTypeError
from ..tracer import Tracer, _ctx_of, cast, lift, result_dtype
from . import _math as m
from ._index import take

INT_MIN = -(1 << 31)
_POW2 = np.array([1 << k for k in range(31)] + [INT_MIN], dtype=np.int32)  # 2^k as int32 bits


def floor_divide(x, y):
    """NumPy's ``x // y``: floored; for int32 exact for every value, x // 0 is 0 (NumPy's)."""
    ctx = _ctx_of(x, y)
    x, y = lift(x, ctx), lift(y, ctx)
    if result_dtype(x, y).is_float:
        return m.floor_divide_float(x, y)
    return floor_divide_int(x, y)


def divmod_(x, y):
    return floor_divide(x, y), m.mod(x, y)


def floor_divide_int(x: Tracer, y: Tracer) -> Tracer:
    """NumPy's int32 ``x // y``: exact for every int32 (x // 0 is 0, INT_MIN // -1 wraps)."""
    x, y = cast(x, dt.int32), cast(y, dt.int32)
    r = m.fmod(x, y)  # exact, the sign of x; 0 where y is 0
    multiple = m.subtract(x, r)  # trunc(x / y) * y
    # the float32 quotient of an exact multiple is within a few hundred of trunc(x / y) when it
    # is large (24-bit mantissa); what it misses is again a multiple of y, small enough that its
    # float32 quotient rounds to the exact count
    q = _rounded_quotient(multiple, y)
    q = m.add(q, _rounded_quotient(m.subtract(multiple, m.multiply(q, y)), y))
    # trunc -> floor: one down where the remainder's sign differs from the divisor's
    q = m.subtract(q, cast(m.logical_and(m.not_equal(r, 0), m.not_equal(m.less(r, 0), m.less(y, 0))),
                           dt.int32))
    return m.where(m.equal(y, 0), 0, q)


def _rounded_quotient(a: Tracer, b: Tracer) -> Tracer:
    """a / b through float32, rounded to the nearest int32 (a is a multiple of b)."""
    safe = m.where(m.equal(b, 0), 1, b)
    return cast(m.floor(m.add(m.true_divide(cast(a, dt.float32), cast(safe, dt.float32)), 0.5)),
                dt.int32)


def _low_bits(x: Tracer, k: int) -> Tracer:
    """x mod 2^k in [0, 2^k) for 0 <= k <= 31, the bits below k; k = 32: x itself."""
    if k == 0:
        return m.multiply(x, 0)
    if k == 32:
        return x
    if k == 31:  # 2^31 is no int32: negative x gains 2^31 in two steps that cannot overflow
        return m.where(m.less(x, 0), m.add(m.add(x, 1 << 30), 1 << 30), x)
    r = m.fmod(x, 1 << k)
    return m.where(m.less(r, 0), m.add(r, 1 << k), r)


def _bits(x: Tracer) -> list:
    """The 32 bits of x (two's complement), each int32 0 or 1."""
    low = _low_bits(x, 31)  # bits 0..30 as a value >= 0, so C's remainder is already floored
    bits = [cast(m.greater_equal(m.fmod(low, 1 << (k + 1)), 1 << k), dt.int32) for k in range(30)]
    return bits + [cast(m.greater_equal(low, 1 << 30), dt.int32), cast(m.less(x, 0), dt.int32)]


def _from_bits(bits: list) -> Tracer:
    """The int32 whose bit k is bits[k] (int32 0 or 1); bit 31 weighs -2^31."""
    out = bits[0]
    for k in range(1, 32):
        out = m.add(out, m.multiply(bits[k], int(_POW2[k])))
    return out


def _runs(c: int) -> list:
    """The runs of set bits of the int32 ``c``: [(lo, hi)], bits lo..hi-1 set."""
    u, runs, k = c & 0xFFFFFFFF, [], 0
    while k < 32:
        if u >> k & 1:
            lo = k
            while k < 32 and u >> k & 1:
                k += 1
            runs.append((lo, k))
        else:
            k += 1
    return runs


def _and_constant(x: Tracer, c: int) -> Tracer:
    """x & c for a Python int c: each run of ones keeps the bits of x inside it."""
    out = None
    for lo, hi in _runs(c):
        part = m.subtract(_low_bits(x, hi), _low_bits(x, lo)) if lo else _low_bits(x, hi)
        out = part if out is None else m.add(out, part)
    return m.multiply(x, 0) if out is None else out


def _static_int(v):
    """v as a Python int where it is a Python or NumPy integer scalar, else None."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)) and -(1 << 31) <= int(v) < (1 << 31):
        return int(v)
    return None


def _int_operands(x, y, fn: str):
    """Both operands lifted and cast to their NumPy result dtype: bool, or int32 (floats raise)."""
    ctx = _ctx_of(x, y)
    xt, yt = lift(x, ctx), lift(y, ctx)
    d = result_dtype(xt, yt)
    if d.is_float:
        raise DTypeError(f"{fn}: not supported for float operands ({xt.dtype} and {yt.dtype}), as in "
                         f"NumPy; cast to int32 first (x.astype(lnp.int32)), or use logical_* for "
                         "truth values")
    return cast(xt, d), cast(yt, d), d


_COMBINE = {"and": lambda a, b: m.multiply(a, b),  # on bits 0/1
            "or": lambda a, b: m.subtract(m.add(a, b), m.multiply(a, b)),
            "xor": lambda a, b: m.fmod(m.add(a, b), 2)}
_LOGICAL = {"and": m.logical_and, "or": m.logical_or, "xor": m.logical_xor}


def _bitwise(how: str, x, y):
    fn = f"bitwise_{how}"
    cx, cy = _static_int(x), _static_int(y)
    xt, yt, d = _int_operands(x, y, fn)
    if d.is_bool:
        return _LOGICAL[how](xt, yt)
    if cx is not None and cy is None:
        xt, yt, cx, cy = yt, xt, cy, cx
    if cy is not None:  # against a constant: runs of its bits
        if how == "and":
            return _and_constant(xt, cy)
        with_c = m.add(_and_constant(xt, ~cy), cy)  # x | c: x's bits outside c, then all of c's
        return with_c if how == "or" else m.subtract(with_c, _and_constant(xt, cy))
    return _from_bits([_COMBINE[how](a, b) for a, b in zip(_bits(xt), _bits(yt))])


def bitwise_and(x, y):
    return _bitwise("and", x, y)


def bitwise_or(x, y):
    return _bitwise("or", x, y)


def bitwise_xor(x, y):
    return _bitwise("xor", x, y)


def left_shift(x, y):
    """x << y; counts outside [0, 31] give 0, as in NumPy."""
    k = _static_int(y)
    xt, yt, _ = _int_operands(x, y, "left_shift")
    xt = cast(xt, dt.int32)
    if k is not None:
        return m.multiply(xt, 0) if not 0 <= k < 32 else m.multiply(xt, int(_POW2[k]))
    yt = cast(yt, dt.int32)
    inside = m.logical_and(m.greater_equal(yt, 0), m.less(yt, 32))
    return m.where(inside, m.multiply(xt, _pow2(yt)), 0)


def right_shift(x, y):
    """x >> y, arithmetic (the sign fills in); counts outside [0, 31] give 0 or -1, as in NumPy."""
    k = _static_int(y)
    xt, yt, _ = _int_operands(x, y, "right_shift")
    xt = cast(xt, dt.int32)
    sign_fill = m.negative(cast(m.less(xt, 0), dt.int32))
    if k is not None:
        if not 0 <= k < 31:
            return sign_fill
        return floor_divide_int(xt, lift(1 << k, xt._ctx)) if k else xt
    yt = cast(yt, dt.int32)
    inside = m.logical_and(m.greater_equal(yt, 0), m.less(yt, 31))
    return m.where(inside, floor_divide_int(xt, _pow2(m.clip(yt, 0, 30))), sign_fill)


def power_int(x: Tracer, y: Tracer) -> Tracer:
    """int32 ``x ** y`` by squaring over y's 31 bits, wrapping as NumPy's int32 does. A negative
    exponent gives 1 / x^|y| truncated toward zero (0, or +-1 for x = +-1; NumPy raises)."""
    x, y = cast(x, dt.int32), cast(y, dt.int32)
    bits = _bits(m.maximum(y, 0))
    out, sq = m.add(m.multiply(x, 0), 1), x
    for k in range(31):  # out *= x^(2^k) where bit k is set (selected, as _scan's shifts are)
        out = m.multiply(out, m.where(m.equal(bits[k], 1), sq, 1))
        if k < 30:
            sq = m.multiply(sq, sq)
    odd = m.not_equal(m.fmod(y, 2), 0)
    unit = m.where(m.equal(x, 1), 1, m.where(m.equal(x, -1), m.where(odd, -1, 1), 0))
    return m.where(m.less(y, 0), unit, out)


def _pow2(k: Tracer) -> Tracer:
    """2^k as int32 (k in [0, 31]; 2^31 wraps to INT_MIN) by a table lookup."""
    return take(lift(_POW2, k._ctx), m.clip(k, 0, 31))


_EUCLID_STEPS = 48  # consecutive Fibonacci numbers, Euclid's worst case, pass 2^32 by F(48)


def gcd(x, y):
    """NumPy's greatest common divisor of int32 values, >= 0 (gcd(0, 0) = 0; INT_MIN with 0 or
    INT_MIN stays INT_MIN, as NumPy's wraps): Euclid's remainders, a fixed number of steps."""
    a, b = _euclid_operands(x, y, "gcd")
    for _ in range(_EUCLID_STEPS):  # C's remainder keeps |gcd| whatever the signs; x % 0 is 0
        a, b = m.where(m.equal(b, 0), a, b), m.fmod(a, b)
    return m.absolute(a)


def lcm(x, y):
    """NumPy's least common multiple of int32 values: |x| / gcd * |y| wrapped to int32 (so it
    may be negative past 2^31, as NumPy's), 0 when either is 0."""
    a, b = _euclid_operands(x, y, "lcm")
    g = gcd(a, b)
    # |a / g| is exact, and for a = INT_MIN wraps to 2^31's bits as NumPy's unsigned |a| does
    q = m.absolute(floor_divide_int(a, m.where(m.equal(g, 0), 1, g)))
    return m.where(m.equal(g, 0), 0, m.multiply(q, m.absolute(b)))


def _euclid_operands(x, y, fn: str):
    a, b, d = _int_operands(x, y, fn)
    if d.is_bool:
        raise DTypeError(f"{fn}: not supported for bool operands, as in NumPy; cast to int32 first "
                         "(x.astype(lnp.int32))")
    return a, b


def bitwise_count(x):
    """The number of 1 bits in |x| (NumPy 2's bitwise_count), as int32 (NumPy: uint8)."""
    t = lift(x, _ctx_of(x))
    if t.dtype.is_float:
        raise DTypeError(f"bitwise_count: not supported for {t.dtype} (integers and bool only)")
    v = m.absolute(cast(t, dt.int32))  # |-2^31| wraps to -2^31, whose one bit is the sign's
    bits = _bits(v)
    out = bits[0]
    for b in bits[1:]:
        out = m.add(out, b)
    return out

"""Trigonometric and hyperbolic functions, decomposed into the HLIR primitives (split from
_math.py, which re-exports them)."""
from __future__ import annotations

import math

from ...ir import series
from ..tracer import broadcast_to, name_kernel
from ._math import (
    LN2, _float, _horner, absolute, add, computed_in_float32, copysign, equal, exp, expm1, greater, isinf, isnan,
    less, log, log1p, logical_and, logical_or, maximum, minimum, multiply, negative, odd_from_magnitude,
    reciprocal, signbit, sqrt, subtract, true_divide, unary, where
)


# ---- trigonometry -----------------------------------------------------------------------------
def sin(x):
    return unary("Sin", x)


def _cos_from_half(x):
    """1 - 2 sin(x/2)^2: right to an ulp or two where |cos x| is near 1."""
    h = sin(multiply(x, 0.5))
    return subtract(1.0, multiply(multiply(h, h), 2.0))


@computed_in_float32
def cos(x):
    """cos from the Sin primitive alone. sin(x + pi/2) would round x + pi/2 first: half an ulp
    of x (0.004 at x = 1e5, everything beyond 1e7). Here every argument is exact (x, 2x, x/2):
    cos x = sin(2x) / (2 sin x), whose two sines are each right to an ulp, so the quotient keeps
    its relative accuracy everywhere, near the zeros of cos too, except at x = 0 and where 2x
    overflows; there (|x| < 1/2, |x| > 1e15) 1 - 2 sin(x/2)^2, right to 1e-7 absolute, and to
    an ulp or two at |x| < 1/2 (cos near 1). The NumPy backend reads the select as np.cos."""
    x = _float(x)
    z = multiply(x, x)
    ratio = true_divide(sin(multiply(x, 2.0)), multiply(sin(x), 2.0))
    return where(logical_or(less(z, 0.25), greater(z, 1e30)), _cos_from_half(x), ratio)


@computed_in_float32
def tan(x):
    return true_divide(sin(x), cos(x))


def _half_exp(ax):
    """exp(ax) / 2 without overflowing where the result still fits (ax up to 89.4):
    exp(ax / 2) * 0.5 * exp(ax / 2)."""
    h = exp(multiply(ax, 0.5))
    return multiply(multiply(h, 0.5), h)


@computed_in_float32
def sinh(x):
    x = _float(x)
    ax = absolute(x)
    # (e - 1/e) / 2 with e = expm1 + 1: no cancellation for small x (sinh(1e-7) is 1e-7)
    e = expm1(ax)
    r = where(greater(ax, 88.0), _half_exp(ax), multiply(add(e, true_divide(e, add(e, 1.0))), 0.5))
    return copysign(r, x)


@computed_in_float32
def cosh(x):
    ax = absolute(_float(x))
    e = exp(ax)
    return where(greater(ax, 88.0), _half_exp(ax), multiply(add(e, reciprocal(e)), 0.5))


# below |x| = 0.3 tanh's Taylor series (ir/series.py), where 1 - 2 / (exp(2x) + 1) cancels
# (tanh(1e-7) came out 1.19e-7). The NumPy backend reads the whole select as np.tanh.


@computed_in_float32
def tanh(x):
    x = _float(x)
    # 1 - 2 / (exp(2x) + 1) saturates cleanly at +-1
    big = subtract(1.0, true_divide(2.0, add(exp(multiply(x, 2.0)), 1.0)))
    z = multiply(x, x)
    small = multiply(x, _horner(z, (1.0,) + series.TANH))
    # (|x| < 0.3 read through z: no separate abs pass)
    return where(less(z, series.TANH_BELOW ** 2), small, big)


@computed_in_float32
def arctan(x):
    x = _float(x)
    # range reduction to |t| <= tan(pi/12) then an odd polynomial
    ax = absolute(x)
    inv = greater(ax, 1.0)
    t = where(inv, reciprocal(where(inv, ax, 1.0)), ax)
    big = greater(t, series.ARCTAN_REDUCED_BELOW)
    t2 = where(big, true_divide(subtract(multiply(t, 1.7320508075688772), 1.0), add(t, 1.7320508075688772)), t)
    z = multiply(t2, t2)
    p = multiply(t2, _horner(z, (1.0,) + series.ARCTAN))  # (ir/series.py: the NumPy backend reads it)
    p = where(big, add(p, math.pi / 6), p)
    p = where(inv, subtract(math.pi / 2, p), p)
    return odd_from_magnitude(x, p)


@computed_in_float32
def arctan2(y, x):
    y, x = _float(y), _float(x)
    r = _arctan2(y, x)
    # a backend's own atan2 (NumPy's np.arctan2): one pass where this is ~40; searched against it
    return name_kernel(r, "arctan2", [broadcast_to(y, r.shape), broadcast_to(x, r.shape)], (), only=False)


def _arctan2(y, x):
    """atan2 in primitives (float y, x)."""
    # atan2 does not change when both are scaled: tiny pairs are lifted by 2**64 (exact), else a
    # subnormal x's reciprocal overflows and 0 * inf makes atan2(0, 1e-43) NaN instead of 0
    scale = where(less(add(absolute(y), absolute(x)), 2.0 ** -60), 2.0 ** 64, 1.0)
    y, x = multiply(y, scale), multiply(x, scale)
    q = true_divide(y, where(equal(x, 0), 1.0, x))
    # both infinite: inf / inf is NaN, but the angle is that of (+-1, +-1), as in C's atan2 (the
    # quotient is patched, not x: lnp.where would lose the sign of an x of -0.0)
    q = where(logical_and(isinf(y), isinf(x)), multiply(copysign(1.0, y), copysign(1.0, x)), q)
    a = arctan(q)
    y_neg = signbit(y)  # -0.0 counts as negative, as in C's atan2: atan2(-0.0, -1) is -pi
    a = where(less(x, 0), where(y_neg, subtract(a, math.pi), add(a, math.pi)), a)
    # x = +-0: +-pi/2, and for y = +-0 too, +-0 (x = +0) or +-pi (x = -0)
    on_axis = where(signbit(x), math.pi, 0.0)
    on_axis = where(equal(y, 0), where(y_neg, negative(on_axis), on_axis),
                    where(greater(y, 0), math.pi / 2, -math.pi / 2))
    return where(logical_or(isnan(x), isnan(y)), math.nan, where(equal(x, 0), on_axis, a))


@computed_in_float32
def arcsin(x):
    x = _float(x)
    # (its own kernel, NumPy's np.arcsin, searched; the arctan2 inside is not named: a backend
    # with both would offer the two in one class)
    r = _arctan2(x, sqrt(multiply(subtract(1.0, x), add(1.0, x))))
    return name_kernel(r, "arcsin", [x], (), only=False)


@computed_in_float32
def arccos(x):
    x = _float(x)
    r = _arctan2(sqrt(multiply(subtract(1.0, x), add(1.0, x))), x)
    return name_kernel(r, "arccos", [x], (), only=False)


_BIG = 2.0 ** 28  # above it x^2 + 1 is x^2 in float32 (and x^2 overflows from 1.8e19)


@computed_in_float32
def arcsinh(x):
    x = _float(x)
    ax = absolute(x)
    # log1p(x + x^2 / (1 + sqrt(1 + x^2))): no cancellation for small x; log(2x) for big x
    small = log1p(add(ax, true_divide(multiply(ax, ax), add(1.0, sqrt(add(multiply(ax, ax), 1.0))))))
    r = where(greater(ax, _BIG), add(log(ax), LN2), small)
    return odd_from_magnitude(x, r)


@computed_in_float32
def arccosh(x):
    x = _float(x)
    t = subtract(x, 1.0)  # exact near 1, where acosh(1 + t) ~ sqrt(2t)
    small = log1p(add(t, sqrt(multiply(t, add(t, 2.0)))))
    r = where(greater(x, _BIG), add(log(x), LN2), small)
    return where(less(x, 1.0), math.nan, r)  # (t * (t + 2) overflows to +inf for huge negative x)


@computed_in_float32
def arctanh(x):
    x = _float(x)
    ax = absolute(x)
    # log((1 + x) / (1 - x)) / 2 as log1p(2|x| / (1 - |x|)) / 2, the sign put back: no
    # cancellation for small x, and none near -1 (log1p of a value near -1 loses it)
    r = multiply(log1p(true_divide(multiply(ax, 2.0), subtract(1.0, ax))), 0.5)
    return odd_from_magnitude(x, r)


def deg2rad(x):
    return multiply(_float(x), math.pi / 180.0)


def rad2deg(x):
    return multiply(_float(x), 180.0 / math.pi)


radians = deg2rad
degrees = rad2deg


@computed_in_float32
def hypot(x, y):
    # big * sqrt(1 + (small / big)^2): no overflow of x^2 (hypot(3e38, 1) is 3e38); an
    # infinite side wins over nan, as C's hypot
    x, y = _float(x), _float(y)
    ax, ay = absolute(x), absolute(y)
    big, small = maximum(ax, ay), minimum(ax, ay)
    r = true_divide(small, where(equal(big, 0), 1.0, big))
    h = multiply(big, sqrt(add(1.0, multiply(r, r))))
    return where(logical_or(isinf(x), isinf(y)), math.inf, h)


@computed_in_float32
def sinc(x):
    x = _float(x)
    px = multiply(x, math.pi)
    # near 0 the series 1 - (pi x)^2 / 6: sin(px) / px would divide by a subnormal px, whose
    # reciprocal overflows (1e-45 gave inf)
    small = less(absolute(px), 1e-3)
    series = subtract(1.0, multiply(multiply(px, px), 1.0 / 6.0))
    return where(small, series, true_divide(sin(px), where(small, 1.0, px)))

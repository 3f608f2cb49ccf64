"""Trigonometric and hyperbolic functions, decomposed into the HLIR primitives (split from
_math.py, which re-exports them)."""
from __future__ import annotations

import math

from ._math import (
    _float, absolute, add, computed_in_float32, copysign, equal, exp, greater, isinf, less, log,
    logical_and, multiply, negative, reciprocal, signbit, sqrt, square, subtract, true_divide,
    unary, where
)


# ---- trigonometry -----------------------------------------------------------------------------
def sin(x):
    return unary("Sin", x)


@computed_in_float32
def cos(x):
    return sin(add(_float(x), math.pi / 2))


@computed_in_float32
def tan(x):
    return true_divide(sin(x), cos(x))


@computed_in_float32
def sinh(x):
    e = exp(x)
    return multiply(subtract(e, reciprocal(e)), 0.5)


@computed_in_float32
def cosh(x):
    e = exp(x)
    return multiply(add(e, reciprocal(e)), 0.5)


@computed_in_float32
def tanh(x):
    x = _float(x)
    # 1 - 2 / (exp(2x) + 1) saturates cleanly at +-1
    return subtract(1.0, true_divide(2.0, add(exp(multiply(x, 2.0)), 1.0)))


@computed_in_float32
def arctan(x):
    x = _float(x)
    # range reduction to |t| <= tan(pi/12) then an odd polynomial
    ax = absolute(x)
    inv = greater(ax, 1.0)
    t = where(inv, reciprocal(where(inv, ax, 1.0)), ax)
    big = greater(t, 0.2679491924311227)
    t2 = where(big, true_divide(subtract(multiply(t, 1.7320508075688772), 1.0), add(t, 1.7320508075688772)), t)
    z = multiply(t2, t2)
    p = multiply(t2, add(1.0, multiply(z, add(-1.0 / 3, multiply(z, add(0.2, multiply(z, add(-1.0 / 7, multiply(z, add(1.0 / 9, multiply(z, -1.0 / 11)))))))))))
    p = where(big, add(p, math.pi / 6), p)
    p = where(inv, subtract(math.pi / 2, p), p)
    return where(less(x, 0), negative(p), p)


@computed_in_float32
def arctan2(y, x):
    y, x = _float(y), _float(x)
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
    return where(equal(x, 0), on_axis, a)


@computed_in_float32
def arcsin(x):
    x = _float(x)
    return arctan2(x, sqrt(multiply(subtract(1.0, x), add(1.0, x))))


@computed_in_float32
def arccos(x):
    x = _float(x)
    return arctan2(sqrt(multiply(subtract(1.0, x), add(1.0, x))), x)


@computed_in_float32
def arcsinh(x):
    x = _float(x)
    ax = absolute(x)
    r = log(add(ax, sqrt(add(multiply(ax, ax), 1.0))))
    return where(less(x, 0), negative(r), r)


@computed_in_float32
def arccosh(x):
    x = _float(x)
    return log(add(x, sqrt(multiply(subtract(x, 1.0), add(x, 1.0)))))


@computed_in_float32
def arctanh(x):
    x = _float(x)
    return multiply(log(true_divide(add(1.0, x), subtract(1.0, x))), 0.5)


def deg2rad(x):
    return multiply(_float(x), math.pi / 180.0)


def rad2deg(x):
    return multiply(_float(x), 180.0 / math.pi)


radians = deg2rad
degrees = rad2deg


@computed_in_float32
def hypot(x, y):
    return sqrt(add(square(_float(x)), square(_float(y))))


@computed_in_float32
def sinc(x):
    x = _float(x)
    px = multiply(x, math.pi)
    # near 0 the series 1 - (pi x)^2 / 6: sin(px) / px would divide by a subnormal px, whose
    # reciprocal overflows (1e-45 gave inf)
    small = less(absolute(px), 1e-3)
    series = subtract(1.0, multiply(multiply(px, px), 1.0 / 6.0))
    return where(small, series, true_divide(sin(px), where(small, 1.0, px)))

"""Comparisons of whole arrays and type predicates: isclose, allclose, array_equal, array_equiv,
and the real-valued forms of NumPy's complex-number queries (this library has no complex dtype)."""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import same
from ..errors import ShapeError
from ..tracer import Tracer, _ctx_of, broadcast_shapes, cast, lift, result_dtype
from . import _math as m
from ._creation import ones_like, zeros_like
from ._reduce import all as all_

__all__ = ["isclose", "allclose", "array_equal", "array_equiv", "isscalar", "iscomplex", "isreal",
           "iscomplexobj", "isrealobj", "imag", "angle", "heaviside"]


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (not symmetric, as NumPy's); infinities are
    close only to themselves, NaN only when ``equal_nan``."""
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    d = result_dtype(a, b)
    if not d.is_float:
        d = dt.float32
    a, b = cast(a, d), cast(b, d)
    finite = m.logical_and(m.isfinite(a), m.isfinite(b))
    near = m.less_equal(m.absolute(m.subtract(a, b)), m.add(atol, m.multiply(rtol, m.absolute(b))))
    out = m.where(finite, near, m.equal(a, b))  # inf == inf, and NaN equals nothing
    if equal_nan:
        out = m.logical_or(out, m.logical_and(m.isnan(a), m.isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """A bool array of shape (): every element of a close to b's (``isclose``)."""
    return all_(isclose(a, b, rtol, atol, equal_nan))


def _false(ctx) -> Tracer:
    return lift(np.bool_(False), ctx)


def _shapes_equal(fn: str, s1, s2) -> bool:
    if len(s1) != len(s2):
        return False
    for x, y in zip(s1, s2):
        if same(x, y):
            continue
        if isinstance(x, int) and isinstance(y, int):
            return False
        raise ShapeError(f"{fn}: cannot tell whether shapes {tuple(s1)} and {tuple(s2)} are equal "
                         f"while tracing (a dynamic dim against another dim); compare arrays of one "
                         f"dynamic shape, or slice them to a common length first")
    return True


def array_equal(a1, a2, equal_nan=False):
    """A bool array of shape (): the same shape and the same elements (False for different
    shapes, decided when traced)."""
    ctx = _ctx_of(a1, a2)
    a1, a2 = lift(a1, ctx), lift(a2, ctx)
    if not _shapes_equal("array_equal", a1.shape, a2.shape):
        return _false(ctx)
    eq = m.equal(a1, a2)
    if equal_nan and result_dtype(a1, a2).is_float:
        eq = m.logical_or(eq, m.logical_and(m.isnan(a1), m.isnan(a2)))
    return all_(eq)


def array_equiv(a1, a2):
    """A bool array of shape (): the shapes broadcast together and every element is equal."""
    ctx = _ctx_of(a1, a2)
    a1, a2 = lift(a1, ctx), lift(a2, ctx)
    try:
        broadcast_shapes(a1.shape, a2.shape, op="array_equiv")
    except ShapeError:
        return _false(ctx)
    return all_(m.equal(a1, a2))


def isscalar(element) -> bool:
    """NumPy's: Python and NumPy scalars, not arrays (a traced array, even of shape (), is not)."""
    return np.isscalar(element)


def iscomplex(x):
    """All False: this library has no complex dtype."""
    return zeros_like(x, dtype=dt.bool_)


def isreal(x):
    """All True: this library has no complex dtype."""
    return ones_like(x, dtype=dt.bool_)


def iscomplexobj(x) -> bool:
    return False


def isrealobj(x) -> bool:
    return True


def imag(x):
    """Zeros of x's shape and dtype (real arrays have no imaginary part)."""
    return zeros_like(x)


def angle(z, deg=False):
    """The argument of a real number: 0 for x >= +0, pi for x < 0 and for -0.0, NaN for NaN."""
    x = m._float(z)
    half_turn = 180.0 if deg else math.pi
    return m.where(m.isnan(x), x, m.where(m.signbit(x), half_turn, 0.0))


def heaviside(x1, x2):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0; NaN where x1 is NaN."""
    ctx = _ctx_of(x1, x2)
    x1, x2 = lift(x1, ctx), lift(x2, ctx)
    d = result_dtype(x1, x2)
    if not d.is_float:  # NumPy's loops are float only: bool computes in float16, int32 in float32
        d = dt.float16 if d.is_bool else dt.float32
    x1, x2 = cast(x1, d), cast(x2, d)
    out = m.where(m.less(x1, 0), 0.0, m.where(m.greater(x1, 0), 1.0, x2))
    return m.where(m.isnan(x1), x1, out)

"""Sorting by ranks: each element's rank is a count of the elements that precede it, and one
Scatter places it. O(n^2) comparisons along the sorted axis, which is fine for the axis lengths
of models (vocabularies use top-k on a reshaped view or argmax). NaN sorts last, as in NumPy."""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.view import contiguous_strides
from ..errors import ShapeError
from ..tracer import (_ctx_of, _new, binary, broadcast_to, cast, iota, lift, normalize_axis,
                      reshape_any, static_int)
from . import _math as m
from ._index import take_along_axis
from ._reduce import sum as rsum
from ._shape import expand_dims, moveaxis


def _lt_key(a, b):
    """a sorts strictly before b (NaN after everything)."""
    if a.dtype.is_float:
        return m.logical_or(m.less(a, b), m.logical_and(m.isnan(b), m.logical_not(m.isnan(a))))
    return m.less(a, b)


def _eq_key(a, b):
    if a.dtype.is_float:
        return m.logical_or(m.equal(a, b), m.logical_and(m.isnan(a), m.isnan(b)))
    return m.equal(a, b)


def argsort(a, axis=-1, kind=None, order=None, stable=True, descending=False):
    a = lift(a, _ctx_of(a))
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    if a.ndim == 0:
        raise ShapeError("argsort: needs at least one dim")
    axis = normalize_axis(axis, a.ndim, "argsort")
    x = moveaxis(a, axis, -1)
    n = static_int(x.shape[-1], "argsort: the sorted axis")
    if x.dtype.is_bool:
        x = cast(x, dt.int32)
    if descending:
        # ascending order of the negated key: ties keep index order (stable), NaN stays last
        return moveaxis(argsort(m.negative(x), -1), -1, axis)
    xi = expand_dims(x, -1)  # element i along -2
    xj = expand_dims(x, -2)  # element j along -1
    before = _lt_key(xj, xi)
    ii = reshape_any(iota(None, n, a._ctx), (n, 1))
    jj = reshape_any(iota(None, n, a._ctx), (1, n))
    tie_before = m.logical_and(_eq_key(xj, xi), m.less(jj, ii))
    rank = rsum(cast(m.logical_or(before, tie_before), dt.int32), axis=-1)  # (..., n)
    # out[..., rank[i]] = i
    shape = x.shape
    strides = contiguous_strides(shape)
    flat = rank
    for d_ax in range(len(shape) - 1):
        d = shape[d_ax]
        shp = tuple(d if j == d_ax else 1 for j in range(len(shape)))
        flat = binary("Add", flat, binary("Mul", reshape_any(iota(None, d, a._ctx), shp), strides[d_ax]))
    src = broadcast_to(reshape_any(iota(None, n, a._ctx), (1,) * (len(shape) - 1) + (n,)), shape)
    dest = broadcast_to(lift(0, a._ctx, dt.int32), shape)
    out = _new(a._ctx, "Scatter", [dest, broadcast_to(flat, shape), src], shape, dt.int32, mode="set")
    return moveaxis(out, -1, axis)


def sort(a, axis=-1, kind=None, order=None, stable=True, descending=False):
    a = lift(a, _ctx_of(a))
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    idx = argsort(a, axis, descending=descending)
    return take_along_axis(a, idx, axis)


def top_k(operand, k):
    """The k largest along the last axis, in descending order, and their indices (jax.lax.top_k)."""
    x = lift(operand, _ctx_of(operand))
    n = static_int(x.shape[-1], "top_k: the last axis")
    if not 0 <= k <= n:
        raise ShapeError(f"top_k: k={k} must be in [0, {n}]")
    idx = argsort(x, -1, descending=True)
    from ._shape import _slice_axis

    idx = _slice_axis(idx, x.ndim - 1, 0, k)
    return take_along_axis(x, idx, -1), idx


def partition(a, kth, axis=-1):
    return sort(a, axis)


def argpartition(a, kth, axis=-1):
    return argsort(a, axis)


def searchsorted(a, v, side="left"):
    """Insertion points of v into the sorted 1-D a."""
    a = lift(a, _ctx_of(a, v))
    v = lift(v, a._ctx)
    if a.ndim != 1:
        raise ShapeError("searchsorted: a must be 1-D")
    ve = expand_dims(v, -1)
    cmp = m.less(a, ve) if side == "left" else m.less_equal(a, ve)
    return rsum(cast(cmp, dt.int32), axis=-1)


def unique(*args, **kwargs):
    raise ShapeError("unique: the output size depends on the data; it cannot be traced with a static "
                     "shape (compute it outside the jitted function, or use a fixed-size alternative)")


def nonzero(*args, **kwargs):
    raise ShapeError("nonzero: the output size depends on the data; use where(mask, x, fill) instead")


argwhere = flatnonzero = nonzero

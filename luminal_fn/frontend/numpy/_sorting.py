"""Sorting by ranks: each element's rank is the number of elements that sort before it, and one
Scatter places it. O(n^2) comparisons along the sorted axis, which is fine for the axis lengths
of models (vocabularies use top-k on a reshaped view or argmax).

Order: stable (ties keep their index order); NaN sorts after +inf, as in NumPy. ``descending``
follows JAX: the values come out as the ascending order reversed (so NaN first), while ties still
keep their index order. ``top_k`` is jax.lax.top_k: the k largest, NaN counted largest.
"""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.expr import Z, as_expr, prod
from ..errors import ShapeError
from ..tracer import (Tracer, _ctx_of, _new, binary, broadcast_to, cast, iota, lift, name_kernel, normalize_axis,
                      reshape_any, result_dtype, static_int)
from . import _math as m
from ._index import dim_value, take
from ._reduce import _positions
from ._reduce import sum as rsum
from ._shape import _slice_axis, expand_dims, moveaxis


def _lt_key(a, b):
    """a sorts strictly before b (NaN after everything)."""
    if a.dtype.is_float:
        return m.logical_or(m.less(a, b), m.logical_and(m.isnan(b), m.logical_not(m.isnan(a))))
    return m.less(a, b)


def _eq_key(a, b):
    if a.dtype.is_float:
        return m.logical_or(m.equal(a, b), m.logical_and(m.isnan(a), m.isnan(b)))
    return m.equal(a, b)


def _keys(x: Tracer) -> Tracer:
    return cast(x, dt.int32) if x.dtype.is_bool else x


def _ranks(x: Tracer, descending: bool) -> Tracer:
    """Each element's int32 position in its row's sorted order (ties by index)."""
    ctx = x._ctx
    n = x.shape[-1]
    k = _keys(x)
    xi = expand_dims(k, -1)  # element i along -2
    xj = expand_dims(k, -2)  # element j along -1
    before = _lt_key(xi, xj) if descending else _lt_key(xj, xi)
    ii = reshape_any(iota(None, n, ctx), (n, 1))
    jj = reshape_any(iota(None, n, ctx), (1, n))
    tie_before = m.logical_and(_eq_key(xj, xi), m.less(jj, ii))
    return rsum(cast(m.logical_or(before, tie_before), dt.int32), axis=-1)  # (..., n)


def _row_starts(x: Tracer, width) -> Tracer:
    """(..., 1): where row r of x's leading dims starts in a flat result of rows of ``width``."""
    lead = x.shape[:-1]
    return reshape_any(iota(Z * as_expr(width), prod(lead), x._ctx), lead + (1,))


def _scatter_by_rank(x: Tracer, descending: bool):
    """x (sorted along its last axis) -> the flat destination of each element."""
    return binary("Add", _ranks(x, descending), _row_starts(x, x.shape[-1]))


def _sort_last(x: Tracer, descending: bool, values: bool, indices: bool):
    ctx = x._ctx
    flat = _scatter_by_rank(x, descending)
    shape = x.shape
    # the ranks are the definition; a backend with a sort kernel runs that instead (ir/composites.py)
    params = (prod(shape[:-1]), shape[-1], int(descending))
    out = []
    if values:
        dest = broadcast_to(cast(lift(0, ctx), x.dtype), shape)
        out.append(name_kernel(_new(ctx, "Scatter", [dest, flat, x], shape, x.dtype, mode="set"),
                               "sort_rows", [x], params))
    if indices:
        src = _positions(x, x.ndim - 1)
        dest = broadcast_to(lift(0, ctx, dt.int32), shape)
        out.append(name_kernel(_new(ctx, "Scatter", [dest, flat, src], shape, dt.int32, mode="set"),
                               "argsort_rows", [x], params))
    return out


def _prepare(a, axis, fn):
    a = lift(a, _ctx_of(a))
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    if a.ndim == 0:
        raise ShapeError(f"{fn}: needs at least one dim (got a 0-d array); use axis=None")
    axis = normalize_axis(axis, a.ndim, fn)
    return a, axis


def argsort(a, axis=-1, kind=None, order=None, stable=True, descending=False):
    a, axis = _prepare(a, axis, "argsort")
    (idx,) = _sort_last(moveaxis(a, axis, -1), descending, values=False, indices=True)
    return moveaxis(idx, -1, axis)


def sort(a, axis=-1, kind=None, order=None, stable=True, descending=False):
    a, axis = _prepare(a, axis, "sort")
    (vals,) = _sort_last(moveaxis(a, axis, -1), descending, values=True, indices=False)
    return moveaxis(vals, -1, axis)


def top_k(operand, k):
    """The k largest along the last axis, largest first, and their int32 indices (jax.lax.top_k:
    ties keep index order, NaN counts as largest)."""
    x = lift(operand, _ctx_of(operand))
    if x.ndim == 0:
        raise ShapeError("top_k: needs at least one dim (got a 0-d array)")
    n = static_int(x.shape[-1], "top_k: the last axis")
    if not isinstance(k, int) or not 0 <= k <= n:
        raise ShapeError(f"top_k: k={k!r} must be an int in [0, {n}] for shape {x.shape}")
    if 0 < k < n:
        idx = _top_k_positions(x, k)
    else:  # (all of the order, or none of it)
        (idx,) = _sort_last(x, True, values=False, indices=True)
        idx = _slice_axis(idx, x.ndim - 1, 0, k)
    # the values gathered by those positions (in range: no wrap), not sorted a second time
    return _new(x._ctx, "Gather", [binary("Add", idx, _row_starts(x, n)), x], idx.shape, x.dtype), idx


def _top_k_positions(x: Tracer, k: int) -> Tracer:
    """The positions of the k first of x's descending order: each position scattered to its
    rank, ranks past k dropped (out of range), and named the top_k_rows kernel, which need not
    order the rest (ir/composites.py). (Not a slice of the argsort: an option reading the
    argsort around the kernel would keep the whole sort alive.)"""
    ctx, n, lead = x._ctx, x.shape[-1], x.shape[:-1]
    rank = _ranks(x, True)
    past = binary("Mul", cast(m.greater_equal(rank, k), dt.int32), dim_value(prod(lead) * k, ctx))
    flat = binary("Add", binary("Add", rank, _row_starts(x, k)), past)
    src = _positions(x, x.ndim - 1)
    dest = broadcast_to(lift(0, ctx, dt.int32), lead + (k,))
    out = _new(ctx, "Scatter", [dest, flat, src], lead + (k,), dt.int32, mode="set")
    return name_kernel(out, "top_k_rows", [x], (prod(lead), n, k))


def _check_kth(a, kth, axis, fn):
    a, axis = _prepare(a, axis, fn)
    n = a.shape[axis]
    for k in ([kth] if isinstance(kth, int) else list(kth)):
        if isinstance(n, int) and not -n <= int(k) < n:
            raise ShapeError(f"{fn}: kth={k} is out of bounds for axis {axis} of size {n}")
    return a, axis


def partition(a, kth, axis=-1):
    """A valid partition: the fully sorted array (NumPy leaves the order within each side open)."""
    a, axis = _check_kth(a, kth, axis, "partition")
    return sort(a, axis)


def argpartition(a, kth, axis=-1):
    a, axis = _check_kth(a, kth, axis, "argpartition")
    return argsort(a, axis)


def searchsorted(a, v, side="left", sorter=None):
    """Insertion points (int32) of v into the sorted 1-D a, in NumPy's order (NaN last)."""
    ctx = _ctx_of(a, v)
    a, v = lift(a, ctx), lift(v, ctx)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: a must be 1-D, got shape {a.shape}")
    if side not in ("left", "right"):
        raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        a = take(a, sorter)
    d = result_dtype(a, v)
    a, v = _keys(cast(a, d)), _keys(cast(v, d))
    ve = expand_dims(v, -1)
    if side == "left":
        cmp = _lt_key(a, ve)  # a[i] < v
    else:
        cmp = m.logical_not(_lt_key(ve, a))  # a[i] <= v
    return rsum(cast(cmp, dt.int32), axis=-1)


def unique(*args, **kwargs):
    raise ShapeError("unique: the output size depends on the data; it cannot be traced with a static "
                     "shape (compute it outside the jitted function, or use a fixed-size alternative)")


def nonzero(*args, **kwargs):
    raise ShapeError("nonzero: the output size depends on the data; use where(mask, x, fill) instead")


argwhere = flatnonzero = nonzero

"""Indexing: basic indices are views; advanced indices are one Gather (or Scatter for ``.at``).

Out-of-range *traced* indices are clamped by gathers and dropped by scatters, as in JAX;
out-of-range *concrete* indices raise at trace time.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, Z, as_expr, maximum as emax, minimum as emin, same, to_int_or_expr
from ...ir.view import contiguous_strides
from ..errors import IndexError_, ShapeError, where as _where
from ..tracer import (Tracer, _ctx_of, _new, binary, broadcast_shapes, broadcast_to, cast, iota,
                      lift, normalize_axis, reshape_any, with_view)
from ._shape import _slice_axis


# ---- parsing ------------------------------------------------------------------------------------
def _is_advanced(i) -> bool:
    return isinstance(i, (Tracer, np.ndarray, list)) and not isinstance(i, bool)


def _normalize_index(x: Tracer, idx) -> list:
    if not isinstance(idx, tuple):
        idx = (idx,)
    out = []
    for i in idx:
        if isinstance(i, (list,)) or (isinstance(i, np.ndarray)):
            i = np.asarray(i)
            if i.dtype == np.bool_:
                # a concrete boolean mask: static shape, becomes integer index arrays
                out.extend(np.nonzero(i))
                continue
            if not np.issubdtype(i.dtype, np.integer):
                raise IndexError_(f"index arrays must be integers or booleans, got {i.dtype}")
            out.append(i)
        elif isinstance(i, Tracer) and i.dtype.is_bool:
            raise IndexError_(
                f"boolean-mask indexing with a traced mask {_where(x._ctx.fn_name)} has a "
                "data-dependent output shape; use luminal_fn.numpy.where(mask, x, 0) instead, or pass "
                "the mask as a concrete (static) NumPy array"
            )
        elif isinstance(i, Tracer) and not i.dtype.is_int:
            raise IndexError_(f"index arrays must be integers, got a traced {i.dtype} array")
        elif isinstance(i, (bool, np.bool_)):
            raise IndexError_("boolean scalar indices are not supported; use expand_dims")
        elif isinstance(i, (np.integer,)):
            out.append(int(i))
        elif i is None or i is Ellipsis or isinstance(i, (int, slice, Tracer, Expr)):
            out.append(i)
        else:
            raise IndexError_(f"unsupported index {i!r} of type {type(i).__name__}; use ints, slices, "
                              "None, Ellipsis, integer arrays or static boolean masks")
    n_ell = sum(1 for i in out if i is Ellipsis)
    if n_ell > 1:
        raise IndexError_("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in out if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise IndexError_(f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed")
    if n_ell:
        k = out.index(Ellipsis)
        out = out[:k] + [slice(None)] * (x.ndim - used) + out[k + 1:]
    else:
        out = out + [slice(None)] * (x.ndim - used)
    return out


def _slice_bounds(s: slice, n):
    step = 1 if s.step is None else int(s.step)
    if step == 0:
        raise IndexError_("slice step cannot be zero")
    if isinstance(n, int):
        start, stop, step = s.indices(n)
        if step > 0:
            return start, max(stop, start), step
        return start, stop, step
    # symbolic length: support forward slices with int bounds
    if step < 0:
        if s.start is None and s.stop is None:
            return None  # handled as flip
        raise IndexError_(f"negative-step slices of the symbolic dim {n} need start and stop omitted")

    def bound(v, default):
        if v is None:
            return default
        v = as_expr(v)
        if v.is_const and v.value < 0:
            v = as_expr(n) + v.value
        return emax(emin(v, as_expr(n)), 0)

    start = bound(s.start, as_expr(0))
    stop = bound(s.stop, as_expr(n))
    return to_int_or_expr(start), to_int_or_expr(emax(stop, start)), step


def _int_index(i, n, axis):
    if isinstance(i, Expr):
        return to_int_or_expr(i)
    if isinstance(n, int):
        if not -n <= i < n:
            raise IndexError_(f"index {i} is out of bounds for axis {axis} with size {n}")
        return i % n
    if i < 0:
        return to_int_or_expr(as_expr(n) + i)
    return i


# ---- getitem ------------------------------------------------------------------------------------
def getitem(x, idx):
    x = lift(x, _ctx_of(x))
    items = _normalize_index(x, idx)
    if not any(_is_advanced(i) for i in items):
        return _basic(x, items)
    return _advanced(x, items)


def _basic(x: Tracer, items) -> Tracer:
    out = x
    axis = 0
    for i in items:
        if i is None:
            out = with_view(out, out._view.insert_axis(axis, 1), None)
            axis += 1
        elif isinstance(i, slice):
            n = out.shape[axis]
            b = _slice_bounds(i, n)
            if b is None:
                out = with_view(out, out._view.flip(axis), None)
            else:
                start, stop, step = b
                if step > 0:
                    if not (same(start, 0) and same(stop, n) and step == 1):
                        out = _slice_axis(out, axis, start, stop, step)
                else:
                    # reverse: elements start, start+step, ... > stop
                    cnt = max(0, -((start - stop) // step)) if isinstance(stop, int) else 0
                    flipped = with_view(out, out._view.flip(axis), None)
                    first = n - 1 - start
                    out = _slice_axis(flipped, axis, first, first + (cnt - 1) * (-step) + 1, -step)
            axis += 1
        else:
            k = _int_index(i, out.shape[axis], axis)
            out = _slice_axis(out, axis, k, to_int_or_expr(as_expr(k) + 1))
            out = with_view(out, out._view.remove_axis(axis), None)
    return out


def _positions_for(x: Tracer, items):
    """Per input axis, an int32 Tracer of selected positions (or None for a removed new axis),
    and the output layout: returns (flat index Tracer shaped like the result, result shape)."""
    ctx = x._ctx
    adv_pos = [k for k, i in enumerate(items) if _is_advanced(i) or isinstance(i, Tracer)]
    adv = []
    axis = 0
    for k, i in enumerate(items):
        if i is None:
            continue
        if k in adv_pos:
            n = x.shape[axis]
            if isinstance(i, np.ndarray):
                if isinstance(n, int) and i.size and (i.max() >= n or i.min() < -n):
                    raise IndexError_(f"index {i.max() if i.max() >= n else i.min()} is out of bounds "
                                      f"for axis {axis} with size {n}")
                t = lift(np.where(i < 0, i + n, i).astype(np.int32) if isinstance(n, int) else i.astype(np.int32), ctx)
            else:
                t = cast(i, dt.int32)
                neg = binary("LessThan", t, 0, out_dtype=dt.bool_)
                t = binary("Add", t, binary("Mul", cast(neg, dt.int32), n))
            adv.append(t)
        axis += 1
    adv_shape = broadcast_shapes(*(t.shape for t in adv), op="advanced indexing")
    # are the advanced indices adjacent? then their dims go where the first one was
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    strides = contiguous_strides(x.shape)
    # build the result dims in NumPy's order, tracking each piece's position
    pieces = []  # (kind, payload) in result order
    axis = 0
    adv_inserted = False
    if not adjacent:
        pieces.append(("adv", None))
        adv_inserted = True
    adv_iter = iter(adv)
    adv_by_axis = {}
    for k, i in enumerate(items):
        if i is None:
            pieces.append(("new", None))
            continue
        if k in adv_pos:
            adv_by_axis[axis] = next(adv_iter)
            if not adv_inserted:
                pieces.append(("adv", None))
                adv_inserted = True
        else:
            n = x.shape[axis]
            if isinstance(i, slice):
                b = _slice_bounds(i, n)
                if b is None:
                    pos = iota(as_expr(n) - 1 - Z, n, ctx)
                else:
                    start, stop, step = b
                    if step > 0:
                        cnt = to_int_or_expr((as_expr(stop) - start + step - 1) // step)
                    else:
                        cnt = max(0, -((start - stop) // step))
                    pos = iota(as_expr(start) + Z * step, cnt, ctx)
                pieces.append(("axis", (axis, pos)))
            else:
                k_ = _int_index(i, n, axis)
                adv_by_axis.setdefault(("fixed", axis), k_)
        axis += 1
    res_shape = []
    for kind, payload in pieces:
        if kind == "adv":
            res_shape.extend(adv_shape)
        elif kind == "new":
            res_shape.append(1)
        else:
            res_shape.append(payload[1].shape[0])
    res_shape = tuple(res_shape)
    nd = len(res_shape)
    flat = None
    cursor = 0
    for kind, payload in pieces:
        if kind == "adv":
            start = cursor
            for ax, t in ((a, t) for a, t in adv_by_axis.items() if not isinstance(a, tuple)):
                tb = broadcast_to(t, adv_shape)
                shp = (1,) * start + adv_shape + (1,) * (nd - start - len(adv_shape))
                term = binary("Mul", reshape_any(tb, shp), strides[ax])
                flat = term if flat is None else binary("Add", flat, term)
            cursor += len(adv_shape)
        elif kind == "new":
            cursor += 1
        else:
            ax, pos = payload
            shp = (1,) * cursor + (pos.shape[0],) + (1,) * (nd - cursor - 1)
            term = binary("Mul", reshape_any(pos, shp), strides[ax])
            flat = term if flat is None else binary("Add", flat, term)
            cursor += 1
    for key, k_ in adv_by_axis.items():
        if isinstance(key, tuple):
            fixed = as_expr(k_) * strides[key[1]]
            flat = binary("Add", flat, to_int_or_expr(fixed)) if not same(fixed, 0) else flat
    return broadcast_to(flat, res_shape), res_shape


def _ints_as_arrays(items):
    """With advanced indices present, NumPy treats integer scalars as 0-d index arrays."""
    return [np.asarray(i) if isinstance(i, int) else i for i in items]


def _advanced(x: Tracer, items) -> Tracer:
    flat, res_shape = _positions_for(x, _ints_as_arrays(items))
    return _new(x._ctx, "Gather", [flat, x], res_shape, x.dtype)


# ---- take and friends ---------------------------------------------------------------------------
def take(a, indices, axis=None, mode=None):
    a = lift(a, _ctx_of(a, indices))
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    axis = normalize_axis(axis, a.ndim, "take")
    idx = indices if isinstance(indices, (Tracer, np.ndarray)) else np.asarray(indices)
    if isinstance(idx, np.ndarray) and idx.ndim == 0:
        return getitem(a, (slice(None),) * axis + (int(idx),))
    if isinstance(idx, Tracer) and idx.ndim == 0:
        idx = reshape_any(idx, (1,))
        out = getitem(a, (slice(None),) * axis + (idx,))
        return reshape_any(out, out.shape[:axis] + out.shape[axis + 1:])
    if mode == "wrap":
        from ._math import mod

        idx = mod(idx, a.shape[axis])
    elif mode == "clip":
        from ._math import clip

        idx = clip(idx, 0, to_int_or_expr(as_expr(a.shape[axis]) - 1))
    return getitem(a, (slice(None),) * axis + (idx,))


def take_along_axis(arr, indices, axis):
    arr = lift(arr, _ctx_of(arr, indices))
    ctx = arr._ctx
    if axis is None:
        arr = reshape_any(arr, (arr.size,))
        axis = 0
    idx = lift(indices if not isinstance(indices, np.ndarray) else indices.astype(np.int32), ctx)
    if idx.ndim != arr.ndim:
        raise ShapeError(f"take_along_axis: indices has {idx.ndim} dims but arr has {arr.ndim}")
    axis = normalize_axis(axis, arr.ndim, "take_along_axis")
    out_shape = tuple(idx.shape[i] if i == axis else d for i, d in enumerate(
        broadcast_shapes(tuple(1 if i == axis else d for i, d in enumerate(arr.shape)),
                         tuple(1 if i == axis else d for i, d in enumerate(idx.shape)))))
    flat = _along_axis_flat(arr, idx, axis, out_shape)
    return _new(ctx, "Gather", [flat, arr], out_shape, arr.dtype)


def _along_axis_flat(arr, idx, axis, out_shape):
    ctx = arr._ctx
    strides = contiguous_strides(arr.shape)
    n = arr.shape[axis]
    t = cast(idx, dt.int32)
    t = binary("Add", t, binary("Mul", cast(binary("LessThan", t, 0, out_dtype=dt.bool_), dt.int32), n))
    flat = binary("Mul", broadcast_to(t, out_shape), strides[axis])
    for i, d in enumerate(out_shape):
        if i == axis:
            continue
        shp = tuple(d if j == i else 1 for j in range(len(out_shape)))
        flat = binary("Add", flat, binary("Mul", reshape_any(iota(None, d, ctx), shp), strides[i]))
    return broadcast_to(flat, out_shape)


def put_along_axis(arr, indices, values, axis, mode="set"):
    arr = lift(arr, _ctx_of(arr, indices, values))
    idx = lift(indices if not isinstance(indices, np.ndarray) else indices.astype(np.int32), arr._ctx)
    axis = normalize_axis(axis, arr.ndim, "put_along_axis")
    out_shape = tuple(idx.shape[i] if i == axis else d for i, d in enumerate(arr.shape))
    flat = _along_axis_flat(arr, idx, axis, out_shape)
    vals = broadcast_to(cast(lift(values, arr._ctx), arr.dtype), out_shape)
    return _new(arr._ctx, "Scatter", [arr, flat, vals], arr.shape, arr.dtype, mode=mode)


def compress(condition, a, axis=None):
    cond = np.asarray(condition)
    if isinstance(condition, Tracer):
        raise IndexError_("compress: a traced condition gives a data-dependent shape")
    return take(a, np.nonzero(cond)[0].astype(np.int32), axis=axis)


# ---- .at[...] -------------------------------------------------------------------------------------
class _AtIndexer:
    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        return _AtRef(self._x, idx)


class _AtRef:
    __slots__ = ("_x", "_idx")

    def __init__(self, x, idx):
        self._x, self._idx = x, idx

    def get(self, **kw):
        return getitem(self._x, self._idx)

    def set(self, values):
        return _scatter(self._x, self._idx, values, "set")

    def add(self, values):
        return _scatter(self._x, self._idx, values, "add")

    def multiply(self, values):
        return _scatter(self._x, self._idx, values, "mul")

    mul = multiply

    def max(self, values):
        return _scatter(self._x, self._idx, values, "max")

    def min(self, values):
        return _scatter(self._x, self._idx, values, "min")

    def subtract(self, values):
        from ._math import negative

        return _scatter(self._x, self._idx, negative(values), "add")

    def divide(self, values):
        from ._math import reciprocal

        return _scatter(self._x, self._idx, reciprocal(values), "mul")


def _scatter(x, idx, values, mode):
    x = lift(x, _ctx_of(x, values))
    items = _normalize_index(x, idx)
    if any(_is_advanced(i) for i in items):
        flat, res_shape = _positions_for(x, _ints_as_arrays(items))
    else:
        flat, res_shape = _basic_positions(x, items)
    vals = broadcast_to(cast(lift(values, x._ctx), x.dtype), res_shape, op=f"at[...].{mode}")
    return _new(x._ctx, "Scatter", [x, flat, vals], x.shape, x.dtype, mode=mode)


def _basic_positions(x: Tracer, items):
    """Flat indices (shaped like x[items]) of a basic index, through a view of an iota."""
    n = x.size
    it = reshape_any(iota(None, n, x._ctx), x.shape)
    sel = _basic(it, items)
    return sel, sel.shape

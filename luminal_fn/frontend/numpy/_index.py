"""Indexing: basic indices are views; advanced indices are one Gather (or Scatter for ``.at``).

Concrete out-of-range indices raise at trace time. Traced indices follow JAX: negative values
count from the end; gathers clamp each index into its axis; scatters drop updates whose index
is out of range on any axis.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, Z, as_expr, ceildiv, maximum as emax, minimum as emin, same, to_int_or_expr
from ...ir.view import contiguous_strides
from ..errors import IndexError_, ShapeError, where as _where
from ..tracer import (Tracer, _ctx_of, _new, binary, broadcast_shapes, broadcast_to, cast, iota,
                      lift, normalize_axis, reshape_any, with_view)
from ._shape import _slice_axis

_NO_AXIS = object()  # an Ellipsis that expanded to no axes: it still separates advanced indices


# ---- parsing ------------------------------------------------------------------------------------
def _is_advanced(i) -> bool:
    return isinstance(i, (Tracer, np.ndarray))


def _normalize_index(x: Tracer, idx) -> list:
    """The index as a list with one entry per input axis (plus None entries for new axes):
    ints, slices, NumPy int arrays, traced int arrays; the Ellipsis expanded."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    out = []
    for i in idx:
        if isinstance(i, list) or isinstance(i, np.ndarray):
            if isinstance(i, list) and any(isinstance(e, Tracer) for e in np.ravel(np.asarray(i, object))):
                raise IndexError_("a list index that holds traced values: build the index array "
                                  "with luminal_fn.numpy.stack([...]) instead")
            i = np.asarray(i)
            if i.size == 0 and i.dtype == np.float64:
                i = i.astype(np.int32)  # x[[]] selects nothing, as in NumPy
            if i.dtype == np.bool_:
                if i.ndim == 0:
                    raise IndexError_("0-d boolean indices are not supported; use expand_dims")
                # a concrete boolean mask: static shape, becomes integer index arrays
                out.extend(a.astype(np.int64) for a in np.nonzero(i))
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
            raise IndexError_(f"index arrays must be integers, got a traced {i.dtype} array "
                              f"{_where(x._ctx.fn_name)}; cast it with .astype(int32)")
        elif isinstance(i, (bool, np.bool_)):
            raise IndexError_("boolean scalar indices are not supported; use expand_dims")
        elif isinstance(i, np.integer):
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
        k = next(j for j, i in enumerate(out) if i is Ellipsis)
        fill = [slice(None)] * (x.ndim - used) or [_NO_AXIS]
        out = out[:k] + fill + out[k + 1:]
    else:
        out = out + [slice(None)] * (x.ndim - used)
    return out


def _slice_spec(s: slice, n):
    """(first, count, step): the slice selects first + i*step for i < count (ints or Exprs)."""
    step = 1 if s.step is None else s.step
    if isinstance(step, Expr) or not isinstance(step, (int, np.integer)):
        raise IndexError_(f"slice steps must be Python ints, got {step!r}")
    step = int(step)
    if step == 0:
        raise IndexError_("slice step cannot be zero")

    def norm(v):  # a user bound as an index (negative counts from the end)
        if isinstance(v, (int, np.integer)):
            v = int(v)
            return as_expr(n) + v if v < 0 else as_expr(v)
        return as_expr(v)

    if s.start is None and s.stop is None and step == 1:
        return 0, n, 1  # the whole axis: keep n itself (a symbolic n would otherwise become max(n, 0))
    if step > 0:
        lo, hi = as_expr(0), as_expr(n)
        start = lo if s.start is None else emax(emin(norm(s.start), hi), lo)
        stop = hi if s.stop is None else emax(emin(norm(s.stop), hi), lo)
        count = ceildiv(emax(stop - start, 0), step)
        if step == 1 and not isinstance(n, int) and _static_from_front(s.start) and \
                (s.stop is None or _static_from_back(s.stop)):
            # the same count written one way, so that x[1:] and x[:-1] of a dynamic axis have
            # provably equal lengths: max(n + stop - start, 0) (stop <= 0 counts from the end)
            count = emax(as_expr(n) + (0 if s.stop is None else int(s.stop)) - int(s.start or 0), 0)
    else:
        lo, hi = as_expr(-1), as_expr(n) - 1
        start = hi if s.start is None else emax(emin(norm(s.start), hi), lo)
        stop = lo if s.stop is None else emax(emin(norm(s.stop), hi), lo)
        count = ceildiv(emax(start - stop, 0), -step)
    return to_int_or_expr(start), to_int_or_expr(count), step


def _static_from_front(v) -> bool:
    return v is None or (isinstance(v, (int, np.integer)) and v >= 0)


def _static_from_back(v) -> bool:
    return isinstance(v, (int, np.integer)) and v < 0


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


def _apply_slice(t: Tracer, axis: int, s: slice) -> Tracer:
    n = t.shape[axis]
    first, count, step = _slice_spec(s, n)
    if step > 0:
        if same(first, 0) and same(count, n) and step == 1:
            return t
        return _slice_axis(t, axis, first, to_int_or_expr(as_expr(first) + as_expr(count) * step), step)
    # a negative step: flip, then the same elements counted from the other end
    flipped = with_view(t, t._view.flip(axis), None)
    f = to_int_or_expr(as_expr(n) - 1 - first)
    if same(f, 0) and same(count, n) and step == -1:
        return flipped
    return _slice_axis(flipped, axis, f, to_int_or_expr(as_expr(f) + as_expr(count) * -step), -step)


def _remove_axis(t: Tracer, axis: int) -> Tracer:
    v = t._view.remove_axis(axis)
    return with_view(t, v, lambda m: with_view(m, m._view.remove_axis(axis), None))


def _basic(x: Tracer, items) -> Tracer:
    out = x
    axis = 0
    for i in items:
        if i is _NO_AXIS:
            continue
        if i is None:
            out = with_view(out, out._view.insert_axis(axis, 1), None)
            axis += 1
        elif isinstance(i, slice):
            out = _apply_slice(out, axis, i)
            axis += 1
        else:
            k = _int_index(i, out.shape[axis], axis)
            out = _slice_axis(out, axis, k, to_int_or_expr(as_expr(k) + 1))
            out = _remove_axis(out, axis)
    return out


# ---- advanced indexing --------------------------------------------------------------------------
def dim_value(v, ctx):
    """A shape quantity as an operand: a plain int, or a 0-d int32 Iota for a symbolic one."""
    v = to_int_or_expr(v)
    if isinstance(v, int):
        return v
    return reshape_any(iota(v, 1, ctx), ())


def _lt(a, b) -> Tracer:
    """int32 0/1 of a < b."""
    return cast(binary("LessThan", a, b, out_dtype=dt.bool_), dt.int32)


def _traced_positions(t: Tracer, n, ctx):
    """A traced index into an axis of size n: (clamped position, int32 1 where out of range)."""
    t = cast(t, dt.int32)
    nv, last = dim_value(n, ctx), dim_value(as_expr(n) - 1, ctx)
    t = binary("Add", t, binary("Mul", _lt(t, 0), nv))  # negative counts from the end
    below = _lt(t, 0)
    above = _lt(last, t)
    clamped = binary("Mul", t, binary("Add", 1, binary("Mul", below, -1)))  # max(t, 0)
    over = _lt(last, clamped)
    clamped = binary("Add", clamped, binary("Mul", over,
                                            binary("Add", last, binary("Mul", clamped, -1))))
    return clamped, binary("Add", below, above)


def _concrete_positions(i: np.ndarray, n, axis: int, ctx):
    if isinstance(n, int):
        if i.size and (i.max() >= n or i.min() < -n):
            bad = i.max() if i.max() >= n else i.min()
            raise IndexError_(f"index {bad} is out of bounds for axis {axis} with size {n}")
        return lift(np.where(i < 0, i + n, i).astype(np.int32), ctx), None
    # a symbolic axis: the bound is unknown here, so the index is checked like a traced one
    return _traced_positions(lift(i.astype(np.int32), ctx), n, ctx)


def _positions(x: Tracer, items, for_scatter: bool = False):
    """Flat indices into x (shaped like x[items]) and whether each is out of range (or None)."""
    ctx = x._ctx
    items = [np.asarray(i) if isinstance(i, (int, Expr)) and not isinstance(i, Expr) else i for i in items]
    # NumPy: integer scalars next to index arrays act as 0-d index arrays
    entries = []  # (kind, axis, payload) in index order
    axis = 0
    bad = None
    for i in items:
        if i is _NO_AXIS:
            entries.append(("gap", None, None))
        elif i is None:
            entries.append(("new", None, None))
        elif isinstance(i, slice):
            entries.append(("slice", axis, _slice_spec(i, x.shape[axis])))
            axis += 1
        elif isinstance(i, Expr):
            k = _int_index(i, x.shape[axis], axis)
            entries.append(("adv", axis, reshape_any(iota(as_expr(k), 1, ctx), ())))
            axis += 1
        else:
            n = x.shape[axis]
            if isinstance(i, np.ndarray):
                pos, oob = _concrete_positions(i, n, axis, ctx)
            else:
                pos, oob = _traced_positions(i, n, ctx)
            if oob is not None:
                bad = oob if bad is None else binary("Add", bad, oob, opname="advanced indexing")
            entries.append(("adv", axis, pos))
            axis += 1
    adv_at = [k for k, e in enumerate(entries) if e[0] == "adv"]
    adv_shape = broadcast_shapes(*(entries[k][2].shape for k in adv_at), op="advanced indexing")
    adjacent = adv_at == list(range(adv_at[0], adv_at[0] + len(adv_at)))
    # result layout: the broadcast index dims replace the first index array when the index
    # arrays are adjacent, else they go first (NumPy's rule)
    layout = []  # ("adv", None) or (kind, entry) for each piece of the result
    if not adjacent:
        layout.append(("adv", None))
    for k, e in enumerate(entries):
        if e[0] == "adv":
            if adjacent and k == adv_at[0]:
                layout.append(("adv", None))
        elif e[0] in ("slice", "new"):
            layout.append((e[0], e))
    res_shape, where_ = [], {}
    for kind, e in layout:
        if kind == "adv":
            where_["adv"] = len(res_shape)
            res_shape.extend(adv_shape)
        elif kind == "new":
            res_shape.append(1)
        else:
            where_[e[1]] = len(res_shape)
            res_shape.append(e[2][1])
    res_shape = tuple(res_shape)
    nd = len(res_shape)
    strides = contiguous_strides(x.shape)
    flat = None
    for kind, ax, payload in entries:
        if kind == "adv":
            a0 = where_["adv"]
            shp = (1,) * a0 + adv_shape + (1,) * (nd - a0 - len(adv_shape))
            pos = reshape_any(broadcast_to(payload, adv_shape), shp)
        elif kind == "slice":
            first, count, step = payload
            r = where_[ax]
            pos = reshape_any(iota(as_expr(first) + Z * step, count, ctx),
                              (1,) * r + (count,) + (1,) * (nd - r - 1))
        else:
            continue
        term = binary("Mul", pos, dim_value(strides[ax], ctx)) if not same(strides[ax], 1) else pos
        flat = term if flat is None else binary("Add", flat, term)
    if flat is None:  # only new axes and gaps: cannot happen with an advanced index present
        raise IndexError_("advanced indexing needs at least one index array")
    flat = broadcast_to(flat, res_shape)
    if bad is not None:
        shp = (1,) * where_["adv"] + adv_shape + (1,) * (nd - where_["adv"] - len(adv_shape))
        bad = broadcast_to(reshape_any(broadcast_to(bad, adv_shape), shp), res_shape)
    return flat, res_shape, bad


def _advanced(x: Tracer, items) -> Tracer:
    flat, res_shape, _ = _positions(x, items)
    return _new(x._ctx, "Gather", [flat, x], res_shape, x.dtype)


# ---- take and friends ---------------------------------------------------------------------------
def take(a, indices, axis=None, mode=None, fill_value=None):
    """NumPy's take. mode None/'raise' checks concrete indices (traced ones are clamped, as in
    JAX indexing), 'clip' clamps, 'wrap' wraps, 'fill' gives fill_value (NaN for floats) out of range."""
    ctx = _ctx_of(a, indices)
    a = lift(a, ctx)
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    axis = normalize_axis(axis, a.ndim, "take")
    if mode not in (None, "raise", "clip", "wrap", "fill"):
        raise IndexError_(f"take: mode {mode!r} is not one of 'raise', 'clip', 'wrap', 'fill'")
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if isinstance(idx, np.ndarray) and not np.issubdtype(idx.dtype, np.integer):
        if idx.size:
            raise IndexError_(f"take: indices must be integers, got {idx.dtype}")
        idx = idx.astype(np.int32)
    n = a.shape[axis]
    lead = (slice(None),) * axis
    if mode == "fill":
        from ._math import where

        t = lift(idx.astype(np.int32) if isinstance(idx, np.ndarray) else idx, ctx)
        t = cast(t, dt.int32)
        inside = binary("Add", _lt(t, dim_value(n, ctx)),
                        binary("Mul", _lt(t, dim_value(-as_expr(n), ctx)), -1))  # -n <= t < n
        out = getitem(a, lead + (t,))
        if fill_value is None:
            fill_value = (float("nan") if a.dtype.is_float else True if a.dtype.is_bool
                          else int(np.iinfo(np.int32).min))
        ok = reshape_any(cast(inside, dt.bool_), (1,) * axis + t.shape + (1,) * (a.ndim - axis - 1))
        return where(ok, out, cast(lift(fill_value, ctx), a.dtype))
    if isinstance(idx, np.ndarray) and isinstance(n, int) and mode in ("clip", "wrap"):
        if n == 0:
            raise IndexError_(f"take: cannot take from the empty axis {axis} with mode={mode!r}")
        idx = np.clip(idx, 0, n - 1) if mode == "clip" else np.mod(idx, n)
    elif mode == "wrap":
        from ._math import mod

        idx = mod(cast(lift(idx, ctx), dt.int32), dim_value(n, ctx))
    elif mode == "clip":
        t = cast(lift(idx, ctx), dt.int32)
        idx = binary("Mul", t, binary("Add", 1, binary("Mul", _lt(t, 0), -1)))  # negatives -> 0
    return getitem(a, lead + (idx,))


def _along_axis_index(arr: Tracer, indices, axis: int, fn: str):
    """The traced int32 index of take/put_along_axis and the broadcast output shape."""
    ctx = arr._ctx
    if isinstance(indices, Tracer):
        if not indices.dtype.is_int:
            raise IndexError_(f"{fn}: indices must be integers, got {indices.dtype}")
        idx, concrete = indices, None
    else:
        concrete = np.asarray(indices)
        if not np.issubdtype(concrete.dtype, np.integer):
            raise IndexError_(f"{fn}: indices must be integers, got {concrete.dtype}")
        idx = None
    nd = concrete.ndim if concrete is not None else idx.ndim
    if nd != arr.ndim:
        raise ShapeError(f"{fn}: indices has {nd} dims but arr has {arr.ndim} (they must match)")
    ishape = concrete.shape if concrete is not None else idx.shape
    other = broadcast_shapes(tuple(1 if i == axis else d for i, d in enumerate(arr.shape)),
                             tuple(1 if i == axis else d for i, d in enumerate(ishape)), op=fn)
    out_shape = tuple(ishape[i] if i == axis else d for i, d in enumerate(other))
    n = arr.shape[axis]
    if concrete is not None:
        pos, bad = _concrete_positions(concrete, n, axis, ctx)
    else:
        pos, bad = _traced_positions(idx, n, ctx)
    return pos, bad, out_shape


def _along_axis_flat(arr, pos, axis, out_shape):
    ctx = arr._ctx
    strides = contiguous_strides(arr.shape)
    flat = binary("Mul", broadcast_to(pos, out_shape), dim_value(strides[axis], ctx))
    for i, d in enumerate(out_shape):
        if i == axis or same(arr.shape[i], 1):
            continue
        shp = tuple(d if j == i else 1 for j in range(len(out_shape)))
        flat = binary("Add", flat, binary("Mul", reshape_any(iota(None, d, ctx), shp),
                                          dim_value(strides[i], ctx)))
    return broadcast_to(flat, out_shape)


def take_along_axis(arr, indices, axis):
    arr = lift(arr, _ctx_of(arr, indices))
    if axis is None:
        arr = reshape_any(arr, (arr.size,))
        if not isinstance(indices, Tracer):
            indices = np.asarray(indices).reshape(-1)
        else:
            indices = reshape_any(indices, (indices.size,))
        axis = 0
    axis = normalize_axis(axis, arr.ndim, "take_along_axis")
    pos, _, out_shape = _along_axis_index(arr, indices, axis, "take_along_axis")
    src = broadcast_to(arr, tuple(arr.shape[i] if i == axis else d for i, d in enumerate(out_shape)),
                       op="take_along_axis")
    flat = _along_axis_flat(src, pos, axis, out_shape)
    return _new(arr._ctx, "Gather", [flat, src], out_shape, arr.dtype)


def put_along_axis(arr, indices, values, axis, mode="set"):
    """NumPy's put_along_axis as a pure function (returns the updated array; JAX style).
    mode: 'set', 'add', 'mul', 'max' or 'min'. Repeated indices under 'set': the last write wins
    on the NumPy backend, any one of them on a GPU (as JAX's scatter)."""
    arr = lift(arr, _ctx_of(arr, indices, values))
    axis = normalize_axis(axis, arr.ndim, "put_along_axis")
    _check_mode(mode, "put_along_axis")
    pos, bad, out_shape = _along_axis_index(arr, indices, axis, "put_along_axis")
    if any(not same(a, b) and not same(b, 1) for i, (a, b) in enumerate(zip(out_shape, arr.shape))
           if i != axis):
        raise ShapeError(f"put_along_axis: indices of shape {out_shape} do not fit arr of shape {arr.shape}")
    out_shape = tuple(out_shape[i] if i == axis else d for i, d in enumerate(arr.shape))
    flat = _along_axis_flat(arr, pos, axis, out_shape)
    if bad is not None:
        flat = binary("Add", flat, binary("Mul", broadcast_to(bad, out_shape), dim_value(arr.size, arr._ctx)))
    vals = broadcast_to(cast(lift(values, arr._ctx), arr.dtype), out_shape, op="put_along_axis")
    return _new(arr._ctx, "Scatter", [arr, flat, vals], arr.shape, arr.dtype, mode=mode)


def compress(condition, a, axis=None):
    if isinstance(condition, Tracer):
        raise IndexError_("compress: a traced condition gives a data-dependent shape; pass a "
                          "concrete NumPy boolean array")
    cond = np.asarray(condition, bool)
    return take(a, np.nonzero(cond)[0].astype(np.int32), axis=axis)


def _check_mode(mode, fn):
    if mode not in ("set", "add", "mul", "max", "min"):
        raise IndexError_(f"{fn}: mode {mode!r} is not one of 'set', 'add', 'mul', 'max', 'min'")


# ---- .at[...] -------------------------------------------------------------------------------------
class _AtIndexer:
    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        return _AtRef(self._x, idx)


class _AtRef:
    """x.at[idx]: functional updates, as in JAX. Duplicate indices accumulate for add,
    multiply, max and min; for set the last one wins on the NumPy backend, any one of them on a
    GPU (as JAX's scatter)."""

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
        flat, res_shape, bad = _positions(x, items, for_scatter=True)
        if bad is not None:  # out of range on some axis: push past the end, where it is dropped
            flat = binary("Add", flat, binary("Mul", bad, dim_value(x.size, x._ctx)))
    else:
        flat, res_shape = _basic_positions(x, items)
    vals = broadcast_to(cast(lift(values, x._ctx), x.dtype), res_shape, op=f"at[...].{mode}")
    return _new(x._ctx, "Scatter", [x, flat, vals], x.shape, x.dtype, mode=mode)


def _basic_positions(x: Tracer, items):
    """Flat indices (shaped like x[items]) of a basic index, through a view of an iota."""
    it = reshape_any(iota(None, x.size, x._ctx), x.shape)
    sel = _basic(it, items)
    return sel, sel.shape

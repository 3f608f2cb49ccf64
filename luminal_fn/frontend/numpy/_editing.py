"""Editing arrays along an axis (append, insert, delete, resize): views, concatenations and
gathers at positions known when traced."""
from __future__ import annotations

import numpy as np

from ...ir.expr import Z, prod, same, to_int_or_expr
from ..errors import IndexError_, ShapeError
from ..tracer import Tracer, _ctx_of, broadcast_to, cast, iota, lift, normalize_axis, static_int
from ._creation import _shape_tuple, zeros
from ._index import take
from ._shape import _slice_axis, concatenate, expand_dims, moveaxis, ravel, reshape
from ._numeric import _concrete, _fits_off_axis, _joined_dtype, _window

__all__ = ["append", "insert", "delete", "resize"]


def append(arr, values, axis=None):
    """NumPy's append; a Python scalar in values is weak (it takes arr's dtype where it fits)."""
    ctx = _ctx_of(arr, values)
    a, v = lift(arr, ctx), lift(values, ctx)
    if axis is None:
        a, v, ax = ravel(a), ravel(v), 0
    else:
        if a.ndim == 0:
            raise ShapeError("append: arr is 0-d; pass axis=None to append to its flattened form")
        ax = normalize_axis(axis, a.ndim, "append")
        if not _fits_off_axis(a, v, ax):
            raise ShapeError(f"append: values of shape {v.shape} do not fit arr of shape {a.shape} "
                             f"along axis {ax} (the same number of dims, equal off that axis)")
    d = _joined_dtype([a, v])
    return concatenate([cast(a, d), cast(v, d)], axis=ax)


def _edit_axis(arr, axis, fn: str):
    """(arr, axis, length): flattened for axis=None, as NumPy's insert and delete do. The
    length must be static: where the elements go depends on it."""
    a = lift(arr, _ctx_of(arr))
    if axis is None:
        a, ax = ravel(a), 0
    else:
        if a.ndim == 0:
            raise ShapeError(f"{fn}: arr is 0-d; pass axis=None to edit its flattened form")
        ax = normalize_axis(axis, a.ndim, fn)
    return a, ax, static_int(a.shape[ax], f"{fn}: the length of the edited axis {ax}")


def _static_positions(obj, n: int, fn: str):
    """obj (an int, slice, sequence of ints or bool mask) as a NumPy int array (a 0-d one for
    an int) of the positions it names, not yet wrapped; a traced obj is refused."""
    if isinstance(obj, slice):
        return np.arange(*obj.indices(n))
    c = _concrete(obj)
    if c is None:
        raise IndexError_(f"{fn}: obj must be static (a Python int, slice or sequence of ints), not a "
                          "traced value or dynamic dim: the output shape depends on it. Pass it as a constant or a "
                          "static argument (static_argnums/static_argnames)")
    if c.dtype == np.bool_:
        if c.shape != (n,) and fn == "delete":
            raise ShapeError(f"delete: a boolean obj must be 1-D with the axis length {n}, got shape {c.shape}")
        if c.ndim != 1:
            raise ShapeError(f"{fn}: a boolean obj must be 1-D, got shape {c.shape}")
        return np.flatnonzero(c)
    if c.size == 0:
        return c.reshape(-1).astype(np.int64)
    if not np.issubdtype(c.dtype, np.integer):
        raise IndexError_(f"{fn}: obj must hold integers, got {c.dtype}")
    return c.astype(np.int64)


def _out_of_bounds(pos, low, high, axis, n, fn):
    bad = pos[(pos < low) | (pos > high)]
    if bad.size:
        raise IndexError_(f"{fn}: index {int(bad.flat[0])} is out of bounds for axis {axis} with size {n}")


def _assemble(parts, axis: int, src) -> Tracer:
    """Elements src (static positions into the parts laid end to end) along axis: strided views
    and joins of runs where that takes few pieces, else one gather."""
    if len(src) == 0:
        return _window(parts[0], axis, 0, 0)
    starts = np.cumsum([0] + [static_int(p.shape[axis], "the joined parts") for p in parts])
    owner = np.searchsorted(starts, src, side="right") - 1  # the part each element comes from
    if len(src) > 1 and (owner == owner[0]).all():
        step = int(src[1] - src[0])
        if step > 0 and (np.diff(src) == step).all():  # an evenly strided selection: one view
            first = int(src[0] - starts[owner[0]])
            return _slice_axis(parts[owner[0]], axis, first, first + step * (len(src) - 1) + 1, step)
    cuts = np.flatnonzero((np.diff(src) != 1) | (np.diff(owner) != 0)) + 1
    runs = np.split(np.arange(len(src)), cuts)
    if len(runs) <= 8:
        pieces = [_window(parts[owner[r[0]]], axis, int(src[r[0]] - starts[owner[r[0]]]), len(r)) for r in runs]
        return pieces[0] if len(pieces) == 1 else concatenate(pieces, axis=axis)
    joined = parts[0] if len(parts) == 1 else concatenate(parts, axis=axis)
    return take(joined, src.astype(np.int32), axis=axis)


def insert(arr, obj, values, axis=None):
    """NumPy's insert for a static obj (an int, slice, sequence of ints or bool mask); values
    take arr's dtype, as in NumPy."""
    a, ax, n = _edit_axis(arr, axis, "insert")
    pos = _static_positions(obj, n, "insert")
    _out_of_bounds(pos, -n, n, ax, n, "insert")
    pos = np.where(pos < 0, pos + n, pos)
    v = cast(lift(values, a._ctx), a.dtype)
    if pos.size == 1:  # one place: values' own length along the axis is inserted there
        if v.ndim < a.ndim:
            v = reshape(v, (1,) * (a.ndim - v.ndim) + v.shape)
        if pos.ndim == 0:  # an int obj inserts values[i] as the i-th slice along axis (NumPy)
            v = moveaxis(v, 0, ax)
        count = static_int(v.shape[ax], "insert: the number of inserted values")
        out_pos = int(pos.reshape(-1)[0]) + np.arange(count)
    else:  # value i lands after the arr elements and the values before it in sorted order
        out_pos = pos.reshape(-1).copy()
        out_pos[np.argsort(out_pos, kind="stable")] += np.arange(out_pos.size)
    count = len(out_pos)
    v = broadcast_to(v, a.shape[:ax] + (count,) + a.shape[ax + 1:], op="insert (values to the inserted part)")
    src = np.empty(n + count, np.int64)
    is_value = np.zeros(n + count, bool)
    is_value[out_pos] = True
    src[out_pos] = n + np.arange(count)
    src[~is_value] = np.arange(n)
    return _assemble([a, v], ax, src)


def delete(arr, obj, axis=None):
    """NumPy's delete for a static obj (an int, slice, sequence of ints or bool mask)."""
    a, ax, n = _edit_axis(arr, axis, "delete")
    pos = _static_positions(obj, n, "delete")
    if not isinstance(obj, slice):
        _out_of_bounds(pos, -n, n - 1, ax, n, "delete")
    keep = np.ones(n, bool)
    keep[np.where(pos < 0, pos + n, pos).reshape(-1)] = False
    return _assemble([a], ax, np.flatnonzero(keep))


def resize(a, new_shape):
    """NumPy's resize: a's flat data repeated to fill new_shape (zeros when either is empty).
    new_shape may hold dynamic dims; a's size must be static."""
    a = lift(a, _ctx_of(a))
    if isinstance(new_shape, Tracer) or (isinstance(new_shape, (tuple, list))
                                         and any(isinstance(d, Tracer) for d in new_shape)):
        raise ShapeError("resize: new_shape must be static ints or dynamic dims (x.shape[i]), not "
                         "traced values; make it a static argument (static_argnums/static_argnames)")
    shape = _shape_tuple(new_shape)
    if any(isinstance(d, int) and d < 0 for d in shape):
        raise ShapeError(f"resize: all elements of new_shape must be non-negative, got {shape}")
    flat = ravel(a)
    size, total = flat.shape[0], to_int_or_expr(prod(shape))
    if same(size, 0) or same(total, 0):
        return zeros(shape, a.dtype)
    size = static_int(size, "resize: the size of a")
    if isinstance(total, int):
        reps = -(-total // size)
        tiled = reshape(broadcast_to(expand_dims(flat, 0), (reps, size)), (reps * size,))
        return reshape(_window(tiled, 0, 0, total), shape)
    return reshape(take(flat, iota(Z % size, total, a._ctx)), shape)

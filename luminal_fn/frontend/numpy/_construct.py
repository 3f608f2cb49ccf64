"""Arrays assembled from other arrays, index grids or functions: block, dsplit, ix_, choose,
fromfunction, apply_over_axes, tril/triu_indices_from and geomspace. Shapes are static here
(they come from the pieces' shapes and Python arguments, never from values)."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ..errors import ArgumentError, IndexError_, ShapeError
from ..tracer import Tracer, _ctx_of, broadcast_shapes, broadcast_to, cast, lift, static_int
from . import _math as m
from ._creation import _ctx, indices, tril_indices, triu_indices
from ._index import take_along_axis
from ._numeric import _concrete, _joined_dtype
from ._shape import concatenate, expand_dims, reshape, split, squeeze, stack

__all__ = ["block", "dsplit", "ix_", "choose", "fromfunction", "apply_over_axes", "tril_indices_from",
           "triu_indices_from", "geomspace"]


def _block_depth(arrays, path="arrays") -> int:
    """The nesting depth of lists (NumPy's rule: every leaf at one depth, no empty list)."""
    if isinstance(arrays, tuple):
        raise ArgumentError(f"block: {path} is a tuple; nest lists (NumPy's block takes lists only)")
    if not isinstance(arrays, list):
        return 0
    if not arrays:
        raise ShapeError(f"block: {path} is an empty list")
    depths = {_block_depth(a, f"{path}[{k}]") for k, a in enumerate(arrays)}
    if len(depths) != 1:
        raise ShapeError(f"block: the lists in {path} are nested to different depths {sorted(depths)}")
    return depths.pop() + 1


def block(arrays):
    """NumPy's block: the innermost lists join along the last axis, the next along the one
    before, and so on; pieces get leading unit axes up to the result's rank."""
    depth = _block_depth(arrays)
    leaves = []

    def gather(x):
        if isinstance(x, list):
            for y in x:
                gather(y)
        else:
            leaves.append(x)

    gather(arrays)
    ctx = _ctx_of(*leaves)
    lifted = [lift(x, ctx) for x in leaves]
    ndim = max([depth] + [t.ndim for t in lifted])
    d = _joined_dtype(lifted)
    pieces = iter(lifted)

    def build(x, level):
        if level == depth:
            t = next(pieces)
            return cast(reshape(t, (1,) * (ndim - t.ndim) + tuple(t.shape)), d)
        return concatenate([build(y, level + 1) for y in x], axis=level - depth)

    return build(arrays, 0)  # (depth 0: a lone array, given leading unit axes only)


def dsplit(ary, indices_or_sections):
    """split along the third axis (arrays of at least 3 dims)."""
    a = lift(ary, _ctx_of(ary))
    if a.ndim < 3:
        raise ShapeError(f"dsplit: needs an array of at least 3 dims, got shape {a.shape}")
    return split(a, indices_or_sections, axis=2)


def ix_(*args):
    """Open index grids: the k-th 1-D sequence shaped to vary along axis k only. A boolean
    sequence must be concrete (its True positions fix the length)."""
    n = len(args)
    out = []
    for k, seq in enumerate(args):
        c = _concrete(seq)
        if c is not None and c.dtype == np.bool_:
            seq = np.flatnonzero(c).astype(np.int32)
        t = lift(seq, _ctx_of(seq) if isinstance(seq, Tracer) else _ctx())
        if t.ndim != 1:
            raise ShapeError(f"ix_: argument {k} must be 1-D, got shape {t.shape}")
        if t.dtype.is_bool:
            raise IndexError_(f"ix_: argument {k} is a traced boolean array; its True count would "
                              "fix the shape: pass it concrete, or its indices")
        out.append(reshape(t, (1,) * k + (t.shape[0],) + (1,) * (n - k - 1)))
    return tuple(out)


_CHOOSE_MODES = ("raise", "wrap", "clip")


def choose(a, choices, mode="raise"):
    """out = choices[a] elementwise, everything broadcast together. ``mode="raise"`` checks the
    indices, which needs them concrete (as in JAX); under jit pass ``mode="wrap"`` or
    ``"clip"``."""
    if mode not in _CHOOSE_MODES:
        raise ArgumentError(f"choose: mode must be one of {_CHOOSE_MODES}, got {mode!r}")
    if isinstance(choices, Tracer):  # an array of choices: its first axis lists them
        seq = [choices[k] for k in range(static_int(choices.shape[0], "choose: the number of choices"))]
    else:
        seq = list(choices)
    if not seq:
        raise ArgumentError("choose: choices is empty")
    ctx = _ctx_of(a, *seq)
    idx = lift(a, ctx)
    if not (idx.dtype.is_int or idx.dtype.is_bool):
        raise IndexError_(f"choose: a must hold integers, got {idx.dtype}")
    idx, n = cast(idx, dt.int32), len(seq)
    if mode == "raise":
        c = _concrete(a)
        if c is None:
            raise IndexError_("choose: mode='raise' checks the indices, and a is traced: pass "
                              "mode='wrap' or mode='clip' under jit")
        if c.size and (c.min() < 0 or c.max() >= n):
            raise IndexError_(f"choose: an index in a is outside [0, {n}) (values {c.min()} .. {c.max()})")
    elif mode == "wrap":
        idx = m.mod(idx, n)
    else:
        idx = m.clip(idx, 0, n - 1)
    vals = [lift(x, ctx) for x in seq]
    shape = broadcast_shapes(idx.shape, *(v.shape for v in vals), op="choose")
    d = _joined_dtype(vals)
    stacked = stack([broadcast_to(cast(v, d), shape) for v in vals])
    picked = take_along_axis(stacked, expand_dims(broadcast_to(idx, shape), 0), axis=0)
    return squeeze(picked, 0)


def fromfunction(function, shape, dtype=float, **kwargs):
    """``function(*indices)`` over index grids of ``shape`` (in ``dtype``: float32 by default);
    the function must work on whole arrays, as NumPy's must."""
    return function(*indices(shape, dtype=dtype), **kwargs)


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` for each axis in turn; a result one dim short gets that axis back."""
    a = lift(a, _ctx_of(a))
    for axis in ([axes] if isinstance(axes, int) else list(axes)):
        ax = axis + a.ndim if axis < 0 else axis
        res = lift(func(a, axis), a._ctx)
        if res.ndim == a.ndim - 1:
            res = expand_dims(res, ax)
        elif res.ndim != a.ndim:
            raise ShapeError(f"apply_over_axes: func(a, {axis}) gave {res.ndim} dims for an array of "
                             f"{a.ndim}; it must keep the dims or drop that one axis")
        a = res
    return a


def _square_sides(arr, fn: str):
    shape = arr.shape if hasattr(arr, "shape") else np.shape(arr)  # (only the shape is read)
    if len(shape) != 2:
        raise ShapeError(f"{fn}: arr must be 2-D, got shape {tuple(shape)}")
    return static_int(shape[0], f"{fn}: the rows of arr"), static_int(shape[1], f"{fn}: the columns of arr")


def tril_indices_from(arr, k=0):
    """tril_indices for arr's 2-D shape."""
    n, cols = _square_sides(arr, "tril_indices_from")
    return tril_indices(n, k, cols)


def triu_indices_from(arr, k=0):
    """triu_indices for arr's 2-D shape."""
    n, cols = _square_sides(arr, "triu_indices_from")
    return triu_indices(n, k, cols)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """NumPy's geomspace for Python-number (static) endpoints: computed by NumPy in float64 when
    traced, then stored in ``dtype`` (float32 by default)."""
    c0, c1 = _concrete(start), _concrete(stop)
    if c0 is None or c1 is None:
        raise ArgumentError("geomspace: start and stop must be static numbers (the values are "
                            "computed once, when traced)")
    with np.errstate(invalid="raise", divide="raise"):
        try:
            values = np.geomspace(c0.astype(np.float64), c1.astype(np.float64), int(num), endpoint, axis=axis)
        except (ValueError, FloatingPointError) as e:
            raise ArgumentError(f"geomspace: {e} (start {c0}, stop {c1})") from None
    if np.iscomplexobj(values):
        raise ArgumentError("geomspace: start and stop of different signs need complex values")
    return cast(lift(values.astype(np.float32), _ctx()), dt.canonicalize(dtype) if dtype is not None else dt.float32)

"""Shape functions: views where strides allow, contiguous copies where they do not."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir import expr as _expr
from ...ir.expr import Expr, as_expr, prod, same, to_int_or_expr
from ...ir.view import View
from ..errors import ShapeError, where as _where
from ..tracer import (Tracer, _ctx_of, binary, broadcast_shapes, broadcast_to as _broadcast_to,
                      cast, lift, materialize, normalize_axis, pad_axis, require_equal, reshape_any,
                      static_int, with_view)


def _axes(axis, ndim: int, fn: str) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        out = tuple(normalize_axis(a, ndim, fn) for a in axis)
        if len(set(out)) != len(out):
            raise ShapeError(f"{fn}: repeated axis in {axis}")
        return out
    return (normalize_axis(axis, ndim, fn),)


def shape(a) -> tuple:
    return lift(a, _ctx_of(a)).shape


def ndim(a) -> int:
    return lift(a, _ctx_of(a)).ndim


def size(a, axis=None):
    a = lift(a, _ctx_of(a))
    return a.size if axis is None else a.shape[normalize_axis(axis, a.ndim, "size")]


def reshape(a, newshape, order="C"):
    if order != "C":
        raise ShapeError(f"reshape: only order='C' is supported, got {order!r}")
    a = lift(a, _ctx_of(a))
    if isinstance(newshape, (int, Expr)):
        newshape = (newshape,)
    newshape = [to_int_or_expr(d) for d in newshape]
    asked = tuple(newshape)
    total = a.size
    if any(isinstance(d, int) and d < -1 for d in newshape):
        raise ShapeError(f"reshape: negative dims other than -1 in {asked}")
    unknown = [i for i, d in enumerate(newshape) if isinstance(d, int) and d == -1]
    if len(unknown) > 1:
        raise ShapeError(f"reshape: only one -1 is allowed in {asked}")
    known = None
    if unknown:
        known = prod(d for i, d in enumerate(newshape) if i != unknown[0])
        if same(known, 0):
            raise ShapeError(f"reshape: cannot infer -1 in {asked} for {a.shape}")
        newshape[unknown[0]] = to_int_or_expr(as_expr(total) // known)
    if same(prod(newshape), total):
        return reshape_any(a, newshape)
    if isinstance(total, int) and all(isinstance(d, int) for d in newshape):
        raise ShapeError(f"reshape: cannot reshape array of shape {a.shape} (size {total}) "
                         f"into shape {asked}")
    return _reshape_symbolic(a, newshape, asked, known)


def _reshape_symbolic(a: Tracer, newshape: list, asked: tuple, known) -> Tracer:
    """A reshape whose sizes agree only for some values of the dynamic dims, such as
    ``reshape(-1, k)`` of an axis of length ``s`` (the -1 becomes ``s // k``). The trace assumes
    the sizes agree and every call checks it before running, with an error that says what to
    do; the data is read contiguously, so the reshape is exact whenever the check passes."""
    total = a.size
    need = (f"its size {total} to be a multiple of {known}" if known is not None
            else f"its size {total} to equal {prod(newshape)}")
    loc = _where(a._ctx.fn_name).replace("{", "{{").replace("}", "}}")
    require_equal(
        a._ctx, prod(newshape), total,
        f"{{fn}}: reshape of shape {a.shape} into {asked} {loc} needs {need}, which this call "
        "({dims}) breaks; pad the axis to a size that fits (lnp.pad) or call with sizes that fit")
    src = a if a._view.is_contiguous else materialize(a)
    return Tracer(src._ctx, src._node, View.contiguous(newshape), src.dtype, src.weak)


def ravel(a, order="C"):
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    a = lift(a, _ctx_of(a))
    if axes is None:
        axes = tuple(reversed(range(a.ndim)))
    axes = tuple(normalize_axis(x, a.ndim, "transpose") for x in axes)
    if sorted(axes) != list(range(a.ndim)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of {a.ndim} dims")
    return with_view(a, a._view.permute(axes), None)


def permute_dims(a, axes=None):
    return transpose(a, axes)


def swapaxes(a, axis1, axis2):
    a = lift(a, _ctx_of(a))
    p = list(range(a.ndim))
    i, j = normalize_axis(axis1, a.ndim, "swapaxes"), normalize_axis(axis2, a.ndim, "swapaxes")
    p[i], p[j] = p[j], p[i]
    return transpose(a, p)


def moveaxis(a, source, destination):
    a = lift(a, _ctx_of(a))
    src = _axes(source, a.ndim, "moveaxis")
    dst = _axes(destination, a.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ShapeError("moveaxis: source and destination must have the same number of axes")
    order = [i for i in range(a.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def rollaxis(a, axis, start=0):
    a = lift(a, _ctx_of(a))
    axis = normalize_axis(axis, a.ndim, "rollaxis")
    if not -a.ndim <= start <= a.ndim:
        raise ShapeError(f"rollaxis: start {start} must be in [{-a.ndim}, {a.ndim}]")
    if start < 0:
        start += a.ndim
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def expand_dims(a, axis):
    a = lift(a, _ctx_of(a))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = a.ndim + len(axes)
    axes = sorted(normalize_axis(x, nd, "expand_dims") for x in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"expand_dims: repeated axis in {axis}")
    v = a._view
    for ax in axes:
        v = v.insert_axis(ax, 1)
    return with_view(a, v, None)


def squeeze(a, axis=None):
    a = lift(a, _ctx_of(a))
    if axis is None:
        axes = [i for i, d in enumerate(a.shape) if same(d, 1)]
    else:
        axes = list(_axes(axis, a.ndim, "squeeze"))
        for ax in axes:
            if not same(a.shape[ax], 1):
                raise ShapeError(f"squeeze: cannot select axis {ax} of size {a.shape[ax]} (not 1)")
    out = a
    for ax in sorted(axes, reverse=True):
        out = with_view(out, out._view.remove_axis(ax),
                        lambda m, ax=ax: with_view(m, m._view.remove_axis(ax), None))
    return out


def broadcast_to(a, shape):
    a = lift(a, _ctx_of(a))
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    return _broadcast_to(a, shape)


def broadcast_arrays(*args):
    ctx = _ctx_of(*args)
    ts = [lift(x, ctx) for x in args]
    s = broadcast_shapes(*(t.shape for t in ts))
    return [_broadcast_to(t, s) for t in ts]


def broadcast_shapes_(*shapes):
    return broadcast_shapes(*shapes)


def atleast_1d(*arys):
    out = [reshape(a, (1,)) if lift(a, _ctx_of(a)).ndim == 0 else lift(a, _ctx_of(a)) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    out = []
    for a in arys:
        a = lift(a, _ctx_of(a))
        out.append(reshape(a, (1, 1)) if a.ndim == 0 else expand_dims(a, 0) if a.ndim == 1 else a)
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    out = []
    for a in arys:
        a = lift(a, _ctx_of(a))
        if a.ndim == 0:
            a = reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = reshape(a, (1, a.shape[0], 1))
        elif a.ndim == 2:
            a = expand_dims(a, -1)
        out.append(a)
    return out[0] if len(out) == 1 else out


# ---- joining and splitting ----------------------------------------------------------------------
def concatenate(arrays, axis=0, dtype=None):
    arrays = list(arrays)
    if not arrays:
        raise ShapeError("concatenate: need at least one array")
    ctx = _ctx_of(*arrays)
    ts = [lift(x, ctx) for x in arrays]
    if axis is None:
        ts = [ravel(t) for t in ts]
        axis = 0
    nd = ts[0].ndim
    if nd == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, nd, "concatenate")
    d = dt.canonicalize(dtype) if dtype is not None else _join_dtype(ts)
    for t in ts[1:]:
        if t.ndim != nd or any(not same(a, b) for i, (a, b) in enumerate(zip(t.shape, ts[0].shape)) if i != axis):
            raise ShapeError(f"concatenate: shapes {[tuple(x.shape) for x in ts]} differ off axis {axis}")
    if len(ts) == 1:
        return cast(ts[0], d)
    compute = dt.int32 if d.is_bool else d
    total = to_int_or_expr(sum((as_expr(t.shape[axis]) for t in ts), as_expr(0)))
    out, start = None, as_expr(0)
    for t in ts:
        n = t.shape[axis]
        after = to_int_or_expr(as_expr(total) - start - n)
        piece = pad_axis(cast(t, compute), axis, to_int_or_expr(start), after)
        out = piece if out is None else binary("Add", out, piece)
        start = start + n
    return cast(out, d)


def _join_dtype(ts):
    d = ts[0].dtype
    for t in ts[1:]:
        d = dt.promote(d, t.dtype)
    return d


concat = concatenate


def stack(arrays, axis=0):
    arrays = list(arrays)
    if not arrays:
        raise ShapeError("stack: need at least one array")
    ctx = _ctx_of(*arrays)
    ts = [lift(x, ctx) for x in arrays]
    for t in ts[1:]:
        if t.ndim != ts[0].ndim or not all(same(a, b) for a, b in zip(t.shape, ts[0].shape)):
            raise ShapeError(f"stack: all input arrays must have the same shape, got {[tuple(t.shape) for t in ts]}")
    axis = normalize_axis(axis, ts[0].ndim + 1, "stack")
    return concatenate([expand_dims(t, axis) for t in ts], axis=axis)


def vstack(tup):
    return concatenate([atleast_2d(t) for t in tup], axis=0)


def hstack(tup):
    ts = [atleast_1d(t) for t in tup]
    return concatenate(ts, axis=0 if ts[0].ndim == 1 else 1)


def dstack(tup):
    return concatenate([atleast_3d(t) for t in tup], axis=2)


def column_stack(tup):
    ts = []
    for t in tup:
        t = lift(t, _ctx_of(t))
        ts.append(reshape(t, (t.shape[0], 1)) if t.ndim == 1 else t)
    return concatenate(ts, axis=1)


def split(ary, indices_or_sections, axis=0):
    a = lift(ary, _ctx_of(ary))
    axis = normalize_axis(axis, a.ndim, "split")
    n = static_int(a.shape[axis], "split: the split axis")
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0 or n % k:
            raise ShapeError(f"split: array split does not result in an equal division ({n} into {k})")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        bounds = [0] + [min(max(int(i) if i >= 0 else n + int(i), 0), n) for i in indices_or_sections] + [n]
    return [_slice_axis(a, axis, bounds[i], max(bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]


def array_split(ary, indices_or_sections, axis=0):
    a = lift(ary, _ctx_of(ary))
    axis = normalize_axis(axis, a.ndim, "array_split")
    n = static_int(a.shape[axis], "array_split: the split axis")
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0:
            raise ShapeError(f"array_split: the number of sections must be > 0, got {k}")
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        bounds = [0]
        for s in sizes:
            bounds.append(bounds[-1] + s)
        return [_slice_axis(a, axis, bounds[i], bounds[i + 1]) for i in range(k)]
    return split(a, indices_or_sections, axis)


def hsplit(ary, sections):
    a = lift(ary, _ctx_of(ary))
    return split(a, sections, axis=1 if a.ndim > 1 else 0)


def vsplit(ary, sections):
    return split(ary, sections, axis=0)


def _slice_axis(a: Tracer, axis: int, start, stop, step: int = 1) -> Tracer:
    v = a._view.slice(axis, start, stop, step)
    return with_view(a, v, lambda m: _slice_axis(m, axis, start, stop, step))


# ---- repetition, padding, flipping --------------------------------------------------------------
def repeat(a, repeats, axis=None):
    a = lift(a, _ctx_of(a))
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = normalize_axis(axis, a.ndim, "repeat")
    if isinstance(repeats, Tracer):
        raise ShapeError("repeat: traced repeat counts give a data-dependent shape; pass an int "
                         "or a concrete sequence of ints")
    if not isinstance(repeats, int):
        r = np.asarray(repeats)
        if r.ndim == 0 or r.size == 1:
            repeats = int(r.reshape(-1)[0])
        else:
            n = static_int(a.shape[axis], "repeat with per-element counts: the repeated axis")
            if r.ndim != 1 or r.size != n or (r < 0).any() or not np.issubdtype(r.dtype, np.integer):
                raise ShapeError(f"repeat: repeats must be one int or {n} non-negative ints for "
                                 f"axis {axis} of shape {a.shape}, got {repeats!r}")
            from ._index import take

            return take(a, np.repeat(np.arange(n), r).astype(np.int32), axis=axis)
    if repeats < 0:
        raise ShapeError(f"repeat: negative repeat count {repeats}")
    # (.., n, ..) -> (.., n, r, ..) broadcast -> merge
    e = expand_dims(a, axis + 1)
    b = broadcast_to(e, a.shape[:axis + 1] + (repeats,) + a.shape[axis + 1:])
    return reshape(b, a.shape[:axis] + (to_int_or_expr(as_expr(a.shape[axis]) * repeats),) + a.shape[axis + 1:])


def tile(a, reps):
    a = lift(a, _ctx_of(a))
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    nd = max(a.ndim, len(reps))
    a = reshape(a, (1,) * (nd - a.ndim) + a.shape)
    reps = (1,) * (nd - len(reps)) + reps
    # (d0, d1..) -> (r0, d0, r1, d1, ...) broadcast, then merge pairs
    inter = []
    for r, d in zip(reps, a.shape):
        inter += [1, d]
    e = reshape(a, inter)
    target = []
    for r, d in zip(reps, a.shape):
        target += [r, d]
    b = broadcast_to(e, target)
    return reshape(b, [to_int_or_expr(as_expr(d) * r) for r, d in zip(reps, a.shape)])


def pad(array, pad_width, mode="constant", constant_values=0):
    a = lift(array, _ctx_of(array))
    pw = _pad_widths(pad_width, a.ndim)
    for lo, hi in pw:
        if (isinstance(lo, int) and lo < 0) or (isinstance(hi, int) and hi < 0):
            raise ShapeError(f"pad: negative pad widths {pad_width} for shape {a.shape}")
    if mode == "constant":
        cvs = _pad_values(constant_values, a.ndim)
        compute = dt.int32 if a.dtype.is_bool else a.dtype
        out = cast(a, compute)
        for ax, ((lo, hi), (cb, ca)) in enumerate(zip(pw, cvs)):
            if same(lo, 0) and same(hi, 0):
                continue
            out = pad_axis(out, ax, lo, hi)
            if cb != 0 or ca != 0:
                out = binary("Add", out, _pad_border(out, ax, lo, hi, cb, ca, compute))
        return cast(out, a.dtype)
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        out = a
        for ax, (lo, hi) in enumerate(pw):
            if not (same(lo, 0) and same(hi, 0)):
                out = _pad_by_index(out, ax, lo, hi, mode)
        return out
    raise ShapeError(f"pad: mode {mode!r} is not supported (constant, edge, reflect, symmetric, wrap)")


def _pad_values(cv, nd):
    """constant_values as one (before, after) pair of Python scalars per axis."""

    if isinstance(cv, Tracer):
        raise ShapeError("pad: constant_values must be concrete scalars, not traced values")
    c = np.asarray(cv)
    if c.ndim == 0:
        return [(c.item(), c.item())] * nd
    if c.shape == (2,) or c.shape == (1, 2):
        return [tuple(c.reshape(2).tolist())] * nd
    if c.shape == (nd, 2):
        return [tuple(r) for r in c.tolist()]
    if c.shape == (nd, 1) or c.shape == (nd,):
        return [(r, r) for r in c.reshape(nd).tolist()]
    raise ShapeError(f"pad: constant_values of shape {c.shape} do not fit {nd} dims")


def _pad_border(out: Tracer, axis: int, lo, hi, cb, ca, d) -> Tracer:
    """cb on the first lo and ca on the last hi positions of the padded axis, 0 in between,
    shaped to broadcast against ``out``: adding it to the zero-padded array is exact."""
    ctx = out._ctx
    length = out.shape[axis]
    parts = []
    for v, n, before, after in ((cb, lo, 0, to_int_or_expr(as_expr(length) - lo)),
                                (ca, hi, to_int_or_expr(as_expr(length) - hi), 0)):
        if v == 0 or same(n, 0):
            continue
        c = _broadcast_to(cast(lift(v, ctx), d), (n,))
        parts.append(pad_axis(c, 0, before, after))
    border = parts[0] if len(parts) == 1 else binary("Add", parts[0], parts[1])
    return reshape_any(border, (1,) * axis + (length,) + (1,) * (out.ndim - axis - 1))


def _pad_widths(pad_width, nd):

    if isinstance(pad_width, np.ndarray):
        pad_width = pad_width.tolist()
    if isinstance(pad_width, (int, Expr)):
        return [(pad_width, pad_width)] * nd
    pw = list(pad_width)
    if len(pw) == 2 and all(isinstance(x, int) for x in pw):
        return [tuple(pw)] * nd
    if len(pw) == 1:
        p = pw[0]
        return [(p, p) if isinstance(p, int) else tuple(p)] * nd
    if len(pw) != nd:
        raise ShapeError(f"pad: pad_width {pad_width} does not match {nd} dims")
    return [(p, p) if isinstance(p, int) else tuple(p) for p in pw]


def _pad_by_index(a: Tracer, axis: int, lo, hi, mode: str) -> Tracer:
    """edge/reflect/symmetric/wrap padding as one gather along the axis. The source position
    of output position z is an expression in z, so symbolic axes work too."""
    from ...ir.expr import Z, maximum as emax, minimum as emin
    from ._index import take
    from ..tracer import iota

    n = a.shape[axis]
    if isinstance(n, int) and n == 0:
        raise ShapeError(f"pad(mode={mode!r}): cannot pad the empty axis {axis} of shape {a.shape}")
    out_n = to_int_or_expr(as_expr(n) + lo + hi)
    src = Z - lo
    if mode == "edge":
        e = emax(emin(src, as_expr(n) - 1), 0)
    else:
        period = {"wrap": as_expr(n), "reflect": emax(as_expr(n) * 2 - 2, 1),
                  "symmetric": as_expr(n) * 2}[mode]
        # a multiple of the period keeps the operand of % non-negative
        m = (src + period * (as_expr(lo) + 1)) % period
        e = m if mode == "wrap" else emin(m, period - m - (1 if mode == "symmetric" else 0))
    if isinstance(out_n, int) and not (e.free_symbols() - {"z"}):
        from ...ir.expr import compile_np

        idx = np.broadcast_to(compile_np(e)({"z": np.arange(out_n)}), (out_n,))
        return take(a, idx.astype(np.int32), axis=axis)  # concrete: checked, no clamping ops
    return take(a, iota(e, out_n, a._ctx), axis=axis)


def flip(m, axis=None):
    a = lift(m, _ctx_of(m))
    v = a._view
    for ax in _axes(axis, a.ndim, "flip"):
        v = v.flip(ax)
    return with_view(a, v, None)


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def roll(a, shift, axis=None):
    a = lift(a, _ctx_of(a))
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = a
    for s, ax in zip(shifts, axes):
        ax = normalize_axis(ax, a.ndim, "roll")
        if not isinstance(s, (int, np.integer)):  # (a Tracer too)
            raise ShapeError(f"roll: shift must be a Python int, got {type(s).__name__} (a traced "
                             f"shift would move data by a runtime amount; gather with "
                             f"(arange(n) - shift) % n instead)")
        n = a.shape[ax]
        if isinstance(n, Expr):  # a dynamic axis: the split point is a dims expression
            s = _expr.mod(int(s), _expr.maximum(n, 1))  # (an empty axis rolls to itself)
        elif n == 0:
            continue
        else:
            s = int(s) % n
            if not s:
                continue
        out = concatenate([_slice_axis(out, ax, n - s, n), _slice_axis(out, ax, 0, n - s)], axis=ax)
    return out


def rot90(m, k=1, axes=(0, 1)):
    m = lift(m, _ctx_of(m))
    k %= 4
    a0, a1 = axes
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


def unfold(a, axis, size, step=1, dilation=1):
    """Sliding windows along ``axis``: (..., n, ...) -> (..., windows, size, ...) as a view."""
    a = lift(a, _ctx_of(a))
    axis = normalize_axis(axis, a.ndim, "unfold")
    v = a._view.unfold(axis, size, step, dilation)
    return with_view(a, v, lambda m: with_view(m, m._view.unfold(axis, size, step, dilation), None))


def tril(m, k=0):
    return _tri_mask(m, k, lower=True)


def triu(m, k=0):
    return _tri_mask(m, k, lower=False)


def _tri_mask(m, k, lower):
    from ._creation import tri
    from ._math import where

    m = lift(m, _ctx_of(m))
    if m.ndim < 2:
        raise ShapeError(f"{'tril' if lower else 'triu'}: needs at least 2 dims, got {m.shape}")
    r, c = m.shape[-2], m.shape[-1]
    keep = tri(r, c, k=k, dtype=dt.bool_) if lower else tri(r, c, k=k - 1, dtype=dt.bool_)
    if not lower:
        from ._math import logical_not

        keep = logical_not(keep)
    zero = cast(lift(0, m._ctx), m.dtype) if not m.dtype.is_bool else False
    return where(keep, m, zero)


def copy(a):
    return lift(a, _ctx_of(a))


def astype(x, dtype, copy=True):
    return cast(lift(x, _ctx_of(x)), dtype)


def result_type(*arrays_and_dtypes):
    ds = []
    for x in arrays_and_dtypes:
        if isinstance(x, Tracer):
            ds.append(x.dtype)
        else:
            try:
                ds.append(dt.canonicalize(x))
            except TypeError:
                ds.append(dt.scalar_dtype(x))
    out = ds[0]
    for d in ds[1:]:
        out = dt.promote(out, d)
    return out


"""Array creation inside a trace: broadcast constants and iotas (no data is materialised)."""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, Z, as_expr, to_int_or_expr
from ..errors import ShapeError, TracingError, where as _where
from ..tracer import (Tracer, _ctx_of, binary, broadcast_to, cast, iota, lift,
                      require_context, reshape_any)


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, Tracer):
        raise TracingError(
            f"array creation: the shape {shape!r} is a traced value {_where(shape._ctx.fn_name)}; "
            "shapes must be static ints or dynamic dims (x.shape[i]): allocate a static maximum "
            "and mask it with lnp.where, or make the size a static argument")
    if isinstance(shape, (int, np.integer, Expr)):
        return (to_int_or_expr(shape),)
    return tuple(to_int_or_expr(d) for d in shape)


def _ctx():
    return require_context("array creation")


def full(shape, fill_value, dtype=None):
    shape = _shape_tuple(shape)
    for d in shape:
        if isinstance(d, int) and d < 0:
            raise ShapeError(f"full: negative dimensions are not allowed in {shape}")
    if isinstance(fill_value, Tracer):
        v = fill_value if dtype is None else cast(fill_value, dtype)
    else:
        d = dt.canonicalize(dtype) if dtype is not None else dt.scalar_dtype(fill_value) if np.ndim(fill_value) == 0 else None
        v = lift(fill_value, _ctx(), d)
        v.weak = False
    return broadcast_to(v, shape)


def zeros(shape, dtype=None):
    return full(shape, 0, dtype if dtype is not None else dt.float32)


def ones(shape, dtype=None):
    return full(shape, 1, dtype if dtype is not None else dt.float32)


def empty(shape, dtype=None):
    return zeros(shape, dtype)


def _like(a, dtype, shape):
    a = lift(a, _ctx_of(a))
    return (a.shape if shape is None else _shape_tuple(shape)), (a.dtype if dtype is None else dt.canonicalize(dtype))


def zeros_like(a, dtype=None, shape=None):
    s, d = _like(a, dtype, shape)
    return full(s, 0, d)


def ones_like(a, dtype=None, shape=None):
    s, d = _like(a, dtype, shape)
    return full(s, 1, d)


def empty_like(a, dtype=None, shape=None):
    return zeros_like(a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    s, d = _like(a, dtype, shape)
    return full(s, fill_value, d)


def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    ints = all(isinstance(v, (int, np.integer, Expr)) for v in (start, stop, step))
    d = dt.canonicalize(dtype) if dtype is not None else (dt.int32 if ints else dt.float32)
    if ints:
        if step == 0:
            raise ShapeError("arange: step must not be zero")
        n = to_int_or_expr(as_expr(-(-(as_expr(stop) - start) // step)) if step > 0
                           else as_expr((as_expr(start) - stop + (-step) - 1) // (-step)))
        if isinstance(n, int):
            n = max(n, 0)
        out = iota(as_expr(start) + Z * step, n, _ctx())
        return cast(out, d)
    n = max(int(math.ceil((stop - start) / step)), 0)
    base = cast(iota(None, n, _ctx()), dt.float32)
    return cast(binary("Add", binary("Mul", base, float(step)), float(start)), d)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    d = dt.canonicalize(dtype) if dtype is not None else dt.float32
    num = int(num)
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    base = cast(iota(None, num, _ctx()), dt.float32)
    out = binary("Add", binary("Mul", base, float(step)), float(start))
    if endpoint and num > 1:
        # the last point is exactly stop, as in NumPy
        from ._math import where

        last = binary("LessThan", num - 2, iota(None, num, _ctx()), out_dtype=dt.bool_)
        out = where(last, float(stop), out)
    out = cast(out, d)
    return (out, step) if retstep else out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None):
    from ._math import power

    return power(base, linspace(start, stop, num, endpoint, dtype=dt.float32))


def eye(N, M=None, k=0, dtype=None):
    M = N if M is None else M
    d = dt.canonicalize(dtype) if dtype is not None else dt.float32
    r = reshape_any(iota(None, N, _ctx()), (N, 1))
    c = reshape_any(iota(None, M, _ctx()), (1, M))
    from ._math import equal

    return cast(equal(binary("Add", r, k), c), d)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    M = N if M is None else M
    d = dt.canonicalize(dtype) if dtype is not None else dt.float32
    r = reshape_any(iota(None, N, _ctx()), (N, 1))
    c = reshape_any(iota(None, M, _ctx()), (1, M))
    from ._math import less_equal

    return cast(less_equal(c, binary("Add", r, k)), d)


def array(obj, dtype=None, copy=True):
    if isinstance(obj, Tracer):
        return obj if dtype is None else cast(obj, dtype)
    if isinstance(obj, (list, tuple)) and any(isinstance(o, Tracer) for o in _flat(obj)):
        from ._shape import stack

        return stack([array(o, dtype) for o in obj])
    arr = np.asarray(obj)
    if dtype is not None:
        arr = arr.astype(dt.to_numpy(dt.canonicalize(dtype)))
    return lift(arr, _ctx())


def _flat(obj):
    for o in obj:
        if isinstance(o, (list, tuple)):
            yield from _flat(o)
        else:
            yield o


asarray = array


def meshgrid(*xi, indexing="xy"):
    ctx = _ctx_of(*xi)
    xs = [reshape_any(lift(x, ctx), (lift(x, ctx).size,)) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        s = [1] * n
        s[pos] = x.shape[0]
        out.append(broadcast_to(reshape_any(x, s), shape))
    return out


def indices(dimensions, dtype=None):
    d = dt.canonicalize(dtype) if dtype is not None else dt.int32
    from ._shape import stack

    n = len(dimensions)
    grids = []
    for i, size in enumerate(dimensions):
        s = [1] * n
        s[i] = size
        grids.append(broadcast_to(reshape_any(iota(None, size, _ctx()), s), tuple(dimensions)))
    return cast(stack(grids), d)


def tril_indices(n, k=0, m=None):
    """Static (NumPy) index arrays: their shape depends only on n, k and m."""
    return tuple(lift(a.astype(np.int32), _ctx()) for a in np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    return tuple(lift(a.astype(np.int32), _ctx()) for a in np.triu_indices(n, k, m))


def diag(v, k=0):
    v = lift(v, _ctx_of(v))
    if v.ndim == 2:
        from ._linalg import diagonal

        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError("diag: input must be 1-D or 2-D")
    n = v.shape[0]
    size = to_int_or_expr(as_expr(n) + abs(k))
    from ._math import where

    e = eye(size, k=k, dtype=dt.bool_)
    col = reshape_any(v, (1, n)) if k >= 0 else reshape_any(v, (n, 1))
    from ._shape import pad

    full_v = pad(col, ((0, 0), (k, 0)) if k >= 0 else ((-k, 0), (0, 0)))
    full_v = broadcast_to(full_v, (size, size))
    return where(e, full_v, cast(lift(0, v._ctx), v.dtype))


def diagflat(v, k=0):
    v = lift(v, _ctx_of(v))
    return diag(reshape_any(v, (v.size,)), k)


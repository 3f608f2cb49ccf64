"""Reductions (one HLIR reduce per axis) and the statistics built on them."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import as_expr, prod, same, to_int_or_expr
from ..errors import ShapeError
from ..tracer import (Tracer, _ctx_of, binary, cast, iota, lift, name_kernel, normalize_axis, reduce,
                      reshape_any, static_int)
from . import _math as m
from ._shape import _axes, _slice_axis, broadcast_to, expand_dims, moveaxis, pad_axis


def _prep(a, axis, fn):
    a = lift(a, _ctx_of(a))
    return a, _axes(axis, a.ndim, fn)


def _finish(out: Tracer, axes, keepdims: bool, ndim: int):
    if keepdims:
        for ax in sorted(axes):
            out = expand_dims(out, ax)
    return out


def _reduce_axes(op: str, a: Tracer, axes) -> Tracer:
    for ax in sorted(axes, reverse=True):
        a = reduce(op, a, ax)
    return a


def _sum_dtype(d: dt.DType) -> dt.DType:
    return dt.int32 if d.is_bool else d


@m.computed_in_float32  # the float32 accumulation is explicit in the graph, whatever the backend
def sum(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):  # noqa: A001
    a, axes = _prep(a, axis, "sum")
    d = dt.canonicalize(dtype) if dtype is not None else _sum_dtype(a.dtype)
    x = cast(a, d)
    if where is not None:
        x = m.where(where, x, 0)
    out = _reduce_axes("SumReduce", x, axes) if axes else x
    if initial is not None:
        out = m.add(out, initial)
    return _finish(out, axes, keepdims, a.ndim)


@m.computed_in_float32
def prod_(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    """Product via logs would lose sign and exactness: multiply halves pairwise instead."""
    a, axes = _prep(a, axis, "prod")
    d = dt.canonicalize(dtype) if dtype is not None else _sum_dtype(a.dtype)
    x = cast(a, d)
    if where is not None:
        x = m.where(where, x, 1)
    for ax in sorted(axes, reverse=True):
        x = _prod_axis(x, ax)
    if initial is not None:
        x = m.multiply(x, initial)
    return _finish(x, axes, keepdims, a.ndim)


def _prod_axis(x: Tracer, ax: int) -> Tracer:
    n = x.shape[ax]
    if not isinstance(to_int_or_expr(n), int):
        # a dynamic length: the last lane of the product scan of [1, x...] (never empty; the
        # lane whose next one is past the end, read through padding). Its reduction reads the
        # data: one over lanes alone has no input a fused kernel could take its shape from
        padded = pad_axis(x, ax, 1, 0)
        one_first = cast(m.where(m.equal(_positions(padded, ax), 0), 1, padded), x.dtype)
        lanes = m.greater_equal(_positions(one_first, ax), 0)  # True in every lane
        is_last = m.logical_not(_slice_axis(pad_axis(lanes, ax, 0, 1), ax, 1, n + 2))
        scan = _named_scan(one_first, ax, "prod", lambda x, ax: _scan(x, ax, m.multiply, 1))
        return sum(m.where(is_last, scan, 0), axis=ax)
    n = static_int(n, "prod: the reduced axis")
    if n == 0:
        from ._creation import ones

        return ones(x.shape[:ax] + x.shape[ax + 1:], x.dtype)
    while n > 1:
        half = n // 2
        lo = _slice_axis(x, ax, 0, half)
        hi = _slice_axis(x, ax, half, 2 * half)
        y = m.multiply(lo, hi)
        if n % 2:
            y = _concat2(y, _slice_axis(x, ax, n - 1, n), ax)
        x, n = y, half + n % 2
    return reshape_any(x, x.shape[:ax] + x.shape[ax + 1:])


def _concat2(a, b, ax):
    from ._shape import concatenate

    return concatenate([a, b], axis=ax)


def max(a, axis=None, keepdims=False, initial=None, where=None):  # noqa: A001
    a, axes = _prep(a, axis, "max")
    for ax in axes:
        if same(a.shape[ax], 0) and initial is None:
            raise ShapeError("max: zero-size array to reduction operation maximum which has no identity")
    x = a
    if a.dtype.is_bool:
        x = cast(a, dt.int32)
    if where is not None:
        x = m.where(where, x, _lowest(x.dtype))
    out = _reduce_axes("MaxReduce", x, axes) if axes else x
    if initial is not None:
        out = m.maximum(out, initial)
    if a.dtype.is_bool:
        out = cast(out, dt.bool_)
    return _finish(out, axes, keepdims, a.ndim)


amax = max


def min(a, axis=None, keepdims=False, initial=None, where=None):  # noqa: A001
    a = lift(a, _ctx_of(a))
    if a.dtype.is_bool:
        return m.logical_not(max(m.logical_not(a), axis, keepdims, None if initial is None else not initial, where))
    if a.dtype.is_int:  # ~x = -1 - x reverses the order of every int32; -x wraps at INT_MIN
        flip = lambda t: m.subtract(-1, t)  # noqa: E731
        return flip(max(flip(a), axis, keepdims, None if initial is None else -1 - initial, where))
    neg = m.negative(a)
    out = max(neg, axis, keepdims, None if initial is None else -initial, where)
    return m.negative(out)


amin = min


def _lowest(d: dt.DType):
    if d.is_float:
        return float("-inf")
    return int(np.iinfo(np.int32).min)


def _highest(d: dt.DType):
    return float("inf") if d.is_float else int(np.iinfo(np.int32).max)


def ptp(a, axis=None, keepdims=False):
    return m.subtract(max(a, axis, keepdims), min(a, axis, keepdims))


@m.computed_in_float32
def mean(a, axis=None, dtype=None, keepdims=False, where=None):
    a, axes = _prep(a, axis, "mean")
    d = dt.canonicalize(dtype) if dtype is not None else (a.dtype if a.dtype.is_float else dt.float32)
    x = cast(a, d)
    if where is not None:
        w = broadcast_to(lift(where, a._ctx), a.shape)
        s = sum(x, axis=axis, keepdims=keepdims, where=w)
        cnt = sum(cast(w, d), axis=axis, keepdims=keepdims)
        return m.true_divide(s, cnt)
    n = prod(a.shape[ax] for ax in axes)
    s = sum(x, axis=axis, keepdims=keepdims)
    return m.true_divide(s, _count(n, s, d))


def _count(n, like: Tracer, d: dt.DType):
    """An element count as a value: a float for static counts, else a one-element iota that
    evaluates the symbolic count at run time."""
    if isinstance(n, int):
        return float(n)
    return cast(reshape_any(iota(as_expr(n), 1, like._ctx), ()), d)


@m.computed_in_float32
def var(a, axis=None, dtype=None, ddof=0, keepdims=False, where=None):
    a, axes = _prep(a, axis, "var")
    d = dt.canonicalize(dtype) if dtype is not None else (a.dtype if a.dtype.is_float else dt.float32)
    x = cast(a, d)
    if where is not None:
        w = broadcast_to(lift(where, a._ctx), a.shape)
        count = sum(cast(w, d), axis=axis, keepdims=True)  # counted once, for the mean too
        dev = m.subtract(x, m.true_divide(sum(x, axis=axis, keepdims=True, where=w), count))
        s = sum(m.multiply(dev, dev), axis=axis, keepdims=True, where=w)
        out = m.true_divide(s, m.maximum(m.subtract(count, ddof), 0))
        return out if keepdims else reshape_any(out, tuple(n for i, n in enumerate(a.shape) if i not in axes))
    mu = mean(x, axis=axis, keepdims=True)
    dev = m.subtract(x, mu)
    sq = m.multiply(dev, dev)
    n = prod(a.shape[ax] for ax in axes)
    s = sum(sq, axis=axis, keepdims=keepdims)
    denom = to_int_or_expr(as_expr(n) - ddof)
    if isinstance(denom, int):  # NumPy divides by max(n - ddof, 0): inf or nan, never negative
        return m.true_divide(s, float(denom if denom > 0 else 0))
    return m.true_divide(s, m.maximum(_count(denom, s, d), 0))


@m.computed_in_float32
def std(a, axis=None, dtype=None, ddof=0, keepdims=False, where=None):
    return m.sqrt(var(a, axis, dtype, ddof, keepdims, where))


@m.computed_in_float32
def average(a, axis=None, weights=None, keepdims=False):
    if weights is None:
        return mean(a, axis=axis, keepdims=keepdims)
    a = lift(a, _ctx_of(a, weights))
    w = lift(weights, a._ctx)
    if w.ndim == 1 and a.ndim > 1 and axis is not None:
        ax = normalize_axis(axis, a.ndim, "average")
        w = reshape_any(w, tuple(w.shape[0] if i == ax else 1 for i in range(a.ndim)))
    num = sum(m.multiply(a, w), axis=axis, keepdims=keepdims)
    den = sum(broadcast_to(cast(w, num.dtype if num.dtype.is_float else dt.float32), a.shape), axis=axis, keepdims=keepdims)
    return m.true_divide(num, den)


def any(a, axis=None, keepdims=False):  # noqa: A001
    a = lift(a, _ctx_of(a))
    return max(m._as_bool(a), axis=axis, keepdims=keepdims, initial=False)  # empty: False


def all(a, axis=None, keepdims=False):  # noqa: A001
    a = lift(a, _ctx_of(a))
    return min(m._as_bool(a), axis=axis, keepdims=keepdims, initial=True)  # empty: True


def count_nonzero(a, axis=None, keepdims=False):
    a = lift(a, _ctx_of(a))
    return sum(cast(m._as_bool(a), dt.int32), axis=axis, keepdims=keepdims)


def argmax(a, axis=None, keepdims=False):
    a = lift(a, _ctx_of(a))
    if axis is None:
        out = argmax(reshape_any(a, (a.size,)), 0)
        return reshape_any(out, (1,) * a.ndim) if keepdims else out
    ax = normalize_axis(axis, a.ndim, "argmax")
    n = a.shape[ax]
    if same(n, 0):
        raise ShapeError("argmax: attempt to get argmax of an empty sequence")
    mx = max(a, axis=ax, keepdims=True)
    hit = m.equal(a, mx)
    if a.dtype.is_float:
        hit = m.logical_or(hit, m.isnan(a))  # the first NaN wins, as in NumPy
    # the first hit: min over pos + n * (not hit), in [0, 2n) (a select would gather from a
    # side-by-side copy of pos and n: more kernels for the same answer)
    pos = _positions(a, ax)
    big = reshape_any(iota(as_expr(n), 1, a._ctx), (1,) * a.ndim)
    cand = binary("Add", pos, binary("Mul", cast(m.logical_not(hit), dt.int32), big))
    # min as -max(-cand): exact for cand >= 0, and the form the argmax rules recognise
    # (optimize/rules/specialize_argmax.egg); min() itself flips integers with ~ instead
    return m.negative(max(m.negative(cand), axis=ax, keepdims=keepdims))


def argmin(a, axis=None, keepdims=False):
    a = lift(a, _ctx_of(a))
    if a.dtype.is_bool:
        return argmax(m.logical_not(a), axis, keepdims)
    if a.dtype.is_float:
        # NaN must still win: map x -> -x keeps NaN as NaN
        return argmax(m.negative(a), axis, keepdims)
    return argmax(m.subtract(-1, a), axis, keepdims)


def _positions(a: Tracer, ax: int) -> Tracer:
    """int32 index along ``ax`` broadcast to a's shape."""
    n = a.shape[ax]
    it = iota(None, n, a._ctx)
    shape = tuple(n if i == ax else 1 for i in range(a.ndim))
    return broadcast_to(reshape_any(it, shape), a.shape)


@m.computed_in_float32
def cumsum(a, axis=None, dtype=None):
    a = lift(a, _ctx_of(a))
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    ax = normalize_axis(axis, a.ndim, "cumsum")
    d = dt.canonicalize(dtype) if dtype is not None else _sum_dtype(a.dtype)
    return _named_scan(cast(a, d), ax, "sum", _cumsum_along)


def _cumsum_along(x: Tracer, ax: int) -> Tracer:
    n = x.shape[ax]
    if isinstance(n, int):
        # Hillis-Steele scan: log2(n) shifted adds, each shift a padded view
        k = 1
        while k < n:
            shifted = pad_axis(_slice_axis(x, ax, 0, n - k), ax, k, 0)
            x = m.add(x, shifted)
            k *= 2
        return x
    # symbolic length: a masked sum over a triangle (n^2 work, exact)
    keep, xj = _triangle(x, ax)
    return sum(m.where(keep, xj, 0), axis=ax + 1)


SCAN_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}  # scan_rows's OP (ir/composites.py)
# Along a static axis up to this long the search times the doubling steps against the kernel
# (NumPy kept the steps for 512 x 1024). Past it the kernel won every row measured (128256 and
# 4096 long: NumPy, H100, H200; docs/benchmarks.md), and the 11+ steps' extraction made a
# 128256-long cumsum's search take minutes: there the kernel is the only option.
SCAN_STEPS_SEARCHED_UP_TO = 1024


def _named_scan(x: Tracer, ax: int, op: str, along) -> Tracer:
    """``along(x, axis)``, the scan in primitives, run along the last axis of x with ``ax`` moved
    there, and named the scan_rows kernel of that (float32 and int32: the kernels' types). Along
    a dynamic axis the primitives are n^2 work or 31 steps, along a static one past
    SCAN_STEPS_SEARCHED_UP_TO 11 or more steps: there a backend with the kernel runs nothing
    else; along a shorter static one the search times both."""
    xl = moveaxis(x, ax, -1)
    r = along(xl, xl.ndim - 1)
    if x.dtype in (dt.float32, dt.int32):
        n = to_int_or_expr(xl.shape[-1])
        r = name_kernel(r, "scan_rows", [xl], (prod(xl.shape[:-1]), xl.shape[-1], SCAN_OPS[op]),
                        only=not isinstance(n, int) or n > SCAN_STEPS_SEARCHED_UP_TO)
    return moveaxis(r, -1, ax)


def _triangle(x: Tracer, ax: int):
    """(keep, xj) of shape (.., n, n, ..) with the pair (i, j) at axes (ax, ax + 1): keep is
    j <= i, xj is x[j]. A scan along a dynamic axis reduces where(keep, xj, identity) over j."""
    n = x.shape[ax]
    xe = expand_dims(x, ax)  # (.., 1, n, ..): j axis at ax+1
    full_shape = x.shape[:ax] + (n, n) + x.shape[ax + 1:]
    keep = m.less_equal(broadcast_to(_positions(xe, ax + 1), full_shape),
                        broadcast_to(_positions(expand_dims(x, ax + 1), ax), full_shape))
    return keep, broadcast_to(xe, full_shape)


@m.computed_in_float32
def cumprod(a, axis=None, dtype=None):
    a = lift(a, _ctx_of(a))
    if axis is None:
        a = reshape_any(a, (a.size,))
        axis = 0
    ax = normalize_axis(axis, a.ndim, "cumprod")
    d = dt.canonicalize(dtype) if dtype is not None else _sum_dtype(a.dtype)
    return _named_scan(cast(a, d), ax, "prod", lambda x, ax: _scan(x, ax, m.multiply, 1))


def cummax(a, axis=0):
    """jax.lax.cummax: NumPy's maximum.accumulate (NaN from the first NaN on)."""
    return _cumulative_extreme(a, axis, "max")


def cummin(a, axis=0):
    """jax.lax.cummin: NumPy's minimum.accumulate (NaN from the first NaN on)."""
    return _cumulative_extreme(a, axis, "min")


def _cumulative_extreme(a, axis, op: str):
    a = lift(a, _ctx_of(a))
    ax = normalize_axis(axis, a.ndim, "cum" + op)
    combine, reduce_ = (m.maximum, max) if op == "max" else (m.minimum, min)
    if a.dtype.is_bool:
        fill = op == "min"
    else:
        fill = (_lowest if op == "max" else _highest)(a.dtype)

    def along(x, ax):
        if isinstance(to_int_or_expr(x.shape[ax]), int):
            return _scan(x, ax, combine, fill)
        # a dynamic length: a masked max / min over a triangle (n^2 work, one kernel), as cumsum does
        keep, xj = _triangle(x, ax)
        return cast(reduce_(m.where(keep, xj, fill), axis=ax + 1), x.dtype)

    return _named_scan(a, ax, op, along)


def _scan(x: Tracer, ax: int, combine, fill) -> Tracer:
    """The inclusive scan of ``combine`` along ``ax`` (Hillis-Steele: step k combines each lane
    with the lane k before it, ``fill`` where there is none). A static length takes
    ceil(log2 n) steps; a dynamic one all 31 an int32 length can need (a step past the length
    combines with ``fill`` only; about 100 kernels on CUDA). The shifted operand is selected,
    never built arithmetically: (v - 1) + 1 is not v in float (1e-8 came back 0)."""
    n = to_int_or_expr(x.shape[ax])
    steps = (n - 1).bit_length() if isinstance(n, int) and n > 0 else (0 if isinstance(n, int) else 31)
    pos = _positions(x, ax)
    for j in range(steps):
        k = 1 << j
        before = _slice_axis(pad_axis(x, ax, k, 0), ax, 0, n)  # x[i - k], 0 in the first k lanes
        x = combine(x, m.where(m.greater_equal(pos, k), before, fill))
    return x


@m.computed_in_float32
def logsumexp(a, axis=None, keepdims=False, b=None):
    a = lift(a, _ctx_of(a))
    if not a.dtype.is_float:
        a = cast(a, dt.float32)
    mx = max(a, axis=axis, keepdims=True)
    safe = m.where(m.isfinite(mx), mx, 0.0)
    e = m.exp(m.subtract(a, safe))
    if b is not None:
        e = m.multiply(e, b)
    s = sum(e, axis=axis, keepdims=True)
    out = m.add(m.log(s), safe)
    if not keepdims:
        axes = _axes(axis, a.ndim, "logsumexp")
        for ax in sorted(axes, reverse=True):
            out = reshape_any(out, out.shape[:ax] + out.shape[ax + 1:])
    return out


def nansum(a, axis=None, keepdims=False):
    a = lift(a, _ctx_of(a))
    return sum(m.where(m.isnan(a), 0, a) if a.dtype.is_float else a, axis=axis, keepdims=keepdims)


@m.computed_in_float32
def nanmean(a, axis=None, keepdims=False):
    a = lift(a, _ctx_of(a))
    ok = m.logical_not(m.isnan(a))
    return m.true_divide(nansum(a, axis, keepdims), sum(cast(ok, dt.float32), axis=axis, keepdims=keepdims))


def _all_nan(a: Tracer, axis, keepdims):
    return all(m.isnan(a), axis=axis, keepdims=keepdims)


def nanmax(a, axis=None, keepdims=False):
    """The max ignoring NaN; NaN where a slice is all NaN (NumPy also warns)."""
    a = lift(a, _ctx_of(a))
    if not a.dtype.is_float:
        return max(a, axis=axis, keepdims=keepdims)
    out = max(m.where(m.isnan(a), float("-inf"), a), axis=axis, keepdims=keepdims)
    return m.where(_all_nan(a, axis, keepdims), float("nan"), out)


def nanmin(a, axis=None, keepdims=False):
    """The min ignoring NaN; NaN where a slice is all NaN (NumPy also warns)."""
    a = lift(a, _ctx_of(a))
    if not a.dtype.is_float:
        return min(a, axis=axis, keepdims=keepdims)
    out = min(m.where(m.isnan(a), float("inf"), a), axis=axis, keepdims=keepdims)
    return m.where(_all_nan(a, axis, keepdims), float("nan"), out)


def _nan_as(a, fill):
    """a with its NaNs replaced by ``fill`` (a itself when it cannot hold NaN)."""
    a = lift(a, _ctx_of(a))
    return m.where(m.isnan(a), fill, a) if a.dtype.is_float else a


def nanprod(a, axis=None, keepdims=False):
    return prod_(_nan_as(a, 1), axis=axis, keepdims=keepdims)


def nancumsum(a, axis=None):
    return cumsum(_nan_as(a, 0), axis=axis)


def nancumprod(a, axis=None):
    return cumprod(_nan_as(a, 1), axis=axis)


@m.computed_in_float32
def nanvar(a, axis=None, ddof=0, keepdims=False):
    """The variance of the non-NaN values; NaN where fewer than ddof + 1 remain."""
    a = lift(a, _ctx_of(a))
    if not a.dtype.is_float:
        return var(a, axis=axis, ddof=ddof, keepdims=keepdims)
    ok = m.logical_not(m.isnan(a))
    out = var(a, axis=axis, ddof=ddof, keepdims=keepdims, where=ok)
    count = sum(cast(ok, dt.int32), axis=axis, keepdims=keepdims)
    return m.where(m.greater(count, ddof), out, float("nan"))


@m.computed_in_float32
def nanstd(a, axis=None, ddof=0, keepdims=False):
    return m.sqrt(nanvar(a, axis=axis, ddof=ddof, keepdims=keepdims))


def nanargmax(a, axis=None, keepdims=False):
    """argmax ignoring NaN. A slice of NaN only cannot raise under jit as NumPy does: it gives
    -1 (as JAX)."""
    a = lift(a, _ctx_of(a))
    if not a.dtype.is_float:
        return argmax(a, axis, keepdims)
    out = argmax(m.where(m.isnan(a), float("-inf"), a), axis, keepdims)
    return m.where(_all_nan(a, axis, keepdims), -1, out)


def nanargmin(a, axis=None, keepdims=False):
    """argmin ignoring NaN; -1 for a slice of NaN only (as JAX; NumPy raises)."""
    a = lift(a, _ctx_of(a))
    if not a.dtype.is_float:
        return argmin(a, axis, keepdims)
    out = argmin(m.where(m.isnan(a), float("inf"), a), axis, keepdims)
    return m.where(_all_nan(a, axis, keepdims), -1, out)


def trace(a, offset=0, axis1=0, axis2=1):
    from ._linalg import diagonal

    return sum(diagonal(a, offset, axis1, axis2), axis=-1)

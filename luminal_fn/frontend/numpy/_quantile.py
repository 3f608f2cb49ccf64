"""Quantiles by sorting: ``quantile``, ``percentile``, ``median`` and their NaN-skipping forms.

Each row (the reduced axes moved last and merged) is sorted (NaN last), and the q-th quantile is
read at position q * (count - 1) with a gather, interpolated as NumPy's ``method`` says. The
position is a traced value, so a dynamic axis works, and the NaN-skipping forms count each row's
numbers at run time. NumPy's rules are kept: ``q`` may be a scalar or an array (its dims come
first in the result), a row holding NaN gives NaN (the nan forms skip them; a row of only NaN
gives NaN), integers give float32 (NumPy gives float64), half-precision inputs are computed in
float32 and rounded once.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import prod
from ..errors import ShapeError
from ..tracer import Tracer, _ctx_of, broadcast_to, cast, lift, normalize_axis, reshape_any
from . import _math as m
from ._index import take_along_axis
from ._reduce import _count, any as rany, sum as rsum
from ._shape import expand_dims, moveaxis
from ._sorting import sort

METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _rows(a: Tracer, axis, fn: str):
    """``a`` with the reduced axes merged into one last axis, and the reduced axes (normalised)."""
    if axis is None:
        return reshape_any(a, (a.size,)), tuple(range(a.ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(sorted(normalize_axis(ax, a.ndim, fn) for ax in axes))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{fn}: repeated axis in {axis!r}")
    x = moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
    kept = x.shape[:a.ndim - len(axes)]
    return reshape_any(x, kept + (prod(x.shape[len(kept):]),)), axes


def _checked_q(q, ctx, fn: str, scale: float):
    """q as a float32 array in [0, 1] (``scale`` 100 for percentiles); a static q is checked."""
    if isinstance(q, Tracer):
        return m.true_divide(cast(q, dt.float32), scale) if scale != 1 else cast(q, dt.float32)
    arr = np.asarray(q, dtype=np.float64)
    if arr.ndim > 1:
        raise ShapeError(f"{fn}: q must be a scalar or 1-d, got shape {arr.shape}")
    if np.isnan(arr).any() or (arr < 0).any() or (arr > scale).any():
        raise ValueError(f"{fn}: q must lie in [0, {scale:g}], got {q!r}")
    return lift((arr / scale).astype(np.float32), ctx)


def _quantile(a, q, axis, method: str, keepdims: bool, fn: str, skip_nan: bool, scale: float = 1.0):
    a = lift(a, _ctx_of(a))
    if method not in METHODS and fn not in ("median", "nanmedian"):
        raise ValueError(f"{fn}: method {method!r} is not supported ({', '.join(METHODS)})")
    ndim = a.ndim
    if ndim == 0:
        a = reshape_any(a, (1,))
    out_dtype = a.dtype if a.dtype.is_float else dt.float32
    x, axes = _rows(cast(a, dt.float32), axis, fn)
    ctx = x._ctx
    qv = _checked_q(q, ctx, fn, scale)
    nq, rows = qv.ndim, x.ndim - 1
    n = x.shape[-1]
    srt = sort(x, axis=-1)  # NaN last
    if skip_nan:
        count = cast(rsum(m.logical_not(m.isnan(x)), axis=-1, keepdims=True), dt.float32)
    else:
        count = _count(n, srt, dt.float32)
        if not isinstance(count, Tracer):
            count = lift(np.float32(count), ctx)
    # q's dims first, then the rows, then the one position read from each row
    qb = reshape_any(qv, qv.shape + (1,) * (rows + 1))
    pos = m.multiply(qb, m.subtract(count, 1.0))
    last = m.maximum(m.subtract(count, 1.0), 0.0)
    lo = m.minimum(m.maximum(m.floor(pos), 0.0), last)
    hi = m.minimum(m.maximum(m.ceil(pos), 0.0), last)
    data = broadcast_to(reshape_any(srt, (1,) * nq + srt.shape), qv.shape + srt.shape)

    def at(p):
        idx = broadcast_to(cast(p, dt.int32), qv.shape + srt.shape[:-1] + (1,))
        return take_along_axis(data, idx, axis=-1)

    if method == "lower":
        val = at(lo)
    elif method == "higher":
        val = at(hi)
    elif method == "nearest":
        val = at(m.minimum(m.rint(pos), last))  # (halves to even, as NumPy rounds)
    else:
        v_lo, v_hi = at(lo), at(hi)
        if method == "midpoint":
            val = m.multiply(m.add(v_lo, v_hi), 0.5)
        elif method == "median":  # NumPy's median: the middle value, or the mean of the middle two
            val = m.where(m.equal(lo, hi), v_lo, m.multiply(m.add(v_lo, v_hi), 0.5))
        else:  # NumPy's lerp: from the nearer end, so t = 0 and t = 1 give the values exactly
            t = m.subtract(pos, lo)
            diff = m.subtract(v_hi, v_lo)
            val = m.where(m.less(t, 0.5), m.add(v_lo, m.multiply(diff, t)),
                          m.subtract(v_hi, m.multiply(diff, m.subtract(1.0, t))))
    bad = m.less(count, 1.0) if skip_nan else rany(m.isnan(x), axis=-1, keepdims=True)
    val = m.where(broadcast_to(bad, val.shape), float("nan"), val)
    val = reshape_any(val, val.shape[:-1])  # drop the position axis
    if keepdims:  # (after q's dims)
        for ax in (range(ndim) if axis is None else axes):
            val = expand_dims(val, nq + ax)
    return cast(val, out_dtype)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    _no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, "quantile", skip_nan=False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    _no_out(out, "nanquantile")
    return _quantile(a, q, axis, method, keepdims, "nanquantile", skip_nan=True)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    _no_out(out, "percentile")
    return _quantile(a, q, axis, method, keepdims, "percentile", skip_nan=False, scale=100.0)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    _no_out(out, "nanpercentile")
    return _quantile(a, q, axis, method, keepdims, "nanpercentile", skip_nan=True, scale=100.0)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_out(out, "median")
    return _quantile(a, 0.5, axis, "median", keepdims, "median", skip_nan=False)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_out(out, "nanmedian")
    return _quantile(a, 0.5, axis, "median", keepdims, "nanmedian", skip_nan=True)


def _no_out(out, fn: str) -> None:
    if out is not None:
        raise TypeError(f"{fn}: out= is not supported (arrays are immutable); use the result")

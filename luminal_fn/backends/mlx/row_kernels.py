"""The MLX backend's row kernels (optimize/rules/specialize_norms.egg) as MLX ops, with the
semantics of backends/numpy/row_kernels.py: the traced formula with its literals read from their
1-element inputs, float32 math, the result stored in the node's dtype.

rms_norm_rows   x (R, D), inv_n (1,), eps (1,), w (D,)               R D CAST
softmax_rows    x (H, S, D), neg (1,), log2e (1,) [, scale (1,), mask (H, S, D)]
                                                                     H S D CAST
argmax_rows     x (N,) or (R, N)                                     R N
                NumPy's argmax over the last axis (the first maximum, the first NaN before
                all), found as first hits so that it holds whatever mx.argmax does with ties
scan_rows       x (.., N) float32 / int32                            R N OP
                mx.cumsum (OP 0), mx.cumprod (OP 1), mx.cummax (OP 2) or mx.cummin (OP 3)
                along the last axis; a long float sum in blocks of SUM_BLOCK, each block's
                prefixes plus the sum of the blocks before it (mx.cumsum on the CPU adds one
                by one in float32: along a 128256 row of probabilities it ends 3e-4 low, its
                small terms rounded away)
"""
from __future__ import annotations

import mlx.core as mx

from ...ir.ops import RMS_ROWS_ROUNDING
from .ops import MX_DTYPES, SUM_BLOCK, cast, float_sum, op

ROW_KINDS = ("rms_norm_rows", "softmax_rows", "argmax_rows", "scan_rows")


def _f32(reader, vals, dims):
    return reader(vals, dims).astype(mx.float32)


def _scalar(reader, vals, dims):
    return mx.reshape(_f32(reader, vals, dims), (-1,))[0]


@op("rms_norm_rows")
def _rms_norm_rows(node, readers):
    r_x, r_inv, r_eps, r_w = readers
    rounded = RMS_ROWS_ROUNDING.get(int(node.attrs["params"][2]))
    rounded = None if rounded is None else MX_DTYPES[rounded]

    def step(vals, dims):
        x = _f32(r_x, vals, dims)
        ms = float_sum(x * x, -1, keepdims=True) * _scalar(r_inv, vals, dims)
        r = 1.0 / mx.sqrt(ms + _scalar(r_eps, vals, dims))
        y = x * r
        if rounded is not None:  # normalised, then rounded to x's half dtype, then weighted
            y = y.astype(rounded).astype(mx.float32)
        return cast(y * _f32(r_w, vals, dims), node.dtype)

    return step


@op("softmax_rows")
def _softmax_rows(node, readers):
    r_x, r_neg, r_l2e = readers[:3]
    scaled = readers[3:]

    def step(vals, dims):
        x = _f32(r_x, vals, dims)
        if scaled:
            x = x * _scalar(scaled[0], vals, dims) + _f32(scaled[1], vals, dims)
        m = mx.max(x, axis=-1, keepdims=True)
        e = mx.power(2.0, (x + m * _scalar(r_neg, vals, dims)) * _scalar(r_l2e, vals, dims))
        return cast(e * (1.0 / float_sum(e, -1, keepdims=True)), node.dtype)

    return step


@op("argmax_rows")
def _argmax_rows(node, readers):
    (r_x,) = readers

    def step(vals, dims):
        x = _f32(r_x, vals, dims)
        n = x.shape[-1]
        pos = mx.arange(n, dtype=mx.int32)
        nan = mx.isnan(x)
        top = mx.max(mx.where(nan, -float("inf"), x), axis=-1, keepdims=True)

        def first(hit):  # the lowest index where hit holds (n where it never does)
            return mx.min(mx.where(hit, pos, n), axis=-1)

        return cast(mx.where(mx.any(nan, axis=-1), first(nan), first(x == top)), node.dtype)

    return step


@op("scan_rows")
def _scan_rows(node, readers):
    (r_x,) = readers
    scan = (mx.cumsum, mx.cumprod, mx.cummax, mx.cummin)[int(node.attrs["params"][2])]
    blocked = scan is mx.cumsum and node.dtype.is_float  # (x's dtype: float32 or int32)

    def step(vals, dims):
        x = r_x(vals, dims)
        if blocked and x.shape[-1] > SUM_BLOCK:
            return cast(_blocked_cumsum(x), node.dtype)
        return cast(scan(x, axis=-1), node.dtype)

    return step


def _blocked_cumsum(x):
    """cumsum along the last axis with each prefix a block's own prefix plus the total of the
    blocks before it: a small term meets a running total of its block, not of the whole row."""
    n = x.shape[-1]
    blocks = -(-n // SUM_BLOCK)
    pad = blocks * SUM_BLOCK - n
    if pad:
        x = mx.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
    x = mx.reshape(x, x.shape[:-1] + (blocks, SUM_BLOCK))
    inner = mx.cumsum(x, axis=-1)
    before = mx.cumsum(inner[..., -1], axis=-1, inclusive=False)
    out = mx.reshape(inner + mx.expand_dims(before, -1), x.shape[:-2] + (blocks * SUM_BLOCK,))
    return out[..., :n] if pad else out


__all__ = ["ROW_KINDS"]

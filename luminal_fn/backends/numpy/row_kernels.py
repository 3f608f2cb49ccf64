"""The NumPy semantics of the row kernels that optimize/rules/specialize_norms.egg adds: RMS norm
and softmax over the last axis, each computing exactly the formula the front end traces (the
literals come in as 1-element inputs), in float32, stored in the node's dtype.

name            inputs                                              params
rms_norm_rows   x (R, D), inv_n (1,), eps (1,), w (D,)              R D CAST
                y = x * (1 / sqrt(sum(x * x, -1) * inv_n + eps)) * w; CAST 2 / 3: the
                normalised x * r is rounded to bfloat16 / float16 before the weight
                multiply (Hugging Face's LlamaRMSNorm in half precision)
softmax_rows    x (H, S, D), neg (1,), log2e (1,) [, scale (1,), mask (H, S, D)]
                                                                    H S D CAST
                with scale and mask: x = a * scale + mask first; then
                e = exp2((x + max(x, -1) * neg) * log2e); y = e * (1 / sum(e, -1))
CAST 0 / 1 only tell the two e-classes of one kernel apart (computed in float32, stored in the
node's dtype either way).

argmax_rows     x (N,) or (R, N) (optimize/rules/specialize_argmax.egg)   R N
                over the last axis: the first index of the largest value, or of the first NaN
                (NumPy's argmax); int32, shape () or (R,)
scan_rows       x (.., N) float32 / int32 (ir/composites.py)                R N OP
                NumPy's cumsum (OP 0), cumprod (OP 1), maximum.accumulate (OP 2: cummax) or
                minimum.accumulate (OP 3: cummin; NaN from the first NaN on) along the last
                axis, in x's dtype; a long float sum in blocks (sums.blocked_cumsum: NumPy's
                float32 loop adds one by one, and ended a 128256 row of probabilities 3e-4 low)
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.ops import RMS_ROWS_ROUNDING
from .executor import kernel
from .model_kernels import _as, _store
from .sums import SUM_BLOCK, blocked_cumsum

ROW_KERNELS = ("rms_norm_rows", "softmax_rows", "argmax_rows", "scan_rows")
SCAN_UFUNCS = (np.add, np.multiply, np.maximum, np.minimum)  # scan_rows's OP


def _f32(reader, vals, dims):
    return _as(reader(vals, dims), np.float32)


def _scalar(reader, vals, dims) -> np.float32:
    return np.float32(_f32(reader, vals, dims).reshape(-1)[0])


@kernel("rms_norm_rows")
def _rms_norm_rows(node, readers):
    r_x, r_inv, r_eps, r_w = readers
    rounded = RMS_ROWS_ROUNDING.get(int(node.attrs["params"][2]))
    rounded = None if rounded is None else dt.BY_NAME[rounded].np

    def step(vals, dims):
        x = _f32(r_x, vals, dims)
        ms = np.add.reduce(x * x, axis=-1, keepdims=True) * _scalar(r_inv, vals, dims)
        r = np.float32(1) / np.sqrt(ms + _scalar(r_eps, vals, dims))
        y = x * r
        if rounded is not None:
            y = y.astype(rounded).astype(np.float32)
        return _store(node, y * _f32(r_w, vals, dims))

    return step


@kernel("softmax_rows")
def _softmax_rows(node, readers):
    r_x, r_neg, r_l2e = readers[:3]
    scaled = readers[3:]

    def step(vals, dims):
        x = _f32(r_x, vals, dims)
        if scaled:
            r_scale, r_mask = scaled
            x = x * _scalar(r_scale, vals, dims) + _f32(r_mask, vals, dims)
        m = np.maximum.reduce(x, axis=-1, keepdims=True)
        e = np.exp2((x + m * _scalar(r_neg, vals, dims)) * _scalar(r_l2e, vals, dims))
        return _store(node, e * (np.float32(1) / np.add.reduce(e, axis=-1, keepdims=True)))

    return step


@kernel("argmax_rows")
def _argmax_rows(node, readers):
    (r_x,) = readers

    def step(vals, dims):
        x = _f32(r_x, vals, dims)  # (exact for half types) NumPy's argmax: the first maximum, a NaN before all
        return np.asarray(np.argmax(x, axis=-1), dtype=np.int32)  # (a 0-d result stays 0-d)

    return step


@kernel("scan_rows")
def _scan_rows(node, readers):
    (r_x,) = readers
    ufunc = SCAN_UFUNCS[int(node.attrs["params"][2])]
    blocked = ufunc is np.add and node.dtype.is_float  # (x's dtype: float32 or int32)

    def step(vals, dims):
        x = r_x(vals, dims)
        if blocked and x.shape[-1] > SUM_BLOCK:
            return _store(node, blocked_cumsum(x))
        return _store(node, ufunc.accumulate(x, axis=-1, dtype=x.dtype))

    return step


__all__ = ["ROW_KERNELS"]

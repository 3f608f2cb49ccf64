"""Float32 sums along an axis NumPy does not add pairwise.

np.add.reduce sums the axis of the innermost loop pairwise, but along another axis (the rows
of a C-contiguous array) it adds one slice at a time in float32: small terms after large ones
round away, and a 128256-long axis of probabilities came out 3e-4 low. Such an axis past
4 * SUM_BLOCK is summed in blocks: each block's sum, then the blocks' sums.
"""
from __future__ import annotations

import numpy as np

SUM_BLOCK = 256


def add_reduce(x: np.ndarray, axis: int, dtype, out=None):
    """np.add.reduce(x, axis, dtype, out), blocked where NumPy would add a long float32 axis one
    slice at a time."""
    axis %= x.ndim
    n = x.shape[axis]
    if (np.dtype(dtype) != np.float32 or n <= 4 * SUM_BLOCK
            or abs(x.strides[axis]) == min(abs(s) for s in x.strides)):  # (the inner loop: pairwise)
        return np.add.reduce(x, axis=axis, dtype=dtype, out=out)
    full = n // SUM_BLOCK * SUM_BLOCK
    head = x[(slice(None),) * axis + (slice(0, full),)]
    head = head.reshape(x.shape[:axis] + (full // SUM_BLOCK, SUM_BLOCK) + x.shape[axis + 1:])
    total = np.add.reduce(np.add.reduce(head, axis=axis + 1, dtype=dtype), axis=axis, dtype=dtype)
    if full < n:
        total += np.add.reduce(x[(slice(None),) * axis + (slice(full, n),)], axis=axis, dtype=dtype)
    if out is None:
        return total
    out[...] = total
    return out

"""Float32 sums that keep their small terms.

np.add.reduce sums the axis of the innermost loop pairwise, but along another axis (the rows
of a C-contiguous array) it adds one slice at a time in float32, as np.cumsum always does:
small terms after large ones round away, and a 128256-long axis of probabilities came out 3e-4
low. Such sums go in blocks of SUM_BLOCK: a reduction sums each block, then the blocks' sums;
a scan adds to each block's own prefixes the float64 sum of the blocks before it (a float64
loop would be as exact and 3x slower at a vocabulary row).
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


def blocked_cumsum(x: np.ndarray) -> np.ndarray:
    """np.cumsum of a float array along its last axis, each prefix a block's own prefix plus the
    total of the blocks before it (summed in float64, rounded once)."""
    n = x.shape[-1]
    nb = -(-n // SUM_BLOCK)
    padded = x
    if nb * SUM_BLOCK != n:
        padded = np.zeros(x.shape[:-1] + (nb * SUM_BLOCK,), x.dtype)
        padded[..., :n] = x
    blocks = np.add.accumulate(padded.reshape(x.shape[:-1] + (nb, SUM_BLOCK)), axis=-1)
    carry = np.cumsum(blocks[..., :-1, -1], axis=-1, dtype=np.float64).astype(x.dtype)
    blocks[..., 1:, :] += carry[..., None]
    return blocks.reshape(x.shape[:-1] + (nb * SUM_BLOCK,))[..., :n]

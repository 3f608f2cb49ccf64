"""sort_rows and argsort_rows (ir/composites.py): NumPy's stable sort along the last axis in
place of the front end's ranks, which compare every pair of a row (a (.., n, n) comparison
array on this backend: 16000 floats needed more memory than the machine had).

name            inputs          params
sort_rows       x (.., N)       R N DESC        x in sorted order (the elements themselves:
                                                -0.0 and NaN payloads kept)
argsort_rows    x (.., N)       R N DESC        their int32 positions
top_k_rows      x (.., N)       R N K           the first K positions of the descending order
Ascending is np.argsort(kind="stable")'s order: NaN last, +0.0 and -0.0 tied. DESC is JAX's
descending order, the ascending one reversed (NaN first) with ties still in index order.
"""
from __future__ import annotations

import numpy as np

from .executor import kernel
from .model_kernels import _store

SORT_KERNELS = ("sort_rows", "argsort_rows", "top_k_rows")


def _value_keys(x: np.ndarray):
    """int64 keys in x's sort order, or None (float64: no room for the position beside it)."""
    words = _value_words(x)
    return None if words is None else words.astype(np.int64)


def _value_words(x: np.ndarray):
    """int32 words in x's sort order, or None (float64, wider ints). Floats go through their
    bits, sign-folded, after -0.0 + 0.0 made the zeros one key and every NaN one NaN above
    +inf; half types widen exactly to float32 first."""
    if x.dtype.kind in "biu":
        return x.astype(np.int32) if x.dtype.itemsize < 4 or x.dtype == np.int32 else None
    if x.dtype.itemsize > 4:
        return None
    f = x.astype(np.float32) + np.float32(0)
    f[np.isnan(f)] = np.float32(np.nan)
    # a negative float's magnitude bits flipped: the int32 order is then the float order (a
    # ufunc's where= took 12 ns an element here, two thirds of a vocabulary row's top_k)
    bits = f.view(np.int32)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


def row_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """The positions of x's last axis in sorted order (int64). Each key is made unique by the
    position in its low 32 bits, so NumPy's fast unstable sort of the keys gives the stable
    order (about 6x np.argsort(kind="stable") on a million float32 here)."""
    keys = _value_keys(x)
    n = x.shape[-1]
    if keys is None:
        if not descending:
            return np.argsort(x, axis=-1, kind="stable")
        return (n - 1 - np.argsort(x[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    if descending:  # (~k, not -k: -INT32_MIN shifted by 32 overflowed and sorted first)
        np.invert(keys, out=keys)
    keys <<= 32
    keys += np.arange(n, dtype=np.int64)
    keys.sort(axis=-1)
    return keys & 0xFFFFFFFF


def top_k_order(x: np.ndarray, k: int) -> np.ndarray:
    """The first k positions of the descending order (int64). A partition of the int32 words
    finds each row's k-th key; only the elements at or before it (k of them, more where it
    ties) get 64-bit (key, position) keys and a sort: the words of a 64 x 32000 block and one
    partition, where keys for all took three times NumPy's argpartition idiom."""
    words = _value_words(x)
    lead, n = x.shape[:-1], x.shape[-1]
    if words is None or not 0 < k < n:
        return row_order(x, True)[..., :k]
    keys = np.invert(words).reshape(-1, n)  # (descending: ~w reverses the order, never overflows)
    kth = np.partition(keys, k - 1, axis=-1)[:, k - 1:k]
    row, col = np.divmod(np.flatnonzero(keys <= kth), n)  # (2-d np.nonzero took 15x as long)
    pick = np.lexsort(((keys[row, col].astype(np.int64) << 32) + col, row))  # by row, then key
    starts = np.searchsorted(row, np.arange(keys.shape[0]))  # (nonzero's rows are ascending)
    return col[pick[starts[:, None] + np.arange(k)]].reshape(lead + (k,))


@kernel("sort_rows")
def _sort_rows(node, readers):
    (r_x,) = readers
    descending = bool(int(node.attrs["params"][2]))

    def step(vals, dims):
        x = r_x(vals, dims)
        return _store(node, np.take_along_axis(x, row_order(x, descending), axis=-1))

    return step


@kernel("argsort_rows")
def _argsort_rows(node, readers):
    (r_x,) = readers
    descending = bool(int(node.attrs["params"][2]))

    def step(vals, dims):
        return _store(node, row_order(r_x(vals, dims), descending))

    return step


@kernel("top_k_rows")
def _top_k_rows(node, readers):
    (r_x,) = readers
    k = int(node.attrs["params"][2])

    def step(vals, dims):
        return _store(node, top_k_order(r_x(vals, dims), k))

    return step


__all__ = ["SORT_KERNELS", "row_order", "top_k_order"]

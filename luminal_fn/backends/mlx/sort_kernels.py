"""sort_rows, argsort_rows and top_k_rows (ir/composites.py) as MLX ops, with the order of
backends/numpy/sort_kernels.py: stable, NaN after +inf (first when descending), +0.0 and -0.0
tied. mx.argsort promises no stability, so each element's key is made unique: its value as an
order-keeping integer, times 2**32, plus its position (the key negated for descending); top_k
partitions those keys and sorts the first K."""
from __future__ import annotations

import mlx.core as mx

from .ops import cast, op

SORT_KINDS = ("sort_rows", "argsort_rows", "top_k_rows")


def _value_keys(x):
    """int64 keys in x's sort order: floats through their bits (sign-folded), NaN above +inf."""
    if not mx.issubdtype(x.dtype, mx.floating):
        return x.astype(mx.int64)
    f = x.astype(mx.float32) + 0.0  # (-0.0 + 0.0 is +0.0: the two zeros tie)
    f = mx.where(mx.isnan(f), float("nan"), f)  # one NaN, sign clear: above +inf
    bits = mx.view(f, mx.int32).astype(mx.int64)
    return mx.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def _unique_keys(x, descending: bool):
    keys = _value_keys(x)
    if descending:  # (~k, not -k: -INT32_MIN shifted by 32 overflows)
        keys = mx.bitwise_invert(keys)
    return keys * (1 << 32) + mx.arange(x.shape[-1], dtype=mx.int64)


def row_order(x, descending: bool):
    return mx.argsort(_unique_keys(x, descending), axis=-1)


@op("top_k_rows")
def _top_k_rows(node, readers):
    (r_x,) = readers
    k = int(node.attrs["params"][2])

    def step(vals, dims):
        keys = _unique_keys(r_x(vals, dims), True)
        first = mx.sort(mx.partition(keys, k - 1, axis=-1)[..., :k], axis=-1)
        return cast((first & 0xFFFFFFFF).astype(mx.int32), node.dtype)

    return step


@op("sort_rows")
def _sort_rows(node, readers):
    (r_x,) = readers
    descending = bool(int(node.attrs["params"][2]))

    def step(vals, dims):
        x = r_x(vals, dims)
        return cast(mx.take_along_axis(x, row_order(x, descending), axis=-1), node.dtype)

    return step


@op("argsort_rows")
def _argsort_rows(node, readers):
    (r_x,) = readers
    descending = bool(int(node.attrs["params"][2]))

    def step(vals, dims):
        return cast(row_order(r_x(vals, dims), descending).astype(mx.int32), node.dtype)

    return step


__all__ = ["SORT_KINDS"]

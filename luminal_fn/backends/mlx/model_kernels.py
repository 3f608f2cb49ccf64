"""The MLX backend's model kernels (optimize/rules/specialize_models.egg) as MLX ops.

embedding_bag_multi   [prefix (B, P, D) if P > 0], then K triples table_k, rows_k, stride_k
                      params B P K L D; out (B, P+K, D): out[:, :P] = prefix and
                      out[:, P+k, d] = sum_l table_k.flat[clip(rows_k[b*L + l] * stride_k + d)]

The semantics are those of the NumPy backend's kernels (backends/numpy/model_kernels.py): float
math accumulates in float32, integer math in the node's dtype, the result is stored in the
node's dtype. Each table is its own input: the K bags are K gathers and sums written into one
(B, P+K, D) array, with no concatenated copy of the tables.
"""
from __future__ import annotations

import mlx.core as mx
import numpy as np

from .ops import cast, compute_dtype, gather_flat, op

MULTI_TABLE_KINDS = ("embedding_bag_multi",)


def _params(node, dims) -> list:
    return [p if isinstance(p, int) else int(p.evaluate(dims)) for p in node.attrs["params"]]


@op("embedding_bag_multi")
def _embedding_bag_multi(node, readers):
    def step(vals, dims):
        b, p, k, l, d = _params(node, dims)
        first = 1 if p else 0
        if len(readers) != first + 3 * k:
            raise ValueError(f"MLX embedding_bag_multi (node %{node.id}): P={p}, K={k} needs "
                             f"{first + 3 * k} inputs, got {len(readers)}")
        acc = compute_dtype(node.dtype)  # float32 for float (and half) nodes, else the node's own
        parts = []
        if p:
            parts.append(readers[0](vals, dims).astype(acc))
        cols = mx.array(np.arange(d, dtype=np.int32))
        for j in range(k):
            r_table, r_rows, r_stride = readers[first + 3 * j: first + 3 * j + 3]
            table = r_table(vals, dims)
            rows = r_rows(vals, dims).reshape(-1)[: b * l].astype(mx.int32)
            stride = r_stride(vals, dims).reshape(-1)[:1].astype(mx.int32)
            idx = rows.reshape(b, l, 1) * stride + cols  # (B, L, D) flat table indices
            bags = gather_flat(table, idx).astype(acc)  # the Gather clamp
            parts.append(mx.sum(bags, axis=1, keepdims=True))
        return cast(mx.concatenate(parts, axis=1), node.dtype)

    return step


__all__ = ["MULTI_TABLE_KINDS"]

"""The NumPy semantics of the attention kernel that optimize/rules/specialize_attention.egg adds:
the grouped-query attention nn.scaled_dot_product_attention traces (QK product, the scaled and
masked softmax_rows, AV product) as one kernel, computing the traced formula in float32 with the
literals as 1-element inputs, stored in the node's dtype.

name             inputs                                                        params
attention_rows   q (Hk, G, S, E), k (Hk, C, E), v (Hk, C, Ev), neg (1,),       Hk G S C E Ev
                 log2e (1,), scale (1,), mask (H, S, C) with H = Hk * G
                 a[hk, g, s, c] = sum_e q[hk, g, s, e] * k[hk, c, e]
                 x = a * scale + mask[hk * G + g, s, c]
                 w = e * (1 / sum_c(e)), e = exp2((x + max_c(x) * neg) * log2e)
                 y[hk, g, s, :] = sum_c w[c] * v[hk, c, :]                     -> (Hk, G, S, Ev)
Query head hk * G + g reads key/value head hk (the GQA grouping the front end traces). With one
key/value head per query head (G = 1) the node is (H, S, Ev): the same values in the same order.
"""
from __future__ import annotations

import numpy as np

from .executor import kernel
from .model_kernels import _as, _store

ATTENTION_KERNELS = ("attention_rows",)


def _f32(reader, vals, dims):
    return _as(reader(vals, dims), np.float32)


def _scalar(reader, vals, dims) -> np.float32:
    return np.float32(_f32(reader, vals, dims).reshape(-1)[0])


def attention_rows(q, k, v, neg, log2e, scale, mask) -> np.ndarray:
    """The kernel's formula on float32 arrays (q (Hk, G, S, E), k (Hk, C, E), v (Hk, C, Ev),
    mask broadcastable to (Hk * G, S, C)); returns float32 (Hk, G, S, Ev)."""
    hk, g, s, _ = q.shape
    c = k.shape[1]
    a = np.matmul(q, np.swapaxes(k, -1, -2)[:, None])                   # (Hk, G, S, C)
    x = a.reshape(hk * g, s, c) * np.float32(scale) + np.broadcast_to(mask, (hk * g, s, c))
    m = np.maximum.reduce(x, axis=-1, keepdims=True)
    e = np.exp2((x + m * np.float32(neg)) * np.float32(log2e))
    w = e * (np.float32(1) / np.add.reduce(e, axis=-1, keepdims=True))
    return np.matmul(w.reshape(hk, g, s, c), v[:, None]).astype(np.float32, copy=False)


@kernel("attention_rows")
def _attention_rows(node, readers):
    r_q, r_k, r_v, r_neg, r_l2e, r_scale, r_mask = readers

    def step(vals, dims):
        y = attention_rows(_f32(r_q, vals, dims), _f32(r_k, vals, dims), _f32(r_v, vals, dims),
                           _scalar(r_neg, vals, dims), _scalar(r_l2e, vals, dims),
                           _scalar(r_scale, vals, dims), _f32(r_mask, vals, dims))
        if len(node.shape) == 3:  # one key/value head per query head: (H, S, Ev), G = 1
            y = y.reshape(-1, *y.shape[2:])
        return _store(node, y)

    return step


__all__ = ["ATTENTION_KERNELS", "attention_rows"]

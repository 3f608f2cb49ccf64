"""The Llama forward pass as one pure function, jitted once for prefill and every decode step.

``step(weights, tokens, positions, scatter_idx, gather_idx, mask, cache) -> (logits, cache)``

- ``tokens``, ``positions``, ``scatter_idx``: (s,) int32, the new tokens, their positions, and the
  cache rows their keys/values are written to (``s`` is a dynamic dim);
- ``gather_idx``: (c,) int32, the cache rows attention reads (``c`` is a dynamic dim);
- ``mask``: (s, c) float32, additive (0 where a query may attend, a large negative elsewhere);
- ``cache``: per layer {"k", "v"} of shape (max_seq_len, kv_dim), donated and returned updated.

Activations and the cache are float32; matrices may be stored in bfloat16 and are widened inside
the products (the optimizer can fuse that cast into the GEMV/GEMM that reads them).
"""
from __future__ import annotations

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp

from .config import LlamaConfig, rope_inv_freq

MASKED = -1e10  # the seed's additive mask value: exp() of it underflows to exactly 0


# ---- layers -------------------------------------------------------------------------------------
# Written with luminal_fn.numpy here; luminal_fn.nn's helpers were not yet available when this was
# written (see the report in the commit message).
def linear(x, w):
    """x @ w.T for a Hugging Face (out, in) weight."""
    return lnp.matmul(x, lnp.transpose(w))


def rms_norm(x, weight, eps: float):
    ms = lnp.mean(x * x, axis=-1, keepdims=True)
    return x * lnp.rsqrt(ms + eps) * weight


def silu(x):
    return x / (1.0 + lnp.exp(-x))


def rotate(x, cos, sin):
    """Rotary embedding, Hugging Face's half-split layout: x (s, heads, d), cos/sin (s, 1, d/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return lnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def gather_rows(table, idx):
    """table[idx] for a (rows, width) table and (n,) int32 row ids."""
    return lnp.take(table, idx, axis=0)


def scatter_rows(table, idx, rows):
    """table with rows idx replaced by rows (a new array; in place once the cache is donated)."""
    return table.at[idx].set(rows)


def softmax(x, axis=-1):
    m = lnp.max(x, axis=axis, keepdims=True)
    e = lnp.exp(x - m)
    return e / lnp.sum(e, axis=axis, keepdims=True)


def attention(q, k, v, mask, config: LlamaConfig):
    """Grouped-query attention. q (s, heads*d); k, v (c, kv_heads*d); mask (s, c)."""
    s, c = q.shape[0], k.shape[0]
    kvh, g, d = config.num_key_value_heads, config.kv_groups, config.head_dim
    qh = lnp.transpose(lnp.reshape(q, (s, kvh, g, d)), (1, 2, 0, 3))        # (kvh, g, s, d)
    kh = lnp.transpose(lnp.reshape(k, (c, kvh, 1, d)), (1, 2, 3, 0))        # (kvh, 1, d, c)
    vh = lnp.transpose(lnp.reshape(v, (c, kvh, 1, d)), (1, 2, 0, 3))        # (kvh, 1, c, d)
    scores = lnp.matmul(qh, kh) * (1.0 / float(np.sqrt(d))) + mask          # (kvh, g, s, c)
    out = lnp.matmul(softmax(scores, axis=-1), vh)                          # (kvh, g, s, d)
    return lnp.reshape(lnp.transpose(out, (2, 0, 1, 3)), (s, config.q_dim))


def layer_forward(p, x, cos, sin, scatter_idx, gather_idx, mask, cache, config: LlamaConfig):
    s = x.shape[0]
    h = rms_norm(x, p["attn_norm"], config.rms_norm_eps)
    q = linear(h, p["q"])
    k = linear(h, p["k"])
    v = linear(h, p["v"])
    q = lnp.reshape(rotate(lnp.reshape(q, (s, config.num_attention_heads, config.head_dim)), cos, sin),
                    (s, config.q_dim))
    k = lnp.reshape(rotate(lnp.reshape(k, (s, config.num_key_value_heads, config.head_dim)), cos, sin),
                    (s, config.kv_dim))
    k_cache = scatter_rows(cache["k"], scatter_idx, k)
    v_cache = scatter_rows(cache["v"], scatter_idx, v)
    ctx = attention(q, gather_rows(k_cache, gather_idx), gather_rows(v_cache, gather_idx), mask, config)
    x = x + linear(ctx, p["o"])
    h = rms_norm(x, p["mlp_norm"], config.rms_norm_eps)
    x = x + linear(silu(linear(h, p["gate"])) * linear(h, p["up"]), p["down"])
    return x, {"k": k_cache, "v": v_cache}


def forward(weights, tokens, positions, scatter_idx, gather_idx, mask, cache, config: LlamaConfig,
            all_logits: bool = False):
    """Logits (s or 1, vocab) float32 and the updated cache. With ``all_logits=False`` only the last
    position's logits are computed (all that generation needs; it keeps the vocab GEMM at one row)."""
    x = lnp.astype(gather_rows(weights["embed"], tokens), lnp.float32)
    inv_freq = rope_inv_freq(config).astype(np.float32)
    angles = lnp.astype(positions, lnp.float32)[:, None] * inv_freq[None, :]   # (s, d/2)
    cos, sin = lnp.cos(angles)[:, None, :], lnp.sin(angles)[:, None, :]
    new_cache = []
    for p, layer_cache in zip(weights["layers"], cache):
        x, layer_cache = layer_forward(p, x, cos, sin, scatter_idx, gather_idx, mask, layer_cache, config)
        new_cache.append(layer_cache)
    if not all_logits:
        x = x[-1:]
    x = rms_norm(x, weights["norm"], config.rms_norm_eps)
    head = weights["embed"] if config.tie_word_embeddings else weights["lm_head"]
    return linear(x, head), new_cache


# ---- the jitted step and its host-side inputs -------------------------------------------------
DYNAMIC_AXES = {"tokens": {0: "s"}, "positions": {0: "s"}, "scatter_idx": {0: "s"},
                "gather_idx": {0: "c"}, "mask": {0: "s", 1: "c"}}


def dim_buckets(max_prefill: int, max_context: int) -> dict:
    """The seed's buckets: decode (1) apart from prefill (2..max), each searched at <= 16."""
    def one(hi):
        if hi < 2:
            return [(1, 1)]
        return [(1, 1), (2, hi, max(2, min(16, hi)))]

    return {"s": one(max_prefill), "c": one(max_context)}


def make_step(config: LlamaConfig, *, backend=None, buckets=None, search=None, all_logits=False):
    """The model step jitted once: dynamic s and c, donated cache."""
    def step(weights, tokens, positions, scatter_idx, gather_idx, mask, cache):
        return forward(weights, tokens, positions, scatter_idx, gather_idx, mask, cache, config,
                       all_logits=all_logits)

    step.__name__ = "llama_step"
    return lf.jit(step, dynamic_axes=DYNAMIC_AXES, buckets=buckets, search=search, backend=backend,
                  donate_argnums=(6,))


def new_cache(config: LlamaConfig, max_seq_len: int, backend=None) -> list:
    z = np.zeros((max_seq_len, config.kv_dim), np.float32)
    return [{"k": lf.device_put(z, backend), "v": lf.device_put(z, backend)}
            for _ in range(config.num_hidden_layers)]


def causal_mask(q_pos, context_len: int) -> np.ndarray:
    """(len(q_pos), context_len) additive mask: query at position p sees context rows 0..p."""
    q = np.asarray(q_pos, np.int64)[:, None]
    return np.where(np.arange(context_len)[None, :] <= q, 0.0, MASKED).astype(np.float32)


def step_inputs(tokens, start: int):
    """Host inputs for new tokens placed at positions start.. of a contiguous cache."""
    n = len(tokens)
    pos = np.arange(start, start + n, dtype=np.int32)
    return dict(tokens=np.asarray(tokens, np.int32), positions=pos, scatter_idx=pos,
                gather_idx=np.arange(start + n, dtype=np.int32), mask=causal_mask(pos, start + n))

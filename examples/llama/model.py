"""The Llama forward pass as one pure function, jitted once for prefill and every decode step.

``step(weights, tokens, positions, scatter_idx, mask, cache) -> (logits, cache)``, or with
``make_step(..., output="greedy")`` -> (the next token as a (1,) int32 device array, cache)

- ``tokens``, ``positions``, ``scatter_idx``: (s,) int32, the new tokens, their positions, and the
  cache rows their keys/values are written to (``s`` is a dynamic dim);
- ``mask``: (s, c) float32, additive (0 where a query may attend, a large negative elsewhere);
  attention reads cache rows 0..c-1 (``c`` is a dynamic dim) as a view, no copy;
- ``cache``: per layer {"k", "v"} of shape (max_seq_len, kv_dim), donated and returned updated.

``make_step(..., contiguous_cache=False)`` is the seed's form instead: ``step(weights, tokens,
positions, scatter_idx, gather_idx, mask, cache)`` reads the rows ``gather_idx`` ((c,) int32)
names through a gather (any rows, in any order, at the cost of copying them every step).

Activations and the cache are float32; matrices may be stored in bfloat16 and are widened inside
the products (the optimizer can fuse that cast into the GEMV/GEMM that reads them).
"""
from __future__ import annotations

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp

from .config import LlamaConfig, rope_inv_freq

MASKED = -1e10  # the seed's additive mask value: exp() of it underflows to exactly 0


def linear(x, w):
    """x @ w.T for a Hugging Face (out, in) weight. A half-precision weight is multiplied in its
    own dtype (float32 accumulation inside the kernel) and the result widened to float32, as
    bf16 inference does: promoting the weight instead would materialise a float32 copy of every
    weight at every step."""
    if w.dtype != lnp.float32:
        return lnp.astype(lnp.matmul(lnp.astype(x, w.dtype), lnp.transpose(w)), lnp.float32)
    return lnp.matmul(x, lnp.transpose(w))


def attention(q, k, v, mask, config: LlamaConfig):
    """Grouped-query attention. q (s, heads*d) already rotated; k, v (c, kv_heads*d); mask (s, c).
    lf.nn's attention shares each key/value head among its query heads without repeating it."""
    s, c, d = q.shape[0], k.shape[0], config.head_dim
    qh = lnp.transpose(lnp.reshape(q, (s, config.num_attention_heads, d)), (1, 0, 2))    # (H, s, d)
    kh = lnp.transpose(lnp.reshape(k, (c, config.num_key_value_heads, d)), (1, 0, 2))    # (KVH, c, d)
    vh = lnp.transpose(lnp.reshape(v, (c, config.num_key_value_heads, d)), (1, 0, 2))
    out = lf.nn.scaled_dot_product_attention(qh, kh, vh, mask=mask)                     # (H, s, d)
    return lnp.reshape(lnp.transpose(out, (1, 0, 2)), (s, config.q_dim))


def rotary(x, heads: int, cos, sin, config: LlamaConfig):
    """Hugging Face's rotate-half RoPE on x (s, heads*d) with tables cos/sin (s, d/2)."""
    s = x.shape[0]
    xh = lnp.reshape(x, (s, heads, config.head_dim))
    return lnp.reshape(lf.nn.rope(xh, cos=cos, sin=sin, seq_axis=0), (s, heads * config.head_dim))


def layer_forward(p, x, cos, sin, scatter_idx, gather_idx, mask, cache, config: LlamaConfig):
    h = lf.nn.rms_norm(x, p["attn_norm"], eps=config.rms_norm_eps)
    q = rotary(linear(h, p["q"]), config.num_attention_heads, cos, sin, config)
    k = rotary(linear(h, p["k"]), config.num_key_value_heads, cos, sin, config)
    v = linear(h, p["v"])
    # write the new rows, then read the context: rows 0..c-1 as a view (a contiguous cache), or
    # the seed's gather of the rows gather_idx names
    k_cache = lf.nn.scatter_rows(cache["k"], scatter_idx, k)
    v_cache = lf.nn.scatter_rows(cache["v"], scatter_idx, v)
    if gather_idx is None:
        k_ctx, v_ctx = k_cache[:mask.shape[1]], v_cache[:mask.shape[1]]
        mask = mask[:, :k_ctx.shape[0]]  # the same length, as the slice states it (c <= rows)
    else:
        k_ctx = lf.nn.gather_rows(k_cache, gather_idx)
        v_ctx = lf.nn.gather_rows(v_cache, gather_idx)
    x = x + linear(attention(q, k_ctx, v_ctx, mask, config), p["o"])
    h = lf.nn.rms_norm(x, p["mlp_norm"], eps=config.rms_norm_eps)
    x = x + linear(lf.nn.silu(linear(h, p["gate"])) * linear(h, p["up"]), p["down"])
    return x, {"k": k_cache, "v": v_cache}


def forward(weights, tokens, positions, scatter_idx, gather_idx, mask, cache, config: LlamaConfig,
            all_logits: bool = False):
    """Logits (s or 1, vocab) float32 and the updated cache. With ``all_logits=False`` only the last
    position's logits are computed (all that generation needs; it keeps the vocab GEMM at one row)."""
    x = lnp.astype(lf.nn.embedding(weights["embed"], tokens), lnp.float32)
    inv_freq = rope_inv_freq(config).astype(np.float32)  # rope scaling applied once, on the host
    angles = lnp.astype(positions, lnp.float32)[:, None] * inv_freq[None, :]   # (s, d/2)
    cos, sin = lnp.cos(angles), lnp.sin(angles)
    new_cache = []
    for p, layer_cache in zip(weights["layers"], cache):
        x, layer_cache = layer_forward(p, x, cos, sin, scatter_idx, gather_idx, mask, layer_cache, config)
        new_cache.append(layer_cache)
    if not all_logits:
        x = x[x.shape[0] - 1][None, :]  # the last row, with a shape of exactly 1 for any s
    x = lf.nn.rms_norm(x, weights["norm"], eps=config.rms_norm_eps)
    head = weights["embed"] if config.tie_word_embeddings else weights["lm_head"]
    return linear(x, head), new_cache


# ---- the jitted step and its host-side inputs -------------------------------------------------
DYNAMIC_AXES = {"tokens": {0: "s"}, "positions": {0: "s"}, "scatter_idx": {0: "s"},
                "gather_idx": {0: "c"}, "mask": {0: "s", 1: "c"}}


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def bucket_limits(prompt_len: int, max_new_tokens: int, max_seq_len: int) -> tuple:
    """The seed's bucket tops: (max_prefill, max_context), powers of two capped at max_seq_len."""
    max_prefill = min(_next_pow2(prompt_len + 16), max_seq_len)
    max_context = min(_next_pow2(prompt_len + max_new_tokens + 1), max_seq_len)
    return max_prefill, max_context


def dim_buckets(max_prefill: int, max_context: int) -> dict:
    """The seed's buckets: decode (1) apart from prefill (2..max), searched at min(16, max)."""
    def one(hi):
        if hi < 2:
            return [(1, 1)]
        return [(1, 1), (2, hi, max(2, min(16, hi)))]

    return {"s": one(max_prefill), "c": one(max_context)}


def representative_dims(buckets: dict) -> tuple:
    """(s, c) at which the warm-up step runs: the prefill bucket's representatives, as the seed."""
    def rep(bs):
        last = bs[-1]
        return last[2] if len(last) > 2 else last[0]

    return rep(buckets["s"]), rep(buckets["c"])


def greedy_token(logits):
    """The last logits row's argmax as a (1,) int32 array: the next step's tokens as they are."""
    return lnp.argmax(logits[-1]).astype(lnp.int32).reshape(1)


STEP_OUTPUTS = ("logits", "greedy")


def make_step(config: LlamaConfig, *, backend=None, buckets=None, search=None, all_logits=False,
              contiguous_cache: bool = True, output: str = "logits"):
    """The model step jitted once: dynamic s and c, donated cache. ``contiguous_cache=False``
    takes the seed's ``gather_idx`` argument (see the module docstring). ``output="greedy"``
    returns (greedy_token(logits), cache) instead of (logits, cache): the pick runs inside the
    step's own graph, so a greedy decode loop queues one call a token, not two."""
    if output not in STEP_OUTPUTS:
        raise ValueError(f"make_step: output must be one of {STEP_OUTPUTS}, got {output!r}")

    def finish(logits, cache):
        return (greedy_token(logits), cache) if output == "greedy" else (logits, cache)

    if contiguous_cache:
        def llama_step(weights, tokens, positions, scatter_idx, mask, cache):
            return finish(*forward(weights, tokens, positions, scatter_idx, None, mask, cache, config,
                                   all_logits=all_logits))

        axes = {k: v for k, v in DYNAMIC_AXES.items() if k != "gather_idx"}
        return lf.jit(llama_step, dynamic_axes=axes, buckets=buckets, search=search,
                      backend=backend, donate_argnames="cache")

    def llama_gather_step(weights, tokens, positions, scatter_idx, gather_idx, mask, cache):
        return finish(*forward(weights, tokens, positions, scatter_idx, gather_idx, mask, cache, config,
                               all_logits=all_logits))

    return lf.jit(llama_gather_step, dynamic_axes=DYNAMIC_AXES, buckets=buckets, search=search,
                  backend=backend, donate_argnames="cache")


def sample_token(logits, u, seen=None, *, k: int, temperature: float, top_p: float = 1.0,
                 penalty: float = 1.0):
    """A draw from the last logits row as a (1,) int32 token, its filters in Hugging Face's
    order: the seed's repetition penalty on the tokens in ``seen`` ((vocab,) bool; not read, and
    may be None, for a penalty of 1), the temperature, the k largest logits (jax.lax.top_k's
    order: among ties the lower token first), then the fewest of those, most likely first, whose
    probability reaches ``top_p`` (nucleus sampling; 1.0 keeps all k). The draw inverts the kept
    tokens' cumulative probability at ``u`` ((1,) float32, uniform in [0, 1), drawn by the
    caller): one number crosses to the device a token, not k of noise."""
    row = logits[-1]
    if penalty != 1.0:
        row = lnp.where(seen, lnp.where(row > 0, row / penalty, row * penalty), row)
    vals, idx = lnp.top_k(row, k)
    p = lnp.exp((vals - vals[0]) / temperature)  # unnormalised: the most likely token's is 1
    cum = lnp.cumsum(p)
    if top_p < 1.0:
        # a token stays while the probability before it is below top_p (the first always does)
        kept = lnp.sum((cum - p) < top_p * cum[-1])
        total = lnp.take(cum, kept - 1)
    else:
        kept, total = k, cum[-1]
    pick = lnp.minimum(lnp.sum(cum <= u * total), kept - 1)
    return lnp.take(idx, pick).astype(lnp.int32).reshape(1)


def make_sampler(k: int, temperature: float, top_p: float = 1.0, penalty: float = 1.0, *,
                 backend=None, search=None, buckets=None):
    """sample_token jitted once (its logits' rows a dynamic dim): (logits, u, seen) -> token;
    without a penalty (logits, u), so no seen-mask is sent to the device a token."""
    s_buckets = {"s": buckets["s"]} if buckets and "s" in buckets else None
    opts = dict(k=k, temperature=temperature, top_p=top_p)
    if penalty == 1.0:
        def sample(logits, u):
            return sample_token(logits, u, **opts)
    else:
        def sample(logits, u, seen):
            return sample_token(logits, u, seen, penalty=penalty, **opts)

    return lf.jit(sample, dynamic_axes={"logits": {0: "s"}}, backend=backend, search=search,
                  buckets=s_buckets)


def make_greedy(*, backend=None, search=None, buckets=None):
    """The greedy pick on the device as a function of its own: logits (s, vocab) -> the last
    row's argmax as a (1,) int32 array (``make_step(output="greedy")`` runs it inside the step)."""
    s_buckets = {"s": buckets["s"]} if buckets and "s" in buckets else None
    return lf.jit(greedy_token, dynamic_axes={"logits": {0: "s"}}, backend=backend, search=search,
                  buckets=s_buckets)


def new_cache(config: LlamaConfig, max_seq_len: int, backend=None) -> list:
    z = np.zeros((max_seq_len, config.kv_dim), np.float32)
    return [{"k": lf.device_put(z, backend), "v": lf.device_put(z, backend)}
            for _ in range(config.num_hidden_layers)]


def causal_mask(q_pos, context_len: int) -> np.ndarray:
    """(len(q_pos), context_len) additive mask: query at position p sees context rows 0..p."""
    q = np.asarray(q_pos, np.int64)[:, None]
    return np.where(np.arange(context_len)[None, :] <= q, 0.0, MASKED).astype(np.float32)


def step_inputs(tokens, start: int, contiguous_cache: bool = True) -> tuple:
    """(tokens, positions, scatter_idx, mask) for new tokens placed at positions start.. of a
    contiguous cache, whose context is then rows 0..start+len(tokens)-1; with
    ``contiguous_cache=False`` the seed's (tokens, positions, scatter_idx, gather_idx, mask)."""
    n = len(tokens)
    pos = np.arange(start, start + n, dtype=np.int32)
    mask = causal_mask(pos, start + n)
    if contiguous_cache:
        return np.asarray(tokens, np.int32), pos, pos, mask
    return np.asarray(tokens, np.int32), pos, pos, np.arange(start + n, dtype=np.int32), mask

"""One Llama decoder layer (examples/llama's layer_forward: bfloat16 weights, float32 activations
and KV cache) on luminal_fn beside the same layer written in torch (eager, and replayed from a CUDA
graph) and in JAX (jax.jit), all in one process on the same inputs: decode (one new token after
C - 1 cached ones) and prefill (S fresh tokens). Each result is checked against a float64 NumPy
layer. Times are ms a call: the wall time of back-to-back calls ended by a device synchronisation,
so each system's host overhead a call is included, as a user calling it in a loop sees it.

    python3 benchmarks/transformer_block.py                 # Llama-3.2-1B's layer, on CUDA
    python3 benchmarks/transformer_block.py --backend numpy --tiny --calls 2   # a CPU dry run

Peers that are not installed are skipped, saying so.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import luminal_fn as lf  # noqa: E402
from llama.config import config_from_dict, llama_3_2_1b_config, rope_inv_freq  # noqa: E402
from llama.model import MASKED, layer_forward  # noqa: E402


def tiny_config():
    return config_from_dict({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "tie_word_embeddings": True, "max_position_embeddings": 256,
    }, source="transformer_block.py --tiny")


def layer_weights(cfg, seed=0) -> dict:
    """One layer's weights in the Hugging Face (out, in) layout, bfloat16; norms near 1."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    D, I, Q, KV = cfg.hidden_size, cfg.intermediate_size, cfg.q_dim, cfg.kv_dim
    shapes = {"q": (Q, D), "k": (KV, D), "v": (KV, D), "o": (D, Q), "gate": (I, D), "up": (I, D), "down": (D, I)}
    p = {k: (rng.standard_normal(s, np.float32) / math.sqrt(s[1])).astype(ml_dtypes.bfloat16)
         for k, s in shapes.items()}
    for k in ("attn_norm", "mlp_norm"):
        p[k] = rng.uniform(0.8, 1.2, D).astype(np.float32).astype(ml_dtypes.bfloat16)
    return p


def case_inputs(cfg, kind: str, n: int, seed=1) -> dict:
    """decode: one token at position n - 1, rows 0..n-2 of a cache of n rows already filled;
    prefill: n tokens at positions 0..n-1 into an empty cache of n rows, causal."""
    rng = np.random.default_rng(seed)
    s = 1 if kind == "decode" else n
    pos = np.arange(n - s, n, dtype=np.int32)
    ang = pos.astype(np.float32)[:, None] * rope_inv_freq(cfg).astype(np.float32)[None, :]
    cache = np.zeros((2, n, cfg.kv_dim), np.float32)
    if kind == "decode":
        cache[:, :n - 1] = rng.standard_normal((2, n - 1, cfg.kv_dim), np.float32)
    mask = np.where(np.arange(n)[None, :] <= pos[:, None], 0.0, MASKED).astype(np.float32)
    return {"x": rng.standard_normal((s, cfg.hidden_size), np.float32), "cos": np.cos(ang), "sin": np.sin(ang),
            "idx": pos, "mask": mask, "k": cache[0], "v": cache[1]}


def reference(cfg, p, a) -> np.ndarray:
    """The layer in float64 NumPy (no roundings to bfloat16 between steps)."""
    w = {k: np.asarray(v, np.float64) for k, v in p.items()}
    H, KVH, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    x = a["x"].astype(np.float64)
    s = x.shape[0]

    def norm(t, g):
        return t / np.sqrt(np.mean(t * t, -1, keepdims=True) + cfg.rms_norm_eps) * g

    def rope(t, heads):
        t = t.reshape(s, heads, d)
        c, sn = a["cos"].astype(np.float64)[:, None, :], a["sin"].astype(np.float64)[:, None, :]
        t1, t2 = t[..., :d // 2], t[..., d // 2:]
        return np.concatenate([t1 * c - t2 * sn, t2 * c + t1 * sn], -1).reshape(s, heads * d)

    h = norm(x, w["attn_norm"])
    q, k, v = rope(h @ w["q"].T, H), rope(h @ w["k"].T, KVH), h @ w["v"].T
    kc, vc = a["k"].astype(np.float64), a["v"].astype(np.float64)
    kc[a["idx"]], vc[a["idx"]] = k, v
    c = a["mask"].shape[1]
    kh = np.repeat(kc[:c].reshape(c, KVH, d), H // KVH, axis=1)
    vh = np.repeat(vc[:c].reshape(c, KVH, d), H // KVH, axis=1)
    sc = np.einsum("qhd,khd->hqk", q.reshape(s, H, d), kh) / math.sqrt(d) + a["mask"][None]
    sc = np.exp(sc - sc.max(-1, keepdims=True))
    sc /= sc.sum(-1, keepdims=True)
    x = x + np.einsum("hqk,khd->qhd", sc, vh).reshape(s, H * d) @ w["o"].T
    h = norm(x, w["mlp_norm"])
    g, u = h @ w["gate"].T, h @ w["up"].T
    return x + (g / (1 + np.exp(-g)) * u) @ w["down"].T


def time_calls(call, calls: int, sync) -> float:
    """ms a call: ``calls`` calls queued back to back after two warm-up calls."""
    call(), call()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    return (time.perf_counter() - t0) / calls * 1e3


def run_luminal(cfg, p, a, backend, search, calls):
    def block(p, x, cos, sin, idx, mask, cache):
        return layer_forward(p, x, cos, sin, idx, None, mask, cache, cfg)

    f = lf.jit(block, backend=backend, donate_argnums=(6,), search=lf.SearchOptions(limit=search))
    put = lambda v: lf.device_put(v, backend)  # noqa: E731
    pd = {k: put(v) for k, v in p.items()}
    args = [put(a[k]) for k in ("x", "cos", "sin", "idx", "mask")]
    state = {"cache": {"k": put(a["k"]), "v": put(a["v"])}}

    def call():
        out, state["cache"] = f(pd, *args, state["cache"])
        return out

    first = np.asarray(call(), np.float64)  # (the search runs on the first call)
    if backend == "cuda":
        import cupy as cp

        sync = cp.cuda.runtime.deviceSynchronize
    else:
        sync = lambda: None  # noqa: E731
    return first, time_calls(call, calls, sync)


def torch_layer(cfg, p, a):
    """(the layer as a torch function over device tensors, its inputs): bf16 products, f32 elsewhere."""
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    W = {k: torch.tensor(np.asarray(v, np.float32), device=dev).to(torch.bfloat16) for k, v in p.items()}
    T = {k: torch.tensor(v, device=dev) for k, v in a.items()}
    T["idx"] = T["idx"].long()
    H, KVH, d, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps

    def lin(h, w):
        return (h.to(torch.bfloat16) @ w.T).float()

    def norm(t, g):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * g.float()

    def rope(t, heads):
        s = t.shape[0]
        t = t.view(s, heads, d)
        c, sn = T["cos"][:, None, :], T["sin"][:, None, :]
        t1, t2 = t[..., :d // 2], t[..., d // 2:]
        return torch.cat([t1 * c - t2 * sn, t2 * c + t1 * sn], -1)

    def layer(x):
        s, c = x.shape[0], T["mask"].shape[1]
        h = norm(x, W["attn_norm"])
        q, k, v = rope(lin(h, W["q"]), H), rope(lin(h, W["k"]), KVH), lin(h, W["v"])
        T["k"].index_copy_(0, T["idx"], k.reshape(s, KVH * d))
        T["v"].index_copy_(0, T["idx"], v)
        kh = T["k"][:c].view(c, KVH, d).transpose(0, 1).repeat_interleave(H // KVH, 0)
        vh = T["v"][:c].view(c, KVH, d).transpose(0, 1).repeat_interleave(H // KVH, 0)
        att = F.scaled_dot_product_attention(q.transpose(0, 1), kh, vh, attn_mask=T["mask"])
        x = x + lin(att.transpose(0, 1).reshape(s, H * d), W["o"])
        h = norm(x, W["mlp_norm"])
        return x + lin(F.silu(lin(h, W["gate"])) * lin(h, W["up"]), W["down"])

    return layer, T["x"]


def run_torch(cfg, p, a, calls) -> dict:
    import torch

    layer, x = torch_layer(cfg, p, a)
    out = {}
    with torch.no_grad():
        first = layer(x).double().cpu().numpy()
        out["torch eager"] = (first, time_calls(lambda: layer(x), calls, torch.cuda.synchronize))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            layer(x)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = layer(x)
        graph.replay()
        torch.cuda.synchronize()
        out["torch CUDA graph"] = (y.double().cpu().numpy(), time_calls(graph.replay, calls, torch.cuda.synchronize))
    return out


def run_jax(cfg, p, a, calls):
    import jax
    import jax.numpy as jnp

    H, KVH, d, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps
    W = {k: jnp.asarray(np.asarray(v, np.float32)).astype(jnp.bfloat16) for k, v in p.items()}
    A = {k: jnp.asarray(v) for k, v in a.items()}

    def lin(h, w):
        return jnp.matmul(h.astype(jnp.bfloat16), w.T, preferred_element_type=jnp.float32).astype(
            jnp.bfloat16).astype(jnp.float32)

    def norm(t, g):
        return t * jax.lax.rsqrt(jnp.mean(t * t, -1, keepdims=True) + eps) * g.astype(jnp.float32)

    def rope(t, cos, sin, heads):
        t = t.reshape(t.shape[0], heads, d)
        t1, t2 = t[..., :d // 2], t[..., d // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return jnp.concatenate([t1 * c - t2 * s, t2 * c + t1 * s], -1)

    @jax.jit
    def layer(W, x, cos, sin, idx, mask, kc, vc):
        s, c = x.shape[0], mask.shape[1]
        h = norm(x, W["attn_norm"])
        q, k, v = rope(lin(h, W["q"]), cos, sin, H), rope(lin(h, W["k"]), cos, sin, KVH), lin(h, W["v"])
        kc, vc = kc.at[idx].set(k.reshape(s, KVH * d)), vc.at[idx].set(v)
        kh = jnp.repeat(kc[:c].reshape(c, KVH, d), H // KVH, axis=1)
        vh = jnp.repeat(vc[:c].reshape(c, KVH, d), H // KVH, axis=1)
        sc = jnp.einsum("qhd,khd->hqk", q, kh) / math.sqrt(d) + mask[None]
        att = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(sc, -1), vh).reshape(s, H * d)
        x = x + lin(att, W["o"])
        h = norm(x, W["mlp_norm"])
        return x + lin(jax.nn.silu(lin(h, W["gate"])) * lin(h, W["up"]), W["down"]), kc, vc

    args = (W, A["x"], A["cos"], A["sin"], A["idx"], A["mask"], A["k"], A["v"])
    first = np.asarray(layer(*args)[0], np.float64)
    holder = {}

    def call():
        holder["y"] = layer(*args)

    return first, time_calls(call, calls, lambda: jax.block_until_ready(holder.get("y")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--context", type=int, default=512, help="decode: the context, the new token's included")
    ap.add_argument("--prefill", type=int, default=512, help="prefill: the prompt's tokens")
    ap.add_argument("--search", type=int, default=3, help="candidates the search times")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--tiny", action="store_true", help="a tiny layer (for a CPU dry run)")
    ap.add_argument("--peers", default="torch,jax", help="peers to time (on CUDA): torch, jax")
    ap.add_argument("--json", default="", help="write the rows here")
    args = ap.parse_args()
    cfg = tiny_config() if args.tiny else llama_3_2_1b_config()
    p = layer_weights(cfg)
    rows = []
    for kind, n in (("decode", args.context), ("prefill", args.prefill)):
        a = case_inputs(cfg, kind, n)
        want = reference(cfg, p, a)
        scale = max(float(np.abs(want).max()), 1e-9)
        results = {"luminal_fn": run_luminal(cfg, p, a, args.backend, args.search, args.calls)}
        if args.backend == "cuda":
            for peer, fn in (("torch", run_torch), ("jax", run_jax)):
                if peer not in args.peers.split(","):
                    continue
                try:
                    got = fn(cfg, p, a, args.calls)
                except ImportError as e:
                    print(f"{peer}: not installed here ({e}); skipped")
                    continue
                results.update(got if isinstance(got, dict) else {"JAX jit": got})
        ours = results["luminal_fn"][1]
        what = (f"decode, 1 token after {n - 1}" if kind == "decode" else f"prefill, {n} tokens")
        print(f"{cfg.hidden_size}-wide layer ({cfg.num_attention_heads} heads, {cfg.num_key_value_heads} kv heads, "
              f"MLP {cfg.intermediate_size}), {what}:")
        for name, (out, ms) in results.items():
            err = float(np.abs(np.asarray(out, np.float64).reshape(want.shape) - want).max()) / scale
            print(f"  {name:18s} {ms:8.4f} ms   {ms / ours:5.2f}x luminal_fn's time   max error {err:.1e} of max |y|")
            rows.append({"case": kind, "n": n, "system": name, "ms": ms, "rel_err": err})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

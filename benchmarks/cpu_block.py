"""A jitted MLP + attention block on the CPU: luminal_fn (NumPy backend, searched) vs the same code
in NumPy eager and in jax.jit, timed in one run (issue 3, item 11).

Block: x (256, 256); single-head attention (q, k, v, o projections, softmax), residual, layer
norm, MLP 256 -> 1024 -> 256 with GELU (tanh form), residual, layer norm. float32.

    python benchmarks/cpu_block.py [--repeats 200]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

N, D, H = 256, 256, 1024


def make_params(seed=0):
    rng = np.random.default_rng(seed)
    p = {k: (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32) for k in ("wq", "wk", "wv", "wo")}
    p["w1"] = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    p["b1"] = (0.1 * rng.standard_normal(H)).astype(np.float32)
    p["w2"] = (rng.standard_normal((H, D)) / np.sqrt(H)).astype(np.float32)
    p["b2"] = (0.1 * rng.standard_normal(D)).astype(np.float32)
    for k in ("g1", "g2"):
        p[k] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    return p, rng.standard_normal((N, D)).astype(np.float32)


def block(xp, p, x):
    """The block written once against a NumPy-like namespace ``xp`` (numpy, jax.numpy or lnp)."""
    def norm(h, g):
        mu = xp.mean(h, axis=-1, keepdims=True)
        var = xp.mean((h - mu) * (h - mu), axis=-1, keepdims=True)
        return (h - mu) / xp.sqrt(var + 1e-5) * g

    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    s = (q @ k.T) * float(1.0 / np.sqrt(D))  # a Python float: an np.float64 would promote
    s = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
    a = (s / xp.sum(s, axis=-1, keepdims=True)) @ v
    h = norm(x + a @ p["wo"], p["g1"])
    u = h @ p["w1"] + p["b1"]
    u = 0.5 * u * (1.0 + xp.tanh(0.7978845608 * (u + 0.044715 * u * u * u)))
    return norm(h + u @ p["w2"] + p["b2"], p["g2"])


def timeit(fn, repeats):
    fn()
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--search", type=int, default=100, help="candidates the search times")
    args = ap.parse_args()
    p, x = make_params()
    rows = []
    ref = block(np, {k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64))

    t_np = timeit(lambda: block(np, p, x), args.repeats)
    rows.append(("NumPy eager", t_np, np.abs(block(np, p, x) - ref).max()))

    import luminal_fn as lf
    import luminal_fn.numpy as lnp

    f = lf.jit(lambda p, x: block(lnp, p, x), backend="numpy",
               search=lf.SearchOptions(limit=args.search, cache=False))  # a fresh search each run
    t0 = time.perf_counter()
    out = np.asarray(f(p, x))
    t_compile = time.perf_counter() - t0
    xa = lf.device_put(x, "numpy")
    pa = {k: lf.device_put(v, "numpy") for k, v in p.items()}
    t_lf = timeit(lambda: f(pa, xa), args.repeats)
    rows.append((f"luminal_fn jit (numpy backend, first call {t_compile:.1f} s)", t_lf,
                 np.abs(out - ref).max()))

    try:
        import jax
        import jax.numpy as jnp

        jf = jax.jit(lambda p, x: block(jnp, p, x))
        pj = {k: jax.device_put(v) for k, v in p.items()}
        xj = jax.device_put(x)
        outj = np.asarray(jf(pj, xj))
        t_jax = timeit(lambda: jf(pj, xj).block_until_ready(), args.repeats)
        rows.append((f"jax.jit {jax.__version__} (CPU)", t_jax, np.abs(outj - ref).max()))
    except ImportError:
        t_jax = None
        rows.append(("jax.jit: jax not installed", float("nan"), float("nan")))

    print(f"# MLP + attention block, x {N}x{D}, hidden {H}, float32; {time.strftime('%Y-%m-%d')}, "
          f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}; median of "
          f"{args.repeats}")
    print(f"| system | ms per call | vs NumPy eager | vs jax.jit | max abs err vs float64 |")
    print("| --- | --- | --- | --- | --- |")
    for name, t, err in rows:
        vs_jax = f"{t / t_jax:.2f}x" if t_jax else "-"
        print(f"| {name} | {t * 1e3:.3f} | {t / t_np:.2f}x | {vs_jax} | {err:.1e} |")
    # what the search kept: tells a slower pick from a load burst during the timing
    (cost,) = f.compiled()[0].cost().values()
    print(f"# luminal_fn plan: {cost['kernels']} kernels; the search timed it at "
          f"{cost['best_time_s'] * 1e3:.3f} ms ({cost['candidates']} candidates, "
          f"{cost['search_s']:.1f} s)")


if __name__ == "__main__":
    main()

"""A jitted MLP + attention block on the CPU: luminal_fn (NumPy backend, searched) vs the same code
in NumPy eager and in jax.jit, timed in one run (issue 3, item 11).

Block: x (256, 256); single-head attention (q, k, v, o projections, softmax), residual, layer
norm, MLP 256 -> 1024 -> 256 with GELU (tanh form), residual, layer norm. float32.

    python benchmarks/cpu_block.py [--repeats 200] [--rounds 10] [--search 100]
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


def time_interleaved(fns: dict, repeats: int, rounds: int) -> dict:
    """Median seconds per call of each function, timed in ``rounds`` rounds that each run every
    function ``repeats // rounds`` times in turn, so a slow spell of the machine (other tenants of
    a VM) lands on all of them instead of on whichever was being timed."""
    for fn in fns.values():
        fn()
        fn()
    per = max(1, repeats // rounds)
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def arena_ab(f, call, repeats, rounds) -> str:
    """The kept plan timed with its arena (buffers reused from call to call) and with every step
    allocating its result, interleaved."""
    (compiled,) = f.compiled()
    (entry,) = compiled.runner.plans.values()
    plan = entry.executable.plan
    arenas = plan._arenas

    class Allocating:  # every step gets no buffers: the plan's behaviour before the arena
        def take(self):
            return [None] * len(plan.steps)

        def give(self, arena):
            pass

    def with_pool(pool):
        def run():
            plan._arenas = pool
            call()
        return run

    t = time_interleaved({"on": with_pool(arenas), "off": with_pool(Allocating())}, repeats, rounds)
    plan._arenas = arenas
    return (f"# arena A/B ({plan.layout.nbytes / 1e6:.1f} MB in {len(plan.layout.sizes)} buffers): "
            f"on {t['on'] * 1e3:.3f} ms, off {t['off'] * 1e3:.3f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--search", type=int, default=100, help="candidates the search times")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds the repeats are split into")
    ap.add_argument("--arena-ab", action="store_true",
                    help="also time the kept plan with its arena of reused buffers on and off")
    args = ap.parse_args()
    p, x = make_params()
    ref = block(np, {k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64))
    fns, errs, names = {}, {}, {}
    fns["eager"] = lambda: block(np, p, x)
    errs["eager"], names["eager"] = np.abs(block(np, p, x) - ref).max(), "NumPy eager"

    import luminal_fn as lf
    import luminal_fn.numpy as lnp

    f = lf.jit(lambda p, x: block(lnp, p, x), backend="numpy",
               search=lf.SearchOptions(limit=args.search, cache=False))  # a fresh search each run
    t0 = time.perf_counter()
    out = np.asarray(f(p, x))
    t_compile = time.perf_counter() - t0
    xa = lf.device_put(x, "numpy")
    pa = {k: lf.device_put(v, "numpy") for k, v in p.items()}
    fns["lf"] = lambda: f(pa, xa)
    errs["lf"] = np.abs(out - ref).max()
    names["lf"] = f"luminal_fn jit (numpy backend, first call {t_compile:.1f} s)"

    try:
        import jax
        import jax.numpy as jnp

        jf = jax.jit(lambda p, x: block(jnp, p, x))
        pj = {k: jax.device_put(v) for k, v in p.items()}
        xj = jax.device_put(x)
        fns["jax"] = lambda: jf(pj, xj).block_until_ready()
        errs["jax"] = np.abs(np.asarray(jf(pj, xj)) - ref).max()
        names["jax"] = f"jax.jit {jax.__version__} (CPU)"
    except ImportError:
        names["jax"] = "jax.jit: jax not installed"

    t = time_interleaved(fns, args.repeats, args.rounds)
    t_np, t_jax = t["eager"], t.get("jax")
    rows = [(names[k], t.get(k, float("nan")), errs.get(k, float("nan"))) for k in ("eager", "lf", "jax")]
    print(f"# MLP + attention block, x {N}x{D}, hidden {H}, float32; {time.strftime('%Y-%m-%d')}, "
          f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}; median of "
          f"{args.repeats} calls each, interleaved in {args.rounds} rounds")
    print(f"| system | ms per call | vs NumPy eager | vs jax.jit | max abs err vs float64 |")
    print("| --- | --- | --- | --- | --- |")
    for name, t, err in rows:
        vs_jax = f"{t / t_jax:.2f}x" if t_jax else "-"
        print(f"| {name} | {t * 1e3:.3f} | {t / t_np:.2f}x | {vs_jax} | {err:.1e} |")
    if args.arena_ab:
        print(arena_ab(f, lambda: f(pa, xa), args.repeats, args.rounds))
    # what the search kept: tells a slower pick from a load burst during the timing
    (cost,) = f.compiled()[0].cost().values()
    print(f"# luminal_fn plan: {cost['kernels']} kernels; the search timed it at "
          f"{cost['best_time_s'] * 1e3:.3f} ms ({cost['candidates']} candidates, "
          f"{cost['search_s']:.1f} s); 1-minute load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

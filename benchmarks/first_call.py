"""Seconds of a first call (trace, e-graph, search, compile, run) of functions whose search
explores long chains: cumsum along a static axis (doubling steps, each a shifted read), the
Llama example's sampler over a vocabulary row (top_k, then a cumsum of the k kept
probabilities), and gcd / lcm (48 Euclid steps, each a where and a remainder). Each call runs
with a fresh search cache (and a fresh cache of compiled CUDA kernels, $CUPY_CACHE_DIR) in a
process of its own; ``--second`` then starts a second process on those caches and times its
first call too (the search answered by the cache, the kernels loaded from disk).

    python benchmarks/first_call.py [--backend numpy] [--limit 100] [--second]

To compare two commits, run it with PYTHONPATH at a checkout of each."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

TIMEOUT_S = 900
CASES = ["cumsum 1024", "cumsum 4096", "cumsum 16384", "cumsum 128256", "sampler 50 0.9", "sampler 128256 0.9",
         "gcd 1000", "lcm 1000"]

CHILD = r"""
import json, os, sys, time
import numpy as np
import luminal_fn as lf
import luminal_fn.numpy as lnp
kind, *args = sys.argv[1].split()
backend, limit = sys.argv[2], int(sys.argv[3])
search = lf.SearchOptions(limit=limit)
if kind == "cumsum":
    n = int(args[0])
    x = np.random.default_rng(0).standard_normal((1, n)).astype(np.float32)
    f = lf.jit(lambda a: lnp.cumsum(a[-1]), backend=backend, search=search)
    t0 = time.perf_counter()
    got = np.asarray(f(x))
    seconds = time.perf_counter() - t0
    err = float(np.max(np.abs(got - np.cumsum(x[-1].astype(np.float64)))))
elif kind in ("gcd", "lcm"):
    a = np.arange(1, int(args[0]) + 1, dtype=np.int32)
    b = (a * 7 + 3) % 500 + 1
    f = lf.jit(getattr(lnp, kind), backend=backend, search=search)
    t0 = time.perf_counter()
    got = np.asarray(f(a, b))
    seconds = time.perf_counter() - t0
    err = float(np.max(np.abs(got.astype(np.int64) - getattr(np, kind)(a, b))))
else:
    sys.path.insert(0, os.path.join(sys.argv[4], "examples"))
    from llama import model
    k, top_p = int(args[0]), float(args[1])
    # (the example is this checkout's at every commit timed: only the library changes)
    fn = model.make_sampler(k, 0.8, top_p, 1.1, backend=backend, search=search)
    l = np.random.default_rng(0).standard_normal((1, 128256)).astype(np.float32)
    t0 = time.perf_counter()
    np.asarray(fn(l, np.float32([0.5]), np.zeros(128256, bool)))
    seconds, err = time.perf_counter() - t0, 0.0
print(json.dumps({"seconds": seconds, "err": err}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--limit", type=int, default=100, help="SearchOptions(limit=...): candidates timed")
    ap.add_argument("--second", action="store_true", help="also time a second process's first call on "
                    "the first one's caches")
    ap.add_argument("--cases", default=None, help="comma-separated kinds to run (cumsum, sampler, gcd, "
                    "lcm; default: all)")
    args = ap.parse_args()
    kinds = None if args.cases is None else set(args.cases.split(","))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    second = " | second process's first call s" if args.second else ""
    print(f"| {args.backend}, search limit {args.limit} | first call s{second} | max abs error |")
    print("| --- | --- | --- |" + (" --- |" if args.second else ""))
    for case in CASES:
        if kinds is not None and case.split()[0] not in kinds:
            continue
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, LUMINAL_CACHE_DIR=cache, CUPY_CACHE_DIR=os.path.join(cache, "cupy"))
            runs = []
            for _ in range(2 if args.second else 1):
                # (run in the cache folder: a child started here would import this checkout's
                # luminal_fn before one on PYTHONPATH)
                try:
                    out = subprocess.run([sys.executable, "-c", CHILD, case, args.backend, str(args.limit), repo],
                                         env=env, cwd=cache, capture_output=True, text=True, timeout=TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    runs.append(f"> {TIMEOUT_S} (stopped)")
                    break
                if out.returncode:
                    runs.append("failed: " + out.stderr.strip().splitlines()[-1][:120])
                    break
                r = json.loads(out.stdout.strip().splitlines()[-1])
                runs.append(f"{r['seconds']:.2f}")
        err = f"{r['err']:.2g}" if len(runs) and runs[-1][0].isdigit() else ""
        print(f"| {case} | {' | '.join(runs)} | {err} |", flush=True)


if __name__ == "__main__":
    main()

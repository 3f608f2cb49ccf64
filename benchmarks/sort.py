"""lnp.sort / argsort beside the backend's peers (medians of --reps calls).

    python benchmarks/sort.py [--reps 15]                 # NumPy backend, NumPy's sorts beside
    python3 benchmarks/sort.py --backend cuda             # CUDA, cupy.sort / argsort beside

A second table times lnp.top_k (one descending argsort and a gather of the k first) beside
torch.topk on CUDA, NumPy's argpartition-then-argsort idiom on the NumPy backend.

Each jitted call runs the backend's sort_rows / argsort_rows kernel (ir/composites.py). NumPy's
stable sort gives the same order; the default (unstable) sorts of NumPy and CuPy the same values
up to which of +0.0 / -0.0 (or of two NaN payloads) comes first, and other positions for ties."""
from __future__ import annotations

import argparse
import time

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp

SHAPES = [(1000,), (16000,), (1_000_000,), (512, 1024), (1, 128256), (64, 2048)]


def median_ms(fn, reps: int, sync=lambda: None) -> float:
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--backend", default="numpy", choices=["numpy", "cuda"])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.backend == "cuda":
        import cupy as cp

        sync, put = cp.cuda.Device().synchronize, cp.asarray
        peers = {"cupy.sort": lambda x: cp.sort(x, axis=-1), "cupy.argsort": lambda x: cp.argsort(x, axis=-1)}
    else:
        sync, put = (lambda: None), np.asarray
        peers = {"np.sort stable": lambda x: np.sort(x, kind="stable"),
                 "np.argsort stable": lambda x: np.argsort(x, kind="stable"),
                 "np.sort default": lambda x: np.sort(x)}
    print(f"| input ({args.backend}) | lnp.sort | lnp.argsort | " + " | ".join(peers) + " |")
    print("| --- " * (3 + len(peers)) + "|")
    for shape in SHAPES:
        x = put(rng.standard_normal(shape).astype(np.float32))
        search = lf.SearchOptions(limit=4)
        sort = lf.jit(lambda a: lnp.sort(a), backend=args.backend, search=search)
        argsort = lf.jit(lambda a: lnp.argsort(a), backend=args.backend, search=search)
        row = [median_ms(lambda: sort(x), args.reps, sync), median_ms(lambda: argsort(x), args.reps, sync)]
        row += [median_ms(lambda: f(x), args.reps, sync) for f in peers.values()]
        print(f"| {shape} float32 | " + " | ".join(f"{v:.3f}" for v in row) + " |", flush=True)
    top_k_table(args, rng, sync, put)


def _np_top_k(x, k):
    part = np.argpartition(-x, k - 1, axis=-1)[..., :k]
    vals = np.take_along_axis(x, part, -1)
    order = np.argsort(-vals, axis=-1, kind="stable")
    return np.take_along_axis(vals, order, -1), np.take_along_axis(part, order, -1)


def top_k_table(args, rng, sync, put):
    if args.backend == "cuda":
        import torch

        peer_name, peer = "torch.topk", lambda x, k: torch.topk(torch.as_tensor(x, device="cuda"), k)
    else:
        peer_name, peer = "np.argpartition + argsort", _np_top_k
    print(f"\n| input ({args.backend}), k | lnp.top_k | {peer_name} |")
    print("| --- | --- | --- |")
    for shape, k in (((1, 128256), 50), ((64, 32000), 40), ((512, 1024), 8)):
        x = put(rng.standard_normal(shape).astype(np.float32))
        f = lf.jit(lambda a, k=k: lnp.top_k(a, k), backend=args.backend, search=lf.SearchOptions(limit=4))
        row = [median_ms(lambda: f(x), args.reps, sync), median_ms(lambda: peer(x, k), args.reps, sync)]
        print(f"| {shape} float32, k={k} | " + " | ".join(f"{v:.3f}" for v in row) + " |", flush=True)


if __name__ == "__main__":
    main()

"""cumsum / cumprod: the scan_rows kernel (ir/composites.py) against the front end's primitives
(Hillis-Steele steps along a static axis; along a dynamic one a masked n^2 triangle for cumsum)
and the backend's own peer, medians of --reps calls.

    python benchmarks/scan.py [--reps 15]                  # NumPy backend, np.cumsum beside
    python3 benchmarks/scan.py --backend cuda              # CUDA, cupy.cumsum beside

Each row extracts the graph twice from one e-graph: with the backend's kernels (the kernel) and
without scan_rows (the primitives), compiles each for the backend and times its run."""
from __future__ import annotations

import argparse

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor
from sort import median_ms  # (benchmarks/sort.py: this folder is the script's path)

DYN = {"a": {1: "n"}}
CASES = [("cumsum", (1, 128256), None), ("cumsum", (512, 1024), None), ("cumsum", (4096, 4096), None),
         ("cumprod", (512, 1024), None), ("cumsum", (8, 4096), DYN), ("cumsum", (1, 1_000_000), DYN),
         ("cumsum", (4, 128256), DYN), ("cummax", (512, 1024), None), ("cummax", (1, 128256), DYN)]
TRIANGLE_MAX = 8192  # a dynamic axis's primitives are an n^2 triangle: not timed past this


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--backend", default="numpy", choices=["numpy", "cuda"])
    args = ap.parse_args()
    be = get_backend(args.backend)
    if args.backend == "cuda":
        import cupy as cp

        sync, peer_name = cp.cuda.Device().synchronize, "cupy"
        # (cupy has no maximum.accumulate: no peer for cummax)
        peer = (lambda op, x: None if op == "cummax" else getattr(cp, op)(x, axis=-1))
    else:
        sync, peer_name = (lambda: None), "NumPy"
        peer = (lambda op, x: np.maximum.accumulate(x, axis=-1) if op == "cummax" else getattr(np, op)(x, axis=-1))
    rng = np.random.default_rng(0)
    print(f"| {args.backend}: op, shape | scan_rows kernel ms | primitives ms | {peer_name} ms |")
    print("| --- | --- | --- | --- |")
    for op, shape, axes in CASES:
        x = rng.uniform(0.999, 1.001, shape).astype(np.float32)
        traced = lf.jit(lambda a, op=op: getattr(lnp, op)(a, axis=-1), dynamic_axes=axes).trace(x)
        eg = build_egraph(traced.hlir)
        dims = {"n": shape[1]} if axes else {}
        row = []
        xp = be.from_numpy(x)
        for kinds in (be.kernel_kinds, be.kernel_kinds - {"scan_rows"}):
            if axes and kinds != be.kernel_kinds and shape[1] > TRIANGLE_MAX:
                row.append(None)
                continue
            exe = be.compile(Extractor(eg, traced.hlir, kernel_kinds=kinds).extract())
            row.append(median_ms(lambda: exe.run([xp], dims), args.reps, sync))
        row.append(None if peer(op, xp) is None else median_ms(lambda: peer(op, xp), args.reps, sync))
        label = f"{op} {shape}" + (" (dynamic n)" if axes else "")
        print(f"| {label} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in row) + " |", flush=True)


if __name__ == "__main__":
    main()

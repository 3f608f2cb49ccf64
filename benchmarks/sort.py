"""lnp.sort / argsort on the NumPy backend beside NumPy's own sorts (medians of --reps calls).

    python benchmarks/sort.py [--reps 15]

Each jitted call runs the backend's sort_rows / argsort_rows kernel (ir/composites.py); NumPy's
stable sort gives the same order, its default (unstable) sort the same values up to which of
+0.0 / -0.0 (or of two NaN payloads) comes first."""
from __future__ import annotations

import argparse
import time

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp


def median_ms(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.asarray(fn())
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| input | lnp.sort | lnp.argsort | np.sort stable | np.argsort stable | np.sort default |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shape in [(1000,), (16000,), (1_000_000,), (512, 1024)]:
        x = rng.standard_normal(shape).astype(np.float32)
        sort, argsort = lf.jit(lambda a: lnp.sort(a)), lf.jit(lambda a: lnp.argsort(a))
        sort(x), argsort(x)  # (compile)
        row = [median_ms(lambda: sort(x), args.reps), median_ms(lambda: argsort(x), args.reps),
               median_ms(lambda: np.sort(x, kind="stable"), args.reps),
               median_ms(lambda: np.argsort(x, kind="stable"), args.reps),
               median_ms(lambda: np.sort(x), args.reps)]
        print(f"| {shape} float32 | " + " | ".join(f"{v:.3f}" for v in row) + " |")


if __name__ == "__main__":
    main()

"""Where a Llama-1B decode step spends its GPU time on the CUDA backend: the step's median wall
time, whether it replays as one CUDA graph, and the slowest kernels timed one by one.

    python benchmarks/cuda_step_profile.py [--dtype bfloat16] [--context 40] [--top 12]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import luminal_fn as lf  # noqa: E402
from llama.checkpoint import random_weights  # noqa: E402
from llama.config import llama_3_2_1b_config  # noqa: E402
from llama.model import make_step, new_cache, step_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--context", type=int, default=40)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--search", type=int, default=2)
    args = ap.parse_args()
    import cupy as cp

    cfg = llama_3_2_1b_config()
    w = random_weights(cfg, args.dtype, backend="cuda")
    step = make_step(cfg, backend="cuda", buckets={"s": [(1, 1), (2, 64, 16)], "c": [(1, 1), (2, 512, 16)]},
                     search=lf.SearchOptions(limit=args.search))
    cache = new_cache(cfg, 512, backend="cuda")
    _, cache = step(w, *step_inputs(list(range(32)), 0), cache)
    decode = step_inputs([5], args.context - 1)
    for _ in range(3):
        _, cache = step(w, *decode, cache)
    cp.cuda.runtime.deviceSynchronize()
    ts = []
    for _ in range(20):
        t0 = time.perf_counter()
        _, cache = step(w, *decode, cache)
        cp.cuda.runtime.deviceSynchronize()
        ts.append(time.perf_counter() - t0)
    print(f"decode step (s=1, c={args.context}) median {sorted(ts)[10] * 1e3:.3f} ms over 20")
    (compiled,) = step.compiled()
    plan = next(p for p in compiled.runner.plans.values() if p.dims.get("s") == 1 and p.dims.get("c") != 1)
    exe = plan.executable
    b = exe._last_bucket
    hosts = [it[1] for it in b.launches if it[0] == "h"]
    print(f"CUDA graph: {bool(b.graph)} (capture error {exe.capture_error}); {len(b.launches)} launches, "
          f"{len(hosts)} host steps {[getattr(h, 'label', '?') for h in hosts[:4]]}")
    stream = cp.cuda.get_current_stream()
    rows = []
    for it in b.launches:
        if it[0] != "k":
            continue
        _, fn, grid, block, kargs, shm = it
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        fn(grid, block, kargs, shared_mem=shm)
        e1.record(stream)
        e1.synchronize()
        rows.append((cp.cuda.get_elapsed_time(e0, e1), getattr(fn, "name", "?"), grid, block))
    rows.sort(key=lambda r: -r[0])
    print(f"kernels one by one: {sum(r[0] for r in rows):.3f} ms in {len(rows)} launches; slowest:")
    for ms, name, grid, block in rows[:args.top]:
        print(f"  {ms * 1e3:9.1f} us  {name}  grid {grid} block {block}")


if __name__ == "__main__":
    main()

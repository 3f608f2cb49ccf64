"""What a call's parameter-table upload costs on the device, beside the captured graph it feeds
(Llama-1B decode step, CUDA): the graph replayed alone, after the table's asynchronous copy from
pinned memory (what a call queues today), after a one-block kernel that reads the pinned table
through its mapped address and writes it to the device, after an empty kernel (the launch
boundary alone), and with that read as the graph's own first kernel (a ring of pinned slots, a
device counter picking the slot: a design tried here, not in the backend). Each variant is queued
n times between events, the variants interleaved. H200 run CJ (docs/benchmarks.md): the copy
+9.3 us a step, the kernel's read +8.3, the in-graph read +6.1, an empty kernel +2.9.

    python benchmarks/table_upload.py [--dtype bfloat16] [--n 20] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_step_profile  # noqa: E402

LOADER = r"""
extern "C" __global__ void copy_table(const unsigned long long src, long long* __restrict__ dst, int n) {
  const volatile long long* s = (const volatile long long*)src;
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = s[i];
}
extern "C" __global__ void nothing() {}
// the table of the call the device counter says, from a ring of pinned slots, then the count
extern "C" __global__ void copy_table_ring(const unsigned long long ring, long long* __restrict__ dst,
                                           int n, int slots, int* counter) {
  __shared__ int slot;
  if (threadIdx.x == 0) slot = *counter % slots;
  __syncthreads();
  const volatile long long* s = (const volatile long long*)ring + (long long)slot * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = s[i];
  __syncthreads();
  if (threadIdx.x == 0) *counter += 1;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import cupy as cp

    step_args = argparse.Namespace(dtype=args.dtype, prefill=0, max_seq_len=512, context_bucket=0,
                                   context=40, search=3, model="llama", host_profile=0)
    exe = cuda_step_profile.llama_bucket(step_args, cp)
    b = exe._last_bucket
    (g,) = list(b.graphs.values())[-1:]
    stream = cp.cuda.get_current_stream()
    module = cp.RawModule(code=LOADER)
    loader, nothing = module.get_function("copy_table"), module.get_function("nothing")
    slot = (b.slot - 1) % len(b.pinned)
    host_ptr = b.pinned[slot].ctypes.data
    n_words = len(b.pinned[slot])
    other = (slot + 1) % len(b.pinned)  # a second pinned slot: the stand-in for the inputs' upload
    scratch = cp.empty_like(b.P)
    print(f"parameter table: {n_words} words ({b.nbytes_P} bytes)")
    dims = {sym: int(b.pinned[slot][i]) for i, sym in b.sym_slots}

    # a graph whose first kernel reads the table from a ring of pinned slots (the device counts
    # the calls), captured in front of the step's launches
    import cupyx

    ring_slots = 32
    ring = cupyx.empty_pinned((ring_slots * n_words,), dtype=np.int64)
    ring.reshape(ring_slots, n_words)[:] = b.pinned[slot]
    counter = cp.zeros(1, dtype=np.int32)
    ring_loader = module.get_function("copy_table_ring")
    cap = exe.capture_stream
    first = b.launches[0][1]
    pdl_first = getattr(first, "_config", None)
    if pdl_first is not None:  # the kernel after the loader must not start before it has written P
        pdl_first.num_attrs = 0
    with cap:
        cap.begin_capture()
        ring_loader((1,), (128,), (np.uint64(ring.ctypes.data), b.P, np.int32(n_words),
                                   np.int32(ring_slots), counter))
        b._launch_all(dims, b.pinned[slot])
        g_ring = cap.end_capture()
    if pdl_first is not None:
        pdl_first.num_attrs = 1

    variants = {
        "graph with the table read from a ring": lambda: g_ring.launch(stream),
        "graph alone": lambda: g.launch(stream),
        "table copy (copy engine) + graph": lambda: (
            b.P.data.copy_from_host_async(b.pinned_ptrs[slot], b.nbytes_P, stream), g.launch(stream)),
        "inputs copy + table copy + graph": lambda: (
            scratch.data.copy_from_host_async(b.pinned_ptrs[other], b.nbytes_P, stream),
            b.P.data.copy_from_host_async(b.pinned_ptrs[slot], b.nbytes_P, stream), g.launch(stream)),
        "table read by a kernel + graph": lambda: (
            loader((1,), (128,), (np.uint64(host_ptr), b.P, np.int32(n_words))), g.launch(stream)),
        "empty kernel + graph": lambda: (nothing((1,), (32,), ()), g.launch(stream)),
    }
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    results = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, call in variants.items():
            call()
            stream.synchronize()
            e0.record(stream)
            for _ in range(args.n):
                call()
            e1.record(stream)
            e1.synchronize()
            results[name].append(1e3 * cp.cuda.get_elapsed_time(e0, e1) / args.n)
    base = min(results["graph alone"])
    for name, ts in results.items():
        print(f"{name:36s} {' '.join(f'{t:7.1f}' for t in ts)} us a step  (best {min(ts) - base:+.1f} us "
              "against the graph alone)")


if __name__ == "__main__":
    main()

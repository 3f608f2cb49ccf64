"""Kernel figures of the CUDA backend on the GPU (a benchmark, not a test).

    python benchmarks/cuda_kernels.py [--out DIR] [--quick]

Times, with CUDA events, through the backend's own executables (LLIR graphs built directly):
an elementwise chain (GB/s vs the device-to-device copy), softmax and RMS norm rows (hand
kernels), GEMV decode shapes (bf16 / fp32, fraction of copy bandwidth, beside cupy.matmul), a GEMM
through the cuBLAS lowering vs cupy.matmul alone, and a 100-kernel step (CUDA graph replay vs
launches one by one, and the host time of one call). Prints a table and writes
cuda_kernels.md / cuda_kernels.json under --out (default $OUT or the current folder).
Each row also checks its result against NumPy (max abs error).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from luminal_fn.backends import get_backend  # noqa: E402
from luminal_fn.ir import dtypes as dt  # noqa: E402
from luminal_fn.ir.view import View  # noqa: E402

import cuda_cases as C  # noqa: E402

ROWS: list = []


def timed(fn, iters=20, warm=3):
    import cupy as cp

    for _ in range(warm):
        fn()
    s = cp.cuda.get_current_stream()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record(s)
    for _ in range(iters):
        fn()
    b.record(s)
    b.synchronize()
    return cp.cuda.get_elapsed_time(a, b) / 1e3 / iters


def row(what, seconds, nbytes=None, flops=None, ref=None, note="", err=None):
    r = {"what": what, "ms": seconds * 1e3}
    if nbytes:
        r["GB/s"] = nbytes / seconds / 1e9
    if flops:
        r["TFLOP/s"] = flops / seconds / 1e12
    if ref:
        r["ref_ms"] = ref * 1e3
    if err is not None:
        r["max_err"] = float(err)
    r["note"] = note
    ROWS.append(r)
    print(json.dumps(r), flush=True)
    return r


def guarded(fn):
    def wrap(*a, **k):
        try:
            fn(*a, **k)
        except Exception as e:
            traceback.print_exc()
            ROWS.append({"what": fn.__name__, "ms": float("nan"), "note": f"FAILED: {type(e).__name__}: {e}"[:200]})
    return wrap


def copy_bw(cp, n):
    a = cp.ones(n, np.float32)
    b = cp.empty_like(a)
    t = timed(lambda: cp.copyto(b, a))
    r = row(f"device copy {n * 4 >> 20} MiB", t, 2 * n * 4, note="ceiling")
    return r["GB/s"]


def run_exe(be, g, ins, dims, options=None):
    exe = be.compile(g, options)
    bufs = [be.from_numpy(x) for x in ins]
    outs = exe.run(bufs, dims)
    return exe, bufs, outs


def np_ref(g, ins, dims):
    from luminal_fn.backends.numpy import NumpyBackend

    return NumpyBackend().compile(g).run(ins, dims)


@guarded
def elementwise(be, cp, bw, n):
    b = C.B()
    x = b.input((n,))
    d = "float32"
    # x * sigmoid(x) + 1 with sigmoid = 1 / (1 + 2^(-x log2 e))
    sig = ("Recip", d, ("Add", d, ("const", 1.0, d), ("Exp2", d, ("Mul", d, ("in", 0), ("const", -1.4426950408889634, d)))))
    y = b.custom("fused", [b.c(x)], (n,), dt.float32, expr=("Add", d, ("Mul", d, ("in", 0), sig), ("const", 1.0, d)))
    b.output(y)
    xs = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    exe, bufs, outs = run_exe(be, b.g, [xs], {})
    err = np.abs(be.to_numpy(outs[0]) - (xs / (1 + np.exp(-xs)) + 1)).max()
    t = timed(lambda: exe.run(bufs, {}))
    r = row(f"elementwise x*sigmoid(x)+1, {n >> 20}M f32", t, 2 * n * 4, err=err)
    r["note"] = f"{r['GB/s'] / bw:.2f} of copy"


def _rows_graph(kind, rows, D, d, **attrs):
    b = C.B()
    x = b.input((rows, D), d)
    ins = [b.c(x)]
    if kind == "rms_norm":
        w = b.input((D,), d)
        ins.append((w, View((rows, D), (0, 1), 0, None)))
    y = b.custom(kind, ins, (rows, D), d, **attrs)
    b.output(y)
    return b.g


@guarded
def softmax_rows(be, cp, bw, rows, D, d):
    g = _rows_graph("softmax", rows, D, d, axis=-1, scale=1.0)
    x = C.rand((rows, D), d)
    exe, bufs, outs = run_exe(be, g, [x], {})
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(-1, keepdims=True))
    err = np.abs(be.to_numpy(outs[0]).astype(np.float32) - e / e.sum(-1, keepdims=True)).max()
    t = timed(lambda: exe.run(bufs, {}))
    r = row(f"softmax rows {rows}x{D} {d.name}", t, 2 * rows * D * d.itemsize, err=err)
    r["note"] = f"{r['GB/s'] / bw:.2f} of copy (hand kernel)"


@guarded
def rms_rows(be, cp, bw, rows, D, d):
    g = _rows_graph("rms_norm", rows, D, d, eps=1e-6)
    x, w = C.rand((rows, D), d), C.rand((D,), d)
    exe, bufs, outs = run_exe(be, g, [x, w], {})
    xf = x.astype(np.float32)
    nrm = (xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)).astype(x.dtype).astype(np.float32)
    err = np.abs(be.to_numpy(outs[0]).astype(np.float32) - nrm * w.astype(np.float32)).max()
    t = timed(lambda: exe.run(bufs, {}))
    r = row(f"rms_norm rows {rows}x{D} {d.name}", t, 2 * rows * D * d.itemsize, err=err)
    r["note"] = f"{r['GB/s'] / bw:.2f} of copy (hand kernel)"


@guarded
def gemv(be, cp, bw, K, N, d, transposed=False):
    g, ins, _ = C.matmul_case(1, K, N, d, b_transposed=transposed)
    exe, bufs, outs = run_exe(be, g, ins, {})
    want = ins[0].astype(np.float32) @ (ins[1].astype(np.float32).T if transposed else ins[1].astype(np.float32))
    err = np.abs(be.to_numpy(outs[0]).astype(np.float32) - want).max() / max(np.abs(want).max(), 1e-9)
    t = timed(lambda: exe.run(bufs, {}), iters=50)
    ref = None
    if d in (dt.float32, dt.float16):
        a, w = bufs
        wv = w.T if transposed else w
        ref = timed(lambda: cp.matmul(a, wv), iters=50)
    nbytes = K * N * d.itemsize
    r = row(f"gemv 1x{K} @ {K}x{N} {d.name}{' (W^T)' if transposed else ''}", t, nbytes, ref=ref, err=err)
    r["note"] = f"{r['GB/s'] / bw:.2f} of copy; {exe.describe().splitlines()[1].strip().split(':')[0]}"


@guarded
def gemm(be, cp, bw, n, d):
    g, ins, _ = C.matmul_case(n, n, n, d)
    exe, bufs, outs = run_exe(be, g, ins, {})
    t = timed(lambda: exe.run(bufs, {}), iters=10)
    a, b = bufs
    ref = timed(lambda: cp.matmul(a, b), iters=10)
    got = be.to_numpy(outs[0])[:64].astype(np.float32)
    want = ins[0][:64].astype(np.float32) @ ins[1].astype(np.float32)
    r = row(f"gemm {n}^3 {d.name} (cuBLAS lowering)", t, flops=2 * n ** 3, ref=ref,
            err=np.abs(got - want).max())
    r["note"] = f"{ref / t:.2f} of cupy.matmul alone"


@guarded
def hundred_kernels(be, cp, bw, n=1024, k=100):
    b = C.B()
    x = b.input((n,))
    cur = x
    for j in range(k):
        cur = b.custom("fused", [b.c(cur)], (n,), dt.float32,
                       expr=("Add", "float32", ("Mul", "float32", ("in", 0), ("const", 0.999, "float32")),
                             ("const", 0.001, "float32")))
    b.output(cur)
    xs = np.ones(n, np.float32)
    res = {}
    for graphs in (True, False):
        exe, bufs, outs = run_exe(be, b.g, [xs], {}, {"cuda_graphs": graphs})
        t = timed(lambda: exe.run(bufs, {}), iters=50)
        # host time of one call: enqueue 200 calls without waiting
        exe.run(bufs, {})
        be.synchronize()
        h0 = time.perf_counter()
        for _ in range(200):
            exe.run(bufs, {})
        host = (time.perf_counter() - h0) / 200
        be.synchronize()
        res[graphs] = (t, host)
        row(f"{k}-kernel step ({'CUDA graph' if graphs else 'launch by launch'})", t,
            note=f"{t / k * 1e6:.2f} us/kernel; host {host * 1e6:.1f} us/call")
    # graph launch alone, for the per-call overhead beyond it
    exe, bufs, _ = run_exe(be, b.g, [xs], {})
    exe.run(bufs, {})
    (bucket,) = exe._buckets.values()
    graph = bucket.graphs.get(())
    if graph:
        s = cp.cuda.get_current_stream()
        be.synchronize()
        h0 = time.perf_counter()
        for _ in range(200):
            graph.launch(s)
        gl = (time.perf_counter() - h0) / 200
        be.synchronize()
        row("CUDA graph launch alone (host)", gl,
            note=f"per-call overhead beyond it: {(res[True][1] - gl) * 1e6:.1f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import cupy as cp

    be = get_backend("cuda")
    print(be.device_name(), "cupy", cp.__version__, flush=True)
    n = 1 << (24 if args.quick else 26)
    bw = copy_bw(cp, n)
    elementwise(be, cp, bw, n)
    for d in (dt.float32, dt.bfloat16):
        softmax_rows(be, cp, bw, 4096, 4096, d)
        rms_rows(be, cp, bw, 4096, 4096, d)
    shapes = [(2048, 2048), (2048, 8192), (8192, 2048), (2048, 128256)]
    for d in (dt.bfloat16, dt.float32):
        for K, N in shapes:
            gemv(be, cp, bw, K, N, d)
    gemv(be, cp, bw, 2048, 8192, dt.bfloat16, transposed=True)
    gemv(be, cp, bw, 2048, 8192, dt.float16)
    gemm(be, cp, bw, 4096, dt.float16)
    gemm(be, cp, bw, 4096, dt.float32)
    hundred_kernels(be, cp, bw)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# CUDA backend kernel figures ({stamp})", "",
             f"device: {be.device_name()}, CuPy {cp.__version__}; command: python benchmarks/cuda_kernels.py", "",
             "| what | ms | GB/s | TFLOP/s | cupy ms | max err | note |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in ROWS:
        f = lambda k, p=3: "" if k not in r else f"{r[k]:.{p}f}"  # noqa: E731
        lines.append(f"| {r['what']} | {f('ms', 4)} | {f('GB/s', 0)} | {f('TFLOP/s', 1)} | {f('ref_ms', 4)} | "
                     f"{'' if 'max_err' not in r else format(r['max_err'], '.2e')} | {r['note']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cuda_kernels.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "cuda_kernels.json"), "w") as f:
        json.dump(ROWS, f, indent=1)


if __name__ == "__main__":
    main()

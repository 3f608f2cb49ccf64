"""Kernel figures of the CUDA backend on the GPU (a benchmark, not a test).

    python benchmarks/cuda_kernels.py [--out DIR] [--quick]

Times, with CUDA events, through the backend's own executables (LLIR graphs built directly):
an elementwise chain (GB/s vs the device-to-device copy), softmax and RMS norm rows (the
attr-driven hand kernels, and the rule-offered row kernels lf.nn.softmax / rms_norm become), GEMV decode shapes (bf16 / fp32, fraction of copy bandwidth, beside cupy.matmul), a GEMM
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
import re
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


_BUSY: dict = {}
HOST: dict = {}


def busy(cp):
    """Occupy the GPU for ~2 ms (a large device copy) so that the calls timed next are all
    enqueued before the first one starts: the events then see device time, not host gaps."""
    if "a" not in _BUSY:
        n = 1 << 30  # 4 GiB of float32 each way
        _BUSY["a"], _BUSY["b"] = cp.ones(n, np.float32), cp.empty(n, np.float32)
    cp.copyto(_BUSY["b"], _BUSY["a"])


def timed(fn, iters=20, warm=3):
    """Device seconds per call (events around ``iters`` back-to-back calls queued behind a busy
    copy); the host seconds per call of the enqueueing go to HOST["last"]."""
    import cupy as cp

    for _ in range(warm):
        fn()
    s = cp.cuda.get_current_stream()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    busy(cp)
    a.record(s)
    h0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host = time.perf_counter() - h0
    b.record(s)
    b.synchronize()
    dev = cp.cuda.get_elapsed_time(a, b) / 1e3
    HOST["last"] = host / iters
    HOST["bound"] = host > 0.8 * dev  # the queue ran dry: host-bound, device time overstated
    return dev / iters


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


def _rule_kernel_exe(be, fn, args, kind):
    """The executable of ``fn`` traced, with the genome that takes the rule-offered ``kind``
    (softmax_rows, rms_norm_rows: what lf.nn.softmax / rms_norm become on CUDA)."""
    import luminal_fn as lf
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    graph = lf.jit(fn).trace(*args).hlir
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=KERNEL_KINDS)
    for genome in [None] + list(ex.kernel_genomes()):
        ll = ex.extract(genome)
        if any(n.op == "CustomOp" and n.attrs.get("name") == kind for n in ll.live_nodes()):
            return be.compile(ll)
    raise RuntimeError(f"no genome takes {kind}")


@guarded
def traced_rows(be, cp, bw, rows, D, d, kind):
    import luminal_fn as lf

    x, w = C.rand((rows, D), d), C.rand((D,), d)
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    if kind == "softmax_rows":
        fn, args = (lambda a: lf.nn.softmax(a, axis=-1)), [x]
        e = np.exp(xf - xf.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    else:
        fn, args = (lambda a, b: lf.nn.rms_norm(a, b, eps=1e-6)), [x, w]
        y = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)
        if d is not dt.float32:  # (cast back to x's dtype before the weight, as HF's norm)
            y = y.astype(x.dtype).astype(np.float64)
        want = y * wf
    exe = _rule_kernel_exe(be, fn, args, kind)
    bufs = [be.from_numpy(a) for a in args]
    out = exe.run(bufs, {})[0]
    err = np.abs(be.to_numpy(out).astype(np.float64) - want).max()
    t = timed(lambda: exe.run(bufs, {}))
    r = row(f"{kind} {rows}x{D} {d.name} (lf.nn, rule kernel)", t, (2 * rows * D) * d.itemsize, err=err)
    r["note"] = f"{r['GB/s'] / bw:.2f} of copy"


def _gemv_layers(K, N, d, R, transposed):
    """x (1, K) times R different weights (a decode step's worth, > L2 in total): R outputs."""
    b = C.B()
    x = b.input((1, K), d)
    ws = []
    for _ in range(R):
        if transposed:
            w = b.input((N, K), d)
            vb = View.contiguous((N, K)).permute([1, 0])
        else:
            w = b.input((K, N), d)
            vb = View.contiguous((K, N))
        ws.append(w)
        y = b.custom("matmul", [b.c(x), (w, vb)], (1, N), d, m=1, n=N, k=K)
        b.output(y)
    return b.g


def compile_gemvs(be, g, bufs, merged: bool):
    """The executable of ``g``, its bucket planned by a first run on ``bufs``, and that run's
    outputs. GEMVs that read the same x share launches, four at a time (siblings.py), unless
    ``merged`` is False: then each has its own."""
    from luminal_fn.backends.cuda import siblings

    segments = siblings.MAX_SEGMENTS
    siblings.MAX_SEGMENTS = segments if merged else 1
    try:
        exe = be.compile(g)
        return exe, exe.run(bufs, {})
    finally:
        siblings.MAX_SEGMENTS = segments


@guarded
def gemv(be, cp, bw, K, N, d, transposed=False, tag="", merged=True):
    """x (1, K) times R weights in turn, merged into shared launches or not (compile_gemvs)."""
    wbytes = K * N * d.itemsize
    R = int(max(1, min(48, -(-(384 << 20) // wbytes))))
    g = _gemv_layers(K, N, d, R, transposed)
    x = C.rand((1, K), d, -1, 1)
    w0 = C.rand((N, K) if transposed else (K, N), d, -1, 1)
    bufs = [be.from_numpy(x)] + [be.from_numpy(w0)] + [
        cp.random.uniform(-1, 1, (N, K) if transposed else (K, N), dtype=np.float32).astype(
            np.float16 if d is dt.float16 else np.float32) if d is not dt.bfloat16 else
        cp.random.randint(0x3c00, 0x3f80, (N, K) if transposed else (K, N), dtype=np.uint16)
        for _ in range(R - 1)]
    exe, outs = compile_gemvs(be, g, bufs, merged)
    wf = w0.astype(np.float32)
    want = x.astype(np.float32) @ (wf.T if transposed else wf)
    err = np.abs(be.to_numpy(outs[0]).astype(np.float32) - want).max() / max(np.abs(want).max(), 1e-9)
    t = timed(lambda: exe.run(bufs, {}), iters=5, warm=2) / R
    ref = None
    if d in (dt.float32, dt.float16):
        a = bufs[0]
        wv = [w.T if transposed else w for w in bufs[1:]]
        ref = timed(lambda: [cp.matmul(a, w) for w in wv], iters=5, warm=2) / R
    what = f"gemv 1x{K} @ {K}x{N} {d.name}{' (W^T)' if transposed else ''}{'' if merged else ', a launch each'}{tag}"
    r = row(what, t, wbytes, ref=ref, err=err)
    desc = exe.describe()
    kind = desc.splitlines()[1].strip().split(":")[0].split("(")[-1].rstrip(")")
    shape = re.search(r"split=(\d+).*?lanes=(\d+)", desc)  # the x @ W GEMV's launch
    kind += f" (split {shape.group(1)}, {shape.group(2)} lanes a row)" if shape else ""
    same = same_bytes_copy(cp, wbytes, R)
    r["note"] = (f"{r['GB/s'] / bw:.2f} of copy, {r['GB/s'] / same:.2f} of a same-bytes copy; {kind}; "
                 f"{R} weights in turn" + ("; HOST-BOUND" if HOST.get("bound") else ""))


def same_bytes_copy(cp, nbytes, R):
    """GB/s of R device copies that each move ``nbytes`` (nbytes/2 read, nbytes/2 written),
    replayed back to back from one CUDA graph: the ceiling for a kernel of that many bytes
    launched as a decode step launches its GEMVs (a small kernel pays its ramp-up and tail)."""
    n = max(nbytes // 8, 1)  # float32 elements of each half
    srcs = [cp.ones(n, np.float32) for _ in range(R)]
    dsts = [cp.empty(n, np.float32) for _ in range(R)]
    cp.copyto(dsts[0], srcs[0])  # the copy kernel loaded before capture
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        for a, b in zip(srcs, dsts):
            cp.copyto(b, a)
        graph = s.end_capture()
        t = timed(lambda: graph.launch(s), iters=5, warm=2) / R
    return 2 * n * 4 / t / 1e9


@guarded
def prompt_gemm(be, cp, bw, M, K, N, d, variant, tag=""):
    """A prompt's projection, x (M, K) @ W^T with W stored (N, K), for R different weights in
    turn (> L2 in total) as ``variant`` plans it: "skinny" (the tensor-core kernel,
    LUMINAL_CUDA_SKINNY=1), "split-K" (cuBLAS over K's chunks, the default) or "cuBLAS" (one
    call). GB/s counts the weights' bytes."""
    env = {"skinny": {"LUMINAL_CUDA_SKINNY": "1"}, "split-K": {"LUMINAL_CUDA_SKINNY": "0"},
           "cuBLAS": {"LUMINAL_CUDA_SKINNY": "0", "LUMINAL_CUDA_SPLIT_K": "0"}}[variant]
    old = {k: os.environ.get(k) for k in ("LUMINAL_CUDA_SKINNY", "LUMINAL_CUDA_SPLIT_K")}
    os.environ.update(env)
    try:
        wbytes = K * N * d.itemsize
        R = int(max(1, min(48, -(-(384 << 20) // wbytes))))
        b = C.B()
        x = b.input((M, K), d)
        for _ in range(R):
            w = b.input((N, K), d)
            b.output(b.custom("matmul", [b.c(x), (w, View.contiguous((N, K)).permute([1, 0]))], (M, N), d,
                              m=M, n=N, k=K))
        xs = C.rand((M, K), d, -1, 1)
        ws = [C.rand((N, K), d, -1, 1) for _ in range(R)]
        exe = be.compile(b.g)
        bufs = [be.from_numpy(a) for a in [xs] + ws]
        outs = exe.run(bufs, {})
        want = xs.astype(np.float64) @ ws[0].astype(np.float64).T
        err = np.abs(be.to_numpy(outs[0]).astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-9)
        t = timed(lambda: exe.run(bufs, {}), iters=5, warm=2) / R
        kind = exe.describe().splitlines()[1].strip().split(":")[0].split("(", 1)[-1].rstrip(")")
        r = row(f"prompt GEMM {M}x{K} @ ({N}x{K})^T {d.name} [{variant}{tag}]", t, wbytes, flops=2 * M * K * N,
                err=err)
        r["note"] = f"{r['GB/s'] / bw:.2f} of copy; {kind}; {R} weights in turn"
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@guarded
def dense_mlp(be, cp, bw, width=4096, layers=12, d=dt.bfloat16, tag=""):
    """A batch-1 MLP as a user writes it with luminal_fn.nn.linear: ``layers`` of relu(h @ W + b),
    W stored (K, N) (the x @ W GEMV, its bias and relu as the epilogue), the cheapest plan the
    CUDA backend extracts; beside the same chain in torch, eager and replayed from a CUDA graph
    (when torch is installed), and the weights' bytes at the copy bandwidth."""
    import luminal_fn as lf
    from luminal_fn.frontend.pytree import flatten

    def mlp(h, ws, bs):
        for w, b in zip(ws, bs):
            h = lf.nn.relu(lf.nn.linear(h, w, b))
        return h

    rng = np.random.default_rng(0)
    npd = dt.to_numpy(d)
    h = rng.uniform(-1, 1, (1, width)).astype(np.float32).astype(npd)
    ws = [(rng.standard_normal((width, width), np.float32) * (2 / width) ** 0.5).astype(npd) for _ in range(layers)]
    bs = [rng.uniform(-0.1, 0.1, width).astype(np.float32).astype(npd) for _ in range(layers)]
    exe = be.compile(C.cheapest_llir(mlp, (h, ws, bs)))
    leaves, _ = flatten((h, ws, bs))
    bufs = [be.from_numpy(a) for a in leaves]
    got = be.to_numpy(exe.run(bufs, {})[0]).astype(np.float64)
    want = h.astype(np.float64)
    for w, b in zip(ws, bs):  # each layer's product and output rounded to d, as stored
        p = (want @ w.astype(np.float64)).astype(npd).astype(np.float64)
        want = np.maximum(p + b.astype(np.float64), 0).astype(npd).astype(np.float64)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-9)
    t = timed(lambda: exe.run(bufs, {}), iters=10, warm=2)
    wbytes = layers * width * width * d.itemsize
    note = f"{t * bw * 1e9 / wbytes:.2f} x the time of the weights' bytes at copy bandwidth"
    try:
        import torch

        td = {dt.bfloat16: torch.bfloat16, dt.float16: torch.float16, dt.float32: torch.float32}[d]
        th = torch.tensor(h.astype(np.float32), device="cuda").to(td)
        tws = [torch.tensor(w.astype(np.float32), device="cuda").to(td) for w in ws]
        tbs = [torch.tensor(b.astype(np.float32), device="cuda").to(td) for b in bs]

        def chain():
            x = th
            for w, b in zip(tws, tbs):
                x = torch.relu(x @ w + b)
            return x

        def torch_time(fn):
            for _ in range(3):
                fn()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(10):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / 10 / 1e3

        eager = torch_time(chain)
        graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            chain()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(graph):
            chain()
        ref = torch_time(graph.replay)
        note += f"; torch eager {eager * 1e3:.3f} ms, torch CUDA graph {ref * 1e3:.3f} ms ({ref / t:.2f}x ours)"
    except ImportError:
        note += "; torch not installed"
    row(f"dense relu MLP {layers}x{width}^2 {d.name}, batch 1 (lf.nn.linear){tag}", t, wbytes, err=err,
        note=note)


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
        want = xs.copy()
        for _ in range(k):
            want = want * np.float32(0.999) + np.float32(0.001)
        err = np.abs(be.to_numpy(outs[0]) - want).max()
        t = timed(lambda: exe.run(bufs, {}), iters=20)
        host = HOST["last"]
        res[graphs] = (t, host, exe)
        row(f"{k}-kernel step ({'CUDA graph' if graphs else 'launch by launch'})", t, err=err,
            note=f"{t / k * 1e6:.2f} us/kernel; host {host * 1e6:.1f} us/call"
            + ("; HOST-BOUND" if HOST.get("bound") else ""))
    exe = res[True][2]
    (bucket,) = exe._buckets.values()
    graph = bucket.graphs.get(())
    if graph:
        s = cp.cuda.get_current_stream()
        timed(lambda: graph.launch(s), iters=20)
        gl = HOST["last"]
        row("CUDA graph launch alone (host)", gl,
            note=f"per-call host overhead beyond it: {(res[True][1] - gl) * 1e6:.1f} us")
        small = C.B()
        xi = small.input((256,))
        small.output(small.custom("fused", [small.c(xi)], (256,), dt.float32,
                                  expr=("Mul", "float32", ("in", 0), ("const", 2.0, "float32"))))
        exe1, bufs1, _ = run_exe(be, small.g, [np.ones(256, np.float32)], {})
        t1 = timed(lambda: exe1.run(bufs1, {}), iters=20)
        row("1-kernel step: host per call", HOST["last"],
            note=f"device {t1 * 1e6:.1f} us/call; beyond graph launch {(HOST['last'] - gl) * 1e6:.1f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="elementwise,rows,gemv,mlp,gemm,step",
                    help="comma-separated parts to run (the copy ceiling always runs): "
                         "elementwise, rows (softmax / rms norm), gemv, kn (a launch-shape sweep of "
                         "the x @ W GEMV), prompt (a 32-row prompt's projections: cuBLAS, split-K, tensor "
                         "cores), prompt_sweep (the tensor-core kernel's blocks an SM), mlp (a batch-1 dense relu MLP beside torch), gemm, step (100 kernels)")
    ap.add_argument("--prompt-variants", default="cuBLAS,split-K,skinny",
                    help="the prompt projections' plans to time (prompt)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    import cupy as cp

    be = get_backend("cuda")
    print(be.device_name(), "cupy", cp.__version__, flush=True)
    n = 1 << (24 if args.quick else 26)
    bw = copy_bw(cp, n)
    if "elementwise" in only:
        elementwise(be, cp, bw, n)
    if "rows" in only:
        for d in (dt.float32, dt.bfloat16):
            softmax_rows(be, cp, bw, 16384, 4096, d)
            rms_rows(be, cp, bw, 16384, 4096, d)
            for kind in ("softmax_rows", "rms_norm_rows"):
                traced_rows(be, cp, bw, 16384, 4096, d, kind)
    if "gemv" in only:
        shapes = [(2048, 2048), (2048, 8192), (8192, 2048), (2048, 128256)]
        for d in (dt.bfloat16, dt.float32):
            for K, N in shapes:
                gemv(be, cp, bw, K, N, d)
                if N <= 8192:
                    gemv(be, cp, bw, K, N, d, merged=False)
        for K, N in shapes[:3]:
            gemv(be, cp, bw, K, N, dt.bfloat16, transposed=True)
            gemv(be, cp, bw, K, N, dt.bfloat16, transposed=True, merged=False)
        gemv(be, cp, bw, 2048, 8192, dt.float16)
    if "kn" in only:  # lf_gemv_kn's rows a thread, blocks an SM and narrowest stripe, swept (x @ W)
        from luminal_fn.backends.cuda import matmul

        # KN_SWEEP="rows,blocks,lanes;...": the launches to time (default: the current default first)
        default = (matmul.KN_ROWS, matmul.KN_BLOCKS_PER_SM, matmul.KN_MIN_LANES)
        sweep = [tuple(int(v) for v in c.split(",")) for c in os.environ.get("KN_SWEEP", "").split(";") if c]
        for rows, per_sm, lanes in sweep or [default, (8, 2, 8), (16, 2, 8), (4, 4, 8)]:
            matmul.KN_ROWS, matmul.KN_BLOCKS_PER_SM, matmul.KN_MIN_LANES = rows, per_sm, lanes
            tag = f" [kn rows {rows}, {per_sm} blocks/SM, lanes >= {lanes}]"
            for d in (dt.bfloat16, dt.float32):
                for K, N in ((2048, 2048), (2048, 8192), (8192, 2048)):  # (a launch each, as before siblings)
                    gemv(be, cp, bw, K, N, d, tag=tag, merged=False)
            if "kn_mlp" in only:
                dense_mlp(be, cp, bw, tag=tag)
        matmul.KN_ROWS, matmul.KN_BLOCKS_PER_SM, matmul.KN_MIN_LANES = default
    if "prompt" in only:  # a 32-token prompt's projections (Llama-3.2-1B), three ways, same call
        for K, N in ((2048, 2048), (2048, 512), (2048, 8192), (8192, 2048)):
            for variant in args.prompt_variants.split(","):
                prompt_gemm(be, cp, bw, 32, K, N, dt.bfloat16, variant)
    if "prompt_sweep" in only:
        from luminal_fn.backends.cuda import skinny

        default = skinny.BLOCKS_PER_SM
        for per_sm in (2, 8):  # the skinny kernel's blocks an SM, swept
            skinny.BLOCKS_PER_SM = per_sm
            for K, N in ((2048, 2048), (2048, 8192)):
                prompt_gemm(be, cp, bw, 32, K, N, dt.bfloat16, "skinny", tag=f", {per_sm} blocks/SM")
        skinny.BLOCKS_PER_SM = default
    if "mlp" in only:
        dense_mlp(be, cp, bw)
    if "gemm" in only:
        gemm(be, cp, bw, 4096, dt.float16)
        gemm(be, cp, bw, 4096, dt.float32)
    if "step" in only:
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

"""Which launch shape of the decode GEMV (kernels/gemv.cu lf_gemv_nk) reads the weights fastest
on this GPU: warps per row x grid size, for the Llama-1B decode shapes (a benchmark for choosing
matmul.py's heuristic, not a test).

    python benchmarks/gemv_sweep.py [--dtype bfloat16] [--pair]

--pair sweeps the gated MLP's pair kernel instead (lf_gemv_nk_pair_to: gate and up rows read by
the same warps, silu(gate) * up stored), on the Llama-1B gate/up shape.

Each configuration runs 50 times inside one CUDA graph (as a decode step replays it), reading
copies of W in turn so that the weights come from DRAM, not the L2; the figure is the time per
GEMV and the weight bytes read per second, beside a 256 MB device-to-device copy. Each result is checked against a float64 product of the same values.
"""
from __future__ import annotations

import argparse

import numpy as np

from luminal_fn.backends.cuda.device import get_module
from luminal_fn.backends.render import CUDA
from luminal_fn.backends.render.files import kernel_file

SHAPES = {  # name: (N rows of W, K) - W is (N, K), k contiguous (Hugging Face Linear)
    "q/o 2048x2048": (2048, 2048),
    "k/v 512x2048": (512, 2048),
    "qkv 3072x2048": (3072, 2048),
    "gate/up 8192x2048": (8192, 2048),
    "gate+up 16384x2048": (16384, 2048),
    "down 2048x8192": (2048, 8192),
}
REPS = 50
L2_BYTES = 50 << 20  # the H200's L2 (50 MB)


def source(T: str, configs) -> str:
    parts = [CUDA.prelude, kernel_file("gemv.cu")]
    for name, iters in configs:
        parts.append(f'extern "C" __global__ void __launch_bounds__(256) {name}(const {T}* w, const {T}* x, '
                     f"{T}* y, int N, int K, int WPR) {{ lf_gemv_nk<{T}, {iters}>(w, K, x, y, N, K, WPR, "
                     "blockIdx.x, gridDim.x); }")
    return "\n".join(parts)


def pair_source(T: str, configs) -> str:
    parts = [CUDA.prelude, kernel_file("gemv.cu"),
             f"struct SiluMul {{ {T}* y; __device__ void operator()(int n, float g, float u) const "
             "{ y[n] = lf_st<" + T + ">(g / (1.f + __expf(-g)) * u); } };"]
    for name, iters in configs:
        parts.append(f'extern "C" __global__ void __launch_bounds__(256) {name}(const {T}* w0, const {T}* w1, '
                     f"const {T}* x, {T}* y, int N, int K, int WPR) {{ lf_gemv_nk_pair_to<{T}, {iters}>(w0, K, w1, K, "
                     "x, N, K, WPR, blockIdx.x, gridDim.x, SiluMul{y}); }")
    return "\n".join(parts)


def graph_time_us(cp, launch) -> float:
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        launch()
        stream.synchronize()
        stream.begin_capture()
        for _ in range(REPS):
            launch()
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        best = float("inf")
        for _ in range(5):
            start.record(stream)
            graph.launch(stream)
            end.record(stream)
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end) * 1e3 / REPS)
    return best


def dram_copy_tbs(cp) -> float:
    """Device-to-device copy bandwidth (read + write bytes) of 256 MB buffers, far beyond the L2."""
    src = cp.empty(1 << 28, dtype=cp.uint8)
    dst = cp.empty_like(src)
    return 2 * src.nbytes / graph_time_us(cp, lambda: dst.__setitem__(Ellipsis, src)) / 1e6


def _weights(rng, N, K, dtype):
    """(device W, the float64 values it holds) of a (N, K) weight in ``dtype``."""
    import cupy as cp
    import ml_dtypes

    wh = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
    if dtype == "bfloat16":
        wq = wh.astype(ml_dtypes.bfloat16)
        return cp.asarray(wq.view(np.uint16)), wq.astype(np.float64)
    wq = wh.astype(np.float16 if dtype == "float16" else np.float32)
    return cp.asarray(wq), wq.astype(np.float64)


def _host(y, dtype):
    import cupy as cp
    import ml_dtypes

    got = cp.asnumpy(y)
    return (got.view(ml_dtypes.bfloat16) if dtype == "bfloat16" else got).astype(np.float64)


def main():
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    ap.add_argument("--pair", action="store_true", help="sweep the gate/up pair kernel")
    args = ap.parse_args()
    T = {"bfloat16": "__nv_bfloat16", "float16": "__half", "float32": "float"}[args.dtype]
    item = 4 if args.dtype == "float32" else 2
    V = 16 // item
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    unrolled = (1, 2, 4, 8) if args.pair else (1, 2, 4, 8, 16)
    configs = [(f"g_it{i}", i) for i in (0,) + unrolled]
    mod = get_module((pair_source if args.pair else source)(T, configs))
    rng = np.random.default_rng(0)
    copy_tbs = dram_copy_tbs(cp)
    shapes = {"gate/up pair 2 x 8192x2048": (8192, 2048)} if args.pair else SHAPES
    print(f"{args.dtype}, {sms} SMs; time per GEMV in a CUDA graph of {REPS}; TB/s of weight bytes")
    for label, (N, K) in shapes.items():
        mats = [_weights(rng, N, K, args.dtype) for _ in range(2 if args.pair else 1)]
        xd, xq = _weights(rng, 1, K, args.dtype)
        xq = xq[0]
        prods = [wq @ xq for _, wq in mats]
        want = prods[0] / (1 + np.exp(-prods[0])) * prods[1] if args.pair else prods[0]
        y = cp.zeros(N, dtype=xd.dtype)
        nbytes = len(mats) * N * K * item
        # copies of W read in turn, together 3x the L2, so every launch reads its weights from
        # DRAM as a decode step does (each layer's weights once)
        n_copies = max(1, -(-3 * L2_BYTES // nbytes))
        copies = [tuple(w if c == 0 else w.copy() for w, _ in mats) for c in range(n_copies)]
        print(f"\n{label} ({nbytes / 1e6:.1f} MB, {len(copies)} copies read in turn): DRAM copy "
              f"bandwidth {copy_tbs:.2f} TB/s -> {nbytes / copy_tbs / 1e6:.2f} us")
        rows = []
        for wpr in (1, 2, 4, 8):
            if wpr * 32 * V > K:
                continue
            per_lane = K // (wpr * 32 * V)
            iters = per_lane if per_lane * wpr * 32 * V == K and per_lane in unrolled else 0
            full = -(-N // (8 // wpr))
            for it in sorted({0, iters}):
                fn = mod.get_function(f"g_it{it}")
                for grid in sorted({full, min(full, sms * 4), min(full, sms * 8), min(full, sms * 16)}):
                    turn = iter(range(10**9))

                    def launch(fn=fn, grid=grid, wpr=wpr):
                        ws = copies[next(turn) % len(copies)]
                        fn((grid,), (256,), (*ws, xd, y, np.int32(N), np.int32(K), np.int32(wpr)))
                    us = graph_time_us(cp, launch)
                    err = float(np.abs(_host(y, args.dtype) - want).max())
                    rows.append((us, wpr, it, grid, err))
        for us, wpr, iters, grid, err in sorted(rows):
            print(f"  wpr {wpr} iters {iters:2d} grid {grid:6d}: {us:7.2f} us  {nbytes / us / 1e6:5.2f} TB/s"
                  f" ({nbytes / us / 1e6 / copy_tbs:4.2f} of copy)"
                  f"  max err {err:.2e}")


if __name__ == "__main__":
    main()

"""Running a planned graph on the GPU: one module, one arena and one parameter table per bucket,
launches enqueued on the caller's current CuPy stream with no host synchronisation, and the
whole step captured as a CUDA graph and replayed.

The parameter table ``P`` (int64 on the device) holds the dims of the call, then one pointer
per buffer. Every kernel reads its pointers and dims from ``P``, so a compiled kernel - and a
captured graph - serves every dims value of the bucket and every input pointer: a call only
writes ``P`` (one small async copy from pinned memory) and launches. Host steps (cuBLAS) bake
their pointers and shapes in; a plan that has them runs its steps one by one.
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from ...ir import dtypes as dt
from ..base import Executable
from .device import cupy, cupy_dtype, get_module, host_to_storage
from .plan import HostStep, KernelStep, Planner, evaluate
from .source import module_source
from . import matmul as _matmul  # noqa: F401  (registers the matmul lowering)
from . import handkernels as _hand  # noqa: F401  (registers rms_norm, softmax, rope, attention)

PINNED_SLOTS = 8
GRID_CAP_BLOCKS = 32  # default grid cap per SM for grid-stride kernels


def plan_graph(graph, dims_max: dict, sm_count: int = 132):
    """Plan one bucket (pure Python: usable without a GPU)."""
    consts: dict = {}
    bp = Planner(graph, dims_max, sorted(graph.symbols()), sm_count).plan(consts)
    bp.const_values = consts
    return bp


def launch_shape(src, dims_max: dict, sm_count: int) -> tuple:
    """(grid, block) of a kernel at the bucket's largest dims (grid-stride loops cover less)."""
    block = (int(src.block), 1, 1)
    g3 = src.meta.get("grid3")
    if g3 is not None:
        grid = tuple(max(1, int(evaluate(g, dims_max))) for g in g3) + (1,) * (3 - len(g3))
        return grid, block
    work = max(int(evaluate(src.work, dims_max)), 1)
    blocks = -(-work // max(int(src.per_block), 1))
    cap = (2**31 - 1) if src.grid_cap is None else (src.grid_cap or sm_count * GRID_CAP_BLOCKS)
    return (max(1, min(blocks, cap, 2**31 - 1)), 1, 1), block


class _Bucket:
    """Everything one bucket needs on the device."""

    def __init__(self, exe: "CudaExecutable", dims_max: dict):
        cp = cupy()
        self.exe = exe
        g = exe.graph
        self.plan = bp = plan_graph(g, dims_max, exe.sm_count)
        self.symbols = bp.symbols
        nsym = len(self.symbols)
        self.nsym = nsym
        kernels = bp.kernels()
        self.module = get_module(module_source(kernels)) if kernels else None
        self.arena = cp.empty(max(bp.arena_bytes, 1), dtype=np.uint8)
        base = self.arena.data.ptr
        ptrs = np.zeros(nsym + len(bp.bufs), dtype=np.int64)
        self.consts = {}
        for b in bp.bufs:
            if b.first < 0:
                continue
            if b.kind in ("arena", "scratch"):
                ptrs[nsym + b.id] = base + b.offset
            elif b.kind == "const":
                host = host_to_storage(bp.const_values[b.index]).reshape(-1)
                arr = cp.asarray(np.ascontiguousarray(host))
                self.consts[b.id] = arr
                ptrs[nsym + b.id] = arr.data.ptr
        self.static_ptrs = ptrs
        self.in_slots = [(k, nsym + bid) for k, bid in enumerate(bp.inputs)
                         if bid is not None and bp.bufs[bid].first >= 0]
        self.out_bufs = [bp.bufs[bid] for bid in bp.outputs]
        self.P = cp.zeros(len(ptrs), dtype=np.int64)
        self.pinned = [self._pinned(len(ptrs)) for _ in range(PINNED_SLOTS)]
        self.pinned_ptrs = [ctypes.c_void_p(h.ctypes.data) for h in self.pinned]
        self.events = [None] * PINNED_SLOTS
        self.slot = 0
        self.graphs: dict = {}
        self.has_host = any(isinstance(s, HostStep) for s in bp.steps)
        self.launches = []
        sym_index = {s: i for i, s in enumerate(self.symbols)}
        for s in bp.steps:
            if isinstance(s, KernelStep):
                fn = self.module.get_function(s.source.name)
                grid, block = launch_shape(s.source, dims_max, exe.sm_count)
                args = (self.P,) + tuple(np.int32(nsym + b) for b in s.bufs) + tuple(
                    np.int32(sym_index[d]) for d in s.source.dims)
                self.launches.append(("k", fn, grid, block, args, int(s.source.shared_bytes)))
            else:
                self.launches.append(("h", s))

    @staticmethod
    def _pinned(n):
        import cupyx

        return cupyx.empty_pinned((n,), dtype=np.int64)

    # ---- one call -----------------------------------------------------------------------------
    def run(self, inputs, dims):
        cp = cupy()
        stream = cp.cuda.get_current_stream()
        slot = self.slot
        self.slot = (slot + 1) % PINNED_SLOTS
        ev = self.events[slot]
        if ev is not None:
            ev.synchronize()  # the copy that last read this pinned slot is done (normally long ago)
        host = self.pinned[slot]
        host[:] = self.static_ptrs
        for i, s in enumerate(self.symbols):
            host[i] = dims[s]
        for k, slot_idx in self.in_slots:
            host[slot_idx] = inputs[k].data.ptr
        outs = []
        nsym = self.nsym
        for b in self.out_bufs:
            if b.kind == "output":
                shape = tuple(int(evaluate(d, dims)) for d in b.shape)
                arr = cp.empty(shape, dtype=cupy_dtype(b.dtype))
                host[nsym + b.id] = arr.data.ptr
                outs.append(arr)
            else:  # an output that is the producer's own buffer (never: outputs are fresh)
                outs.append(None)
        self.P.data.copy_from_host_async(self.pinned_ptrs[slot], host.nbytes, stream)
        if ev is None:
            ev = self.events[slot] = cp.cuda.Event(block=False, disable_timing=True)
        ev.record(stream)
        if self.has_host or not self.exe.use_graphs:
            self._launch_all(dims, host)
        else:
            gkey = ()
            graph = self.graphs.get(gkey)
            if graph is None:
                graph = self._capture()
                self.graphs[gkey] = graph
            if graph is False:
                self._launch_all(dims, host)
            else:
                graph.launch(stream)
        return outs

    def _launch_all(self, dims, host):
        nsym = self.nsym
        for item in self.launches:
            if item[0] == "k":
                _, fn, grid, block, args, shm = item
                fn(grid, block, args, shared_mem=shm)
            else:
                step = item[1]
                step.run(lambda b: int(host[nsym + b]), dims)

    def _capture(self):
        """A CUDA graph of every kernel launch (capture records, it does not run)."""
        cp = cupy()
        s = self.exe.capture_stream
        try:
            with s:
                s.begin_capture()
                try:
                    for _, fn, grid, block, args, shm in self.launches:
                        fn(grid, block, args, shared_mem=shm)
                finally:
                    graph = s.end_capture()
            return graph
        except Exception as e:  # a driver without capture support: run step by step
            self.exe.capture_error = repr(e)
            return False


class CudaExecutable(Executable):
    """A graph compiled for the CUDA backend; buckets are planned on first use."""

    def __init__(self, backend, graph, options: dict | None = None):
        cp = cupy()
        options = dict(options or {})
        self.backend = backend
        self.graph = graph
        self.symbols = sorted(graph.symbols())
        self.buckets = options.get("buckets") or {}
        self.use_graphs = options.get("cuda_graphs",
                                      os.environ.get("LUMINAL_CUDA_GRAPHS", "1") not in ("0", "false"))
        dev = cp.cuda.Device()
        self.sm_count = int(dev.attributes.get("MultiProcessorCount", 132))
        self.capture_stream = cp.cuda.Stream(non_blocking=True)
        self.capture_error = None
        self._buckets: dict = {}
        self._in_dtypes = [cupy_dtype(graph.nodes[i].dtype) for i in graph.inputs]
        self._in_lf = [graph.nodes[i].dtype for i in graph.inputs]
        self._last_key = None
        self._last_bucket = None

    # ---- buckets --------------------------------------------------------------------------------
    def bucket_dims(self, dims: dict) -> dict:
        """The largest dims of the bucket holding ``dims``: a declared bucket's upper bound, or the
        next power of two (so one plan and one compiled module serve a range of values)."""
        out = {}
        for s in self.symbols:
            if s not in dims:
                raise KeyError(f"CUDA backend: dim {s!r} of the graph has no value in this call "
                               f"(dims given: {sorted(dims)})")
            v = int(dims[s])
            ranges = self.buckets.get(s)
            if ranges:
                hit = next((r[1] for r in ranges if r[0] <= v <= r[1]), None)
                if hit is None:
                    raise ValueError(f"CUDA backend: {s}={v} is outside every bucket {ranges}")
                out[s] = int(hit)
            else:
                out[s] = 1 << max(0, (v - 1).bit_length())
        return out

    def _bucket(self, dims) -> _Bucket:
        key = tuple(dims[s] for s in self.symbols) if self.symbols else ()
        if key == self._last_key:
            return self._last_bucket
        dmax = self.bucket_dims(dims)
        bkey = tuple(sorted(dmax.items()))
        b = self._buckets.get(bkey)
        if b is None:
            b = self._buckets[bkey] = _Bucket(self, dmax)
        self._last_key, self._last_bucket = key, b
        return b

    # ---- running --------------------------------------------------------------------------------
    def _device_inputs(self, inputs) -> list:
        cp = cupy()
        out = []
        for k, x in enumerate(inputs):
            want = self._in_dtypes[k]
            if not isinstance(x, cp.ndarray):
                x = self.backend.from_numpy(dt.narrow_array(np.asarray(x), f"input {k}")
                                            if not (isinstance(x, np.ndarray) and x.dtype == dt.to_numpy(self._in_lf[k]))
                                            else x)
            if x.dtype != want:
                if want == np.uint16 or x.dtype == np.uint16:
                    raise TypeError(f"CUDA backend: input {k} is a {x.dtype} CuPy array but the graph "
                                    f"expects {self._in_lf[k]}; convert it first")
                x = x.astype(want)
            if not x.flags.c_contiguous:
                x = cp.ascontiguousarray(x)
            out.append(x)
        return out

    def run(self, inputs, dims):
        inputs = self._device_inputs(inputs)
        return self._bucket(dims).run(inputs, dims)

    def synchronize(self) -> None:
        cupy().cuda.get_current_stream().synchronize()

    def profile(self, inputs, dims, trials: int = 3, timeout_s: float = 1.0,
                check_finite: bool = True) -> float:
        """Median seconds per run, timed with CUDA events after one warm-up run; raises
        TimeoutError when the warm-up exceeds ``timeout_s`` and FloatingPointError when an output
        holds NaN or Inf (``check_finite``)."""
        cp = cupy()
        inputs = self._device_inputs(inputs)
        t0 = time.perf_counter()
        outs = self.run(inputs, dims)
        self.synchronize()
        if time.perf_counter() - t0 > timeout_s:
            raise TimeoutError(f"CUDA candidate took longer than {timeout_s} s")
        if check_finite:
            for k, o in enumerate(outs):
                if o is not None and o.dtype.kind == "f" and o.size and not bool(cp.isfinite(o).all()):
                    raise FloatingPointError(f"CUDA candidate: output {k} holds NaN or Inf")
        stream = cp.cuda.get_current_stream()
        times = []
        for _ in range(max(1, trials)):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(stream)
            self.run(inputs, dims)
            b.record(stream)
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b) / 1e3)
        times.sort()
        return times[len(times) // 2]

    def describe(self) -> str:
        if not self._buckets:
            return f"cuda executable of {len(self.graph)} nodes (no bucket planned yet)"
        return "\n".join(b.plan.describe() for b in self._buckets.values())

    def sources(self) -> list:
        """(name, text) of every kernel planned so far."""
        out = {}
        for b in self._buckets.values():
            for k in b.plan.kernels():
                out[k.name] = k.text
        return sorted(out.items())


__all__ = ["CudaExecutable", "plan_graph", "launch_shape"]

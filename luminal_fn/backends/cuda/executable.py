"""Running a planned graph on the GPU: its kernels' modules, one arena and one parameter table
per bucket, launches enqueued on the caller's current CuPy stream with no host synchronisation,
and the whole step captured as a CUDA graph and replayed.

The parameter table ``P`` (int64 on the device) holds the dims of the call, then one pointer
per buffer. Every kernel reads its pointers and dims from ``P``, so a compiled kernel - and a
captured graph - serves every dims value of the bucket and every input pointer: a call only
writes ``P`` (one small async copy from pinned memory) and launches. Host steps (cuBLAS) bake
their pointers and shapes in: a plan that has them is captured once the same pointers and dims
come twice in a row (weights passed again, the same batch size), its graphs kept per such key,
and run step by step while they keep changing.
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import operator
import time

import numpy as np

from ...ir import dtypes as dt
from ..base import Executable
from .device import compile_ahead, cupy, cupy_dtype, host_to_storage, kernel_modules
from .launch import PlainLaunch, launch_shape
from .plan import HostStep, KernelStep, Planner, evaluate
from .pdl import PdlLaunch, function_handle, module_arch, pdl_supported
from .switches import switch_on
from . import matmul as _matmul  # noqa: F401  (registers the matmul lowering)
from . import handkernels as _hand  # noqa: F401  (registers rms_norm, softmax)
from . import ropekernels as _rope  # noqa: F401  (registers rope)
from . import attentionkernels as _attention  # noqa: F401  (registers attention)
from . import rowkernels as _rows  # noqa: F401  (registers rms_norm_rows, softmax_rows, argmax_rows)
from . import sortkernels as _sorts  # noqa: F401  (registers sort_rows, argsort_rows)
from . import mathkernels as _math  # noqa: F401  (registers arctan2, arcsin, arccos)
from . import modelkernels as _models  # noqa: F401  (registers the specialize_models.egg kernels)

PINNED_SLOTS = 32
GRAPHS_PER_BUCKET = 4  # captured graphs kept per bucket for plans with host steps


def plan_graph(graph, dims_max: dict, sm_count: int = 132, donated=(), arch: int = 0):
    """Plan one bucket (pure Python: usable without a GPU; ``arch`` the compute capability the
    kernels may assume, 0 for none beyond the basics)."""
    consts: dict = {}
    bp = Planner(graph, dims_max, sorted(graph.symbols()), sm_count, donated=donated, arch=arch).plan(consts)
    bp.const_values = consts
    return bp


class _Bucket:
    """Everything one bucket needs on the device."""

    def __init__(self, exe: "CudaExecutable", dims_max: dict, plan=None):
        cp = cupy()
        self.exe = exe
        g = exe.graph
        if plan is None:  # (else made by CudaExecutable.prepare, its kernels compiled ahead)
            plan = plan_graph(g, dims_max, exe.sm_count, exe.donated, exe.arch)
        self.plan = bp = plan
        self.symbols = bp.symbols
        nsym = len(self.symbols)
        self.nsym = nsym
        kernels = bp.kernels()
        self.kernel_modules = kernel_modules(kernels) if kernels else {}
        modules = list({id(m): m for m in self.kernel_modules.values()}.values())
        self.module = modules[0] if len(modules) == 1 else None  # (while tracing, the one module)
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
        self.sym_slots = list(enumerate(self.symbols))
        self.slot_of_input = [-1] * len(bp.inputs)  # input position -> its table slot (-1: unread)
        for k, j in self.in_slots:
            self.slot_of_input[k] = j
        self.out_specs = []  # (P index, static shape or None, shape exprs, storage dtype)
        for bid in bp.outputs:
            b = bp.bufs[bid]
            if b.kind == "input":  # a donated input updated in place is returned as itself
                self.out_specs.append((None, b.index, None, None))
                continue
            static = tuple(b.shape) if all(isinstance(d, int) for d in b.shape) else None
            self.out_specs.append((nsym + b.id, static, tuple(b.shape), cupy_dtype(b.dtype)))
        self.P = cp.zeros(len(ptrs), dtype=np.int64)
        # pinned host copies of P, each prefilled with the fixed pointers; a call rewrites only
        # dims, inputs and outputs of the next slot, whose previous copy an event says is done
        self.pinned = [self._pinned(len(ptrs)) for _ in range(PINNED_SLOTS)]
        for h in self.pinned:
            h[:] = ptrs
        self.pinned_ptrs = [ctypes.c_void_p(h.ctypes.data) for h in self.pinned]
        self.events = [None] * PINNED_SLOTS
        self.slot = 0
        self.graphs: dict = {}  # host steps' key -> captured CUDA graph
        self.graphs_ok = True  # False once a capture failed: run step by step from then on
        self.last_key = None
        self.last_table = None  # (stream, output ptrs, dims, inputs, pinned slot) of the last call
        self.last_graph = None  # the graph the last call launched
        self.out_slots = [j for j, _, _, _ in self.out_specs if j is not None]
        self.hosts = [s for s in bp.steps if isinstance(s, HostStep)]
        out_bufs = set(bp.outputs)
        self.hosts_skip_outputs = not any(b in out_bufs for h in self.hosts for b in h.bufs)
        self.has_host = bool(self.hosts)
        # what the host steps' enqueued work depends on, as slots of the parameter table: the
        # dims they read and the pointers that change between calls (inputs, outputs; the arena's
        # and constants' are fixed for the bucket). One slice of the table is a graph's key.
        sym_index = {s: i for i, s in enumerate(self.symbols)}
        self.host_key_slots = np.array(sorted(
            {sym_index[d] for h in self.hosts for d in h.dims if d in sym_index}
            | {nsym + b for h in self.hosts for b in h.bufs if bp.bufs[b].kind in ("input", "output")}),
            dtype=np.intp)
        self.pool = None  # the private memory pool of host steps' temporaries while captured
        self.cp = cp
        self.nbytes_P = int(self.P.nbytes)
        self.launches = []
        self.pdl = exe.pdl and bool(modules) and min(module_arch(m) for m in modules) >= 900
        if self.pdl:
            try:
                function_handle(self.kernel_modules[kernels[0].name].get_function(kernels[0].name))
            except AttributeError as e:  # a CuPy that hides the driver's handle: launch plainly
                exe.pdl_error = f"programmatic dependent launch off: {e}"
                self.pdl = False
        for s in bp.steps:
            if isinstance(s, KernelStep):
                fn = self.kernel_modules[s.source.name].get_function(s.source.name)
                grid, block = launch_shape(s.source, dims_max, exe.sm_count)
                ints = tuple(nsym + b for b in s.bufs) + tuple(sym_index[d] for d in s.source.dims)
                shm = int(s.source.shared_bytes)
                if self.pdl:
                    self.launches.append(("p", PdlLaunch(fn, s.source.name, grid, block,
                                                         self.P.data.ptr, ints, shm)))
                    continue
                args = (self.P,) + tuple(np.int32(v) for v in ints)
                self.launches.append(("k", PlainLaunch(fn, s.source.name, grid, block, args, shm)))
            else:
                self.launches.append(("h", s))

    @staticmethod
    def _pinned(n):
        import cupyx

        return cupyx.empty_pinned((n,), dtype=np.int64)

    # ---- one call -----------------------------------------------------------------------------
    def run(self, inputs, dims, same_inputs=False, changed=None):
        """Queue one call; ``same_inputs``: the very arrays of this bucket's last call;
        ``changed``: the positions of the only inputs that differ from the last call's (a model
        called in a loop: the weights repeat, the step's tokens and positions do not)."""
        cp = self.cp
        stream = cp.cuda.get_current_stream()
        outs, out_ptrs = [], []
        empty = cp.empty
        for j, static, shape, dtype in self.out_specs:
            if j is None:
                outs.append(inputs[static])
                continue
            arr = empty(static if static is not None else
                        tuple(int(evaluate(d, dims)) for d in shape), dtype=dtype)
            outs.append(arr)
            out_ptrs.append(arr.data.ptr)
        dim_values = [dims[s] for _, s in self.sym_slots]
        last = self.last_table
        same = same_inputs and last[2] == dim_values
        if same and last[0] is stream and last[1] == out_ptrs:
            # the same arrays, dims and output pointers as the call before on this stream: the
            # parameter table on the device already says all of it (a model called in a loop)
            host, graph = last[4], self.last_graph
        else:  # (the same arrays and dims: the last table with new output pointers, and the last
            # graph when no cuBLAS step writes an output: its key only holds the other pointers)
            host = self._write_table(inputs, dims, out_ptrs, stream, last[4] if same else None,
                                     None if changed is None else (last[4], changed))
            graph = self.last_graph if same and self.hosts_skip_outputs else None
            self.last_table = (stream, out_ptrs, dim_values, list(inputs), host)
        if graph is None and self.graphs_ok and self.exe.use_graphs:
            graph = self._graph_for(host, dims)
        self.last_graph = graph
        if graph is not None:
            graph.launch(stream)
        else:
            self._launch_all(dims, host)
        return outs

    def _write_table(self, inputs, dims, out_ptrs, stream, like=None, patch=None):
        """Fill the next pinned slot with this call's dims and pointers (``like``: a slot already
        holding its dims and input pointers; ``patch``: (a slot holding the other inputs'
        pointers, the positions of the inputs to write)) and queue its copy to P."""
        slot = self.slot
        self.slot = slot + 1 if slot + 1 < PINNED_SLOTS else 0
        ev = self.events[slot]
        if ev is None:
            ev = self.events[slot] = self.cp.cuda.Event(block=False, disable_timing=True)
        else:
            ev.synchronize()  # this slot's last copy ran long ago unless PINNED_SLOTS calls are queued
        host = self.pinned[slot]
        if like is not None:
            host[:] = like
        elif patch is not None:
            host[:] = patch[0]
            for i, s in self.sym_slots:
                host[i] = dims[s]
            slot_of = self.slot_of_input
            for k in patch[1]:
                j = slot_of[k]
                if j >= 0:
                    host[j] = inputs[k].data.ptr
        else:
            for i, s in self.sym_slots:
                host[i] = dims[s]
            for k, j in self.in_slots:
                host[j] = inputs[k].data.ptr
        for j, ptr in zip(self.out_slots, out_ptrs):
            host[j] = ptr
        self.P.data.copy_from_host_async(self.pinned_ptrs[slot], self.nbytes_P, stream)
        ev.record(stream)
        return host

    def _graph_for(self, host, dims):
        """The captured graph for this call, capturing it when worthwhile; None: run step by step."""
        key = host[self.host_key_slots].tobytes() if self.has_host else ()
        graph = self.graphs.get(key)
        if graph is None and (not self.has_host or key == self.last_key):
            graph = self._capture(host, dims)
            if graph is not None:
                if len(self.graphs) >= GRAPHS_PER_BUCKET:
                    self.graphs.pop(next(iter(self.graphs)))
                self.graphs[key] = graph
        self.last_key = key
        return graph

    def _launch_all(self, dims, host):
        nsym = self.nsym
        stream_ptr = self.cp.cuda.get_current_stream().ptr
        for item in self.launches:
            if item[0] != "h":  # a kernel: plain ("k") or programmatic ("p")
                item[1](stream_ptr)
            else:
                step = item[1]
                step.run(lambda b: int(host[nsym + b]), dims)

    def _capture(self, host, dims):
        """A CUDA graph of the whole step (capture records, it does not run). cuBLAS may
        allocate temporaries while captured: they come from a pool of this bucket's own, so no
        later allocation reuses memory a replay still writes."""
        cp = self.cp
        s = self.exe.capture_stream
        if self.has_host and self.pool is None:
            self.pool = cp.cuda.MemoryPool()
        mode = getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", None)
        try:
            alloc = cp.cuda.using_allocator(self.pool.malloc) if self.pool else contextlib.nullcontext()
            with s, alloc:
                s.begin_capture(mode) if mode is not None else s.begin_capture()
                try:
                    self._launch_all(dims, host)
                finally:
                    graph = s.end_capture()
            return graph
        except Exception as e:  # a driver or library call that cannot be captured
            self.exe.capture_error = repr(e)
            self.graphs_ok = False
            return None


class CudaExecutable(Executable):
    """A graph compiled for the CUDA backend; buckets are planned on first use."""

    def __init__(self, backend, graph, options: dict | None = None):
        cp = cupy()
        options = dict(options or {})
        self.backend = backend
        self.graph = graph
        self.symbols = sorted(graph.symbols())
        self.buckets = options.get("buckets") or {}
        self.donated = tuple(options.get("donated") or ())
        self.use_graphs = options.get("cuda_graphs",
                                      switch_on("LUMINAL_CUDA_GRAPHS", True, "capture CUDA graphs"))
        dev = cp.cuda.Device()
        self.sm_count = int(dev.attributes.get("MultiProcessorCount", 132))
        self.arch = int(dev.compute_capability)
        self.pdl = options.get("cuda_pdl", True) and pdl_supported(self.arch)
        self.pdl_error = None
        self.capture_stream = cp.cuda.Stream(non_blocking=True)
        self.capture_error = None
        self._buckets: dict = {}
        self._plans: dict = {}  # bucket -> its plan, made by prepare (its kernels compiling ahead)
        self._in_dtypes = [cupy_dtype(graph.nodes[i].dtype) for i in graph.inputs]
        self._in_lf = [graph.nodes[i].dtype for i in graph.inputs]
        self._last_key = None
        self._last_bucket = None
        self._ndarray = cp.ndarray

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
            b = self._buckets[bkey] = _Bucket(self, dmax, self._plans.pop(bkey, None))
        self._last_key, self._last_bucket = key, b
        return b

    def prepare(self, dims: dict) -> None:
        """Plan the bucket of ``dims`` and start compiling its new kernels on a worker thread
        (NVRTC releases the GIL: a search's generation compiles side by side while the next
        candidates are planned). No device memory is taken until the first run."""
        dmax = self.bucket_dims(dims)
        bkey = tuple(sorted(dmax.items()))
        if bkey in self._buckets or bkey in self._plans:
            return
        bp = self._plans[bkey] = plan_graph(self.graph, dmax, self.sm_count, self.donated, self.arch)
        compile_ahead(bp.kernels())

    # ---- running --------------------------------------------------------------------------------
    def _device_inputs(self, inputs) -> list:
        """The inputs as contiguous, 16-byte aligned CuPy arrays of the graph's storage dtypes;
        host arrays are moved (narrowed first by the front end's rule: int64 -> int32, float64 ->
        float32). Kernels read with 16-byte vector loads, so a view starting inside a 16-byte
        word (``x[1:]``) is copied rather than misread (a misaligned load is a sticky CUDA error)."""
        return [self._device_input(k, x) for k, x in enumerate(inputs)]

    def _device_input(self, k, x):
        if (type(x) is self._ndarray and x.dtype == self._in_dtypes[k] and x._c_contiguous
                and not x.data.ptr & 15):
            return x
        return self._convert(k, x)

    def _convert(self, k, x):
        cp = cupy()
        want = self._in_dtypes[k]
        if not isinstance(x, cp.ndarray):
            arr = np.asarray(x)
            if arr.dtype != dt.to_numpy(self._in_lf[k]):
                arr = dt.narrow_array(arr, f"CUDA executable input {k}")
            x = self.backend.from_numpy(arr)
        if x.dtype != want:
            if want == np.uint16 or x.dtype == np.uint16:
                raise TypeError(f"CUDA backend: input {k} is a {x.dtype} CuPy array but the graph "
                                f"expects {self._in_lf[k]}; convert it first")
            x = x.astype(want)
        x = cp.ascontiguousarray(x)
        return x.copy() if x.data.ptr & 15 else x

    def run(self, inputs, dims):
        b = self._bucket(dims)
        last = b.last_table
        # the very device arrays of the bucket's last call (a host array never matches: it was
        # converted, and may have changed since): no conversion, and the bucket may reuse its table
        if last is None or len(last[3]) != len(inputs):
            return b.run(self._device_inputs(inputs), dims)
        prev = last[3]
        changed = list(itertools.compress(range(len(inputs)), map(operator.is_not, inputs, prev)))
        if not changed:
            return b.run(prev, dims, same_inputs=True)
        # only the changed inputs are checked and converted; the others are the last call's
        # device arrays, whose pointers the last table already holds
        out = list(prev)
        for k in changed:
            out[k] = self._device_input(k, inputs[k])
        return b.run(out, dims, changed=changed)

    def synchronize(self) -> None:
        cupy().cuda.get_current_stream().synchronize()

    def profile(self, inputs, dims, trials: int = 3, timeout_s: float = 1.0,
                check_finite: bool = False) -> float:
        """Median seconds per run, timed with CUDA events over runs queued back to back after
        one warm-up run; raises
        TimeoutError when the warm-up exceeds ``timeout_s`` and, with ``check_finite``,
        FloatingPointError when an output holds NaN or Inf. The search compares outputs against
        its reference candidate itself (NaN is fine where the reference has NaN, as log(-1)),
        so the check is off by default."""
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
        # runs back to back between the events (about 10 ms of them), as a decode loop queues
        # its steps: the device time then decides, not the host's enqueue of a lone run
        warm = time.perf_counter() - t0
        reps = max(1, min(20, int(10e-3 / max(warm, 1e-6))))
        times = []
        for _ in range(max(1, trials)):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(stream)
            for _ in range(reps):
                self.run(inputs, dims)
            b.record(stream)
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / reps)
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

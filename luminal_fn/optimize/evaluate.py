"""Timing one candidate for the search: extract, check memory, compile, run, check, profile.

The search hands a genome; this module turns it into seconds or raises to drop it:

* the LLIR's peak memory at the bucket's largest dims is estimated first (``max_memory``);
* the first run is timed against ``profile_timeout`` before any trials;
* outputs must be finite wherever the reference candidate's were, and agree with it (relative
  error below ``AGREEMENT``): the first candidate that runs is the reference (the program times
  the genome without backend kernels first), and every later one computes the same function or
  is dropped - a safety net under the rules and the hand kernels;
* distinct genomes that extract to the same graph are timed once.
"""
from __future__ import annotations

import time

import numpy as np

from ..ir import dtypes as dt
from ..ir.expr import Expr
from .memory import CandidateRejected, check_memory_budget, estimate_peak_bytes

AGREEMENT = 2e-2  # relative L2 error; loose enough for bf16 accumulation-order differences


def concrete(d, dims) -> int:
    return d.evaluate(dims) if isinstance(d, Expr) else int(d)


def llir_peak_bytes(graph, dims) -> int:
    """Peak bytes of a graph's buffers (every node's output, live from its step to its last
    reader's step) at ``dims``."""
    order = {n.id: k for k, n in enumerate(graph.live_nodes())}
    last = dict(order)
    for n in graph.live_nodes():
        for i, _ in n.inputs:
            last[i] = max(last[i], order[n.id])
    bufs = []
    for n in graph.live_nodes():
        if n.op == "Output":
            continue
        numel = 1
        for d in n.shape:
            numel *= concrete(d, dims)
        bufs.append((numel * dt.to_numpy(n.dtype).itemsize, order[n.id], last[n.id]))
    return estimate_peak_bytes(bufs)


def sample_inputs(graph, dims, seed: int = 0) -> list:
    """Random NumPy arguments for ``graph`` at ``dims`` (floats ~ N(0, 0.5), ints in 0..3)."""
    rng = np.random.default_rng(seed)
    out = []
    for hid in graph.inputs:
        n = graph.nodes[hid]
        shape = tuple(concrete(d, dims) for d in n.shape)
        npd = dt.to_numpy(n.dtype)
        if n.dtype.is_float:
            arr = (rng.standard_normal(shape) * 0.5).astype(npd)
        elif n.dtype.is_int:
            arr = rng.integers(0, 4, shape).astype(npd)
        else:
            arr = rng.random(shape) < 0.5
        out.append(np.asarray(arr))
    return out


class CandidateEvaluator:
    """``evaluate(genome) -> seconds`` for one bucket of one program."""

    def __init__(self, extractor, backend, options, run_dims: dict, max_dims: dict, inputs):
        self.extractor = extractor
        self.backend = backend
        self.options = options
        self.run_dims = run_dims
        self.max_dims = max_dims
        self.inputs = [backend.from_numpy(x) for x in inputs]
        self.reference = None  # outputs of the first candidate that ran
        self.by_graph: dict = {}  # LLIR hash -> seconds or the exception it raised
        self.graphs: dict = {}  # genome -> LLIR (for the winner)

    def __call__(self, genome) -> float:
        llir = self.extractor.extract(genome)
        self.graphs[tuple(genome)] = llir
        key = llir.structural_hash()
        seen = self.by_graph.get(key)
        if seen is not None:
            if isinstance(seen, BaseException):
                raise seen
            return seen
        try:
            t = self._time(llir)
        except Exception as e:
            self.by_graph[key] = e
            raise
        self.by_graph[key] = t
        return t

    def _time(self, llir) -> float:
        opts = self.options
        check_memory_budget(llir_peak_bytes(llir, self.max_dims), opts.max_memory)
        exe = self.backend.compile(llir)
        t0 = time.perf_counter()
        outs = exe.run(self.inputs, self.run_dims)
        exe.synchronize()
        first = time.perf_counter() - t0
        if opts.profile_timeout is not None and first > opts.profile_timeout:
            raise TimeoutError(f"first run took {first:.3g} s > profile_timeout "
                               f"{opts.profile_timeout:g} s")
        self._check(outs)
        return exe.profile(self.inputs, self.run_dims, opts.trials, opts.profile_timeout or 1e9)

    def _check(self, outs) -> None:
        host = [np.asarray(self.backend.to_numpy(o), dtype=np.float64) for o in outs]
        if self.reference is None:
            self.reference = host
            return
        for k, (got, ref) in enumerate(zip(host, self.reference)):
            fin_ref = np.isfinite(ref)
            if not np.isfinite(got[fin_ref]).all():
                raise CandidateRejected(f"output {k} has NaN/Inf where the reference candidate "
                                        "is finite")
            diff = got[fin_ref] - ref[fin_ref]
            scale = np.linalg.norm(ref[fin_ref]) + 1e-30
            err = np.linalg.norm(diff) / scale
            if err > AGREEMENT and np.abs(diff).max() > 1e-5:
                raise CandidateRejected(f"output {k} disagrees with the reference candidate "
                                        f"(relative error {err:.2e})")

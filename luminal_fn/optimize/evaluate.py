"""Timing one candidate for the search: extract, check memory, compile, run, check, profile.

The search hands a genome; this module turns it into seconds or raises to drop it:

* the LLIR's peak memory at the bucket's largest dims is estimated first, and again with the
  compiled form's own buffers and scratch (``max_memory``, else the backend's default budget);
* the first run (which includes the backend's lazy compilation) gets a generous bound; the
  backend's profile then times warm runs against ``profile_timeout``. A candidate whose first
  run and one profiled run are each over ``SLOW`` times the fastest timed so far is timed no
  further: its rank among the fast ones cannot matter, and the trials of such candidates were
  most of a DLRM search's time on the NumPy backend;
* outputs must be finite wherever the reference candidate's were, and agree with it (relative
  error below ``AGREEMENT``): the first candidate that runs is the reference (the program times
  the genome without backend kernels first), and every later one computes the same function or
  is dropped - a safety net under the rules and the hand kernels. A candidate whose integer or
  bool outputs alone differ (the argmax of bf16 logits whose top two are within rounding: correct
  implementations pick either) is checked again on a second sample of inputs, and dropped only
  when it differs there too;
* distinct genomes that extract to the same graph are timed once;
* at the end the reference and the three fastest are re-timed, interleaved, and the one with
  the fastest run wins if it also beats the reference in most back-to-back pairs, else the next
  fastest that does (a few noisy trials, or a load that drifts during the search, must not pick
  a slower graph).
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager

import numpy as np

from ..ir import dtypes as dt
from ..ir.expr import evaluate
from .memory import CandidateRejected, check_memory_budget, estimate_peak_bytes

FINALISTS = 3  # fastest candidates kept compiled for the final re-timing
FIRST_RUN_BOUND = 60.0  # seconds a candidate's first run may take, compilation included
AGREEMENT = 2e-2  # relative L2 error; loose enough for bf16 accumulation-order differences
# times the fastest candidate's seconds past which a candidate is left at one profiled run: two runs
# that slow (its first, then a warm one) are not a hiccup of a shared machine
SLOW = 4.0
WARM_FIRST_RUN = 0.01  # seconds: a slow candidate's warm first run this long is its time


def llir_peak_bytes(graph, dims) -> int:
    """Peak bytes of the buffers a candidate allocates (every kernel's output, live from its
    step to its last reader's step; arguments and constants not counted, as in the seed's
    max_memory) at ``dims``."""
    order = {n.id: k for k, n in enumerate(graph.live_nodes())}
    last = dict(order)
    for n in graph.live_nodes():
        for i, _ in n.inputs:
            last[i] = max(last[i], order[n.id])
    bufs = []
    for n in graph.live_nodes():
        if n.op in ("Output", "Input", "Constant"):
            continue  # the caller's arguments and captured constants exist anyway
        numel = 1
        for d in n.shape:
            numel *= evaluate(d, dims)
        bufs.append((numel * dt.to_numpy(n.dtype).itemsize, order[n.id], last[n.id]))
    return estimate_peak_bytes(bufs)


def sample_inputs(graph, dims, seed: int = 0, given: dict | None = None) -> list:
    """Arguments for ``graph`` at ``dims``: ``given[k]`` where the caller supplied input k (the
    first call's own weights, say), else random NumPy arrays (floats ~ N(0, 0.5), ints distinct in 0..max(size, 4) - 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for k, hid in enumerate(graph.inputs):
        if given and k in given:
            out.append(given[k])
            continue
        n = graph.nodes[hid]
        shape = tuple(evaluate(d, dims) for d in n.shape)
        npd = dt.to_numpy(n.dtype)
        if n.dtype.is_float:
            arr = (rng.standard_normal(shape) * 0.5).astype(npd)
        elif n.dtype.is_int:
            # distinct values: an index input that scatters rows (a KV cache's slots) must not
            # write one slot twice, or which write lands is up to each candidate's kernel order
            # and correct candidates disagree with the reference
            size = int(np.prod(shape, dtype=np.int64))
            arr = rng.permutation(max(size, 4))[:size].reshape(shape).astype(npd)
        else:
            arr = rng.random(shape) < 0.5
        out.append(np.asarray(arr))
    return out


class CandidateEvaluator:
    """``evaluate(genome) -> seconds`` for one bucket of one program."""

    def __init__(self, extractor, backend, options, run_dims: dict, max_dims: dict, inputs,
                 compile_options: dict | None = None, second_inputs=None):
        self.extractor = extractor
        self.backend = backend
        self.options = options
        self.run_dims = run_dims
        self.max_dims = max_dims
        self.compile_options = compile_options
        self.inputs = [x if backend.is_buffer(x) else backend.from_numpy(x) for x in inputs]
        # the backend's default where none is given: on the host, running out is not an error
        # but the OOM killer ending the process
        if options.max_memory is not None:
            self.max_memory, self.budget = options.max_memory, "max_memory budget"
        else:
            self.max_memory = backend.memory_budget()
            self.budget = (f"{backend.name} backend's default budget (part of the memory "
                           "available; SearchOptions(max_memory=...) sets another)")
        self.reference = None  # outputs of the first candidate that ran
        self._reference_exe = None  # its executable, run again for the second sample
        # () -> a second sample of timing inputs (other random values, the same given ones),
        # made on the first candidate whose integer or bool outputs alone disagree
        self._second_inputs = second_inputs
        self._second = None  # (those inputs as backend buffers, the reference's outputs there)
        self.n_rechecked = 0  # candidates accepted on the second sample
        self.by_graph: dict = {}  # LLIR hash -> seconds or the exception it raised
        self.graphs: dict = {}  # genome -> LLIR (for the winner)
        self.finalists: list = []  # [seconds, LLIR hash, LLIR, executable]: the FINALISTS fastest
        self.reference_entry = None  # the same for the reference candidate, always kept
        self._prepared: dict = {}  # LLIR hash -> executable, compiled by prepare and not timed yet
        # seconds spent in each stage of the search's evaluations (where a first call's time goes):
        # extract, compile (memory checks and the backend's compile), prepare, first run (with
        # what the backend compiles lazily), check, profile, final (the finalists re-timed)
        self.stage_s: dict = {}

    @contextmanager
    def _stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stage_s[name] = self.stage_s.get(name, 0.0) + time.perf_counter() - t0

    def prepare(self, genomes) -> None:
        """Extract a batch of genomes and let the backend start compiling each new graph
        (``Executable.prepare``: the CUDA backend compiles a generation's kernels side by side
        while the next ones are planned); ``__call__`` then times them one by one. Best effort:
        a genome that fails here fails again, and is reported, when it is timed."""
        for genome in genomes:
            try:
                llir, key = self._extract(genome)  # (__call__ finds it again: extract_keyed keeps it)
                if key in self.by_graph or key in self._prepared:
                    continue
                exe = self._compile_within_budget(llir, key)
                with self._stage("prepare"):
                    exe.prepare(self.run_dims)
                self._prepared[key] = exe
            except Exception:
                continue

    def drop_prepared(self) -> None:
        """Forget what prepare compiled for genomes the search stopped before timing."""
        self._prepared.clear()

    def __call__(self, genome) -> float:
        llir, key = self._extract(genome)
        self.graphs[tuple(genome)] = llir
        seen = self.by_graph.get(key)
        if seen is not None:
            if isinstance(seen, BaseException):
                raise seen
            return seen
        try:
            t = self._time(llir, key)
        except Exception as e:
            self.by_graph[key] = e
            raise
        self.by_graph[key] = t
        return t

    def _extract(self, genome) -> tuple:
        """(the genome's LLIR, its structural hash): Extractor.extract_keyed, which keeps every
        extraction (each bucket's search meets many of the same genomes)."""
        with self._stage("extract"):
            return self.extractor.extract_keyed(genome)

    def _compile_within_budget(self, llir, key: str):
        """The graph's executable (the one prepare made, else compiled now); CandidateRejected
        when it is over the memory budget, before compiling where its values alone are."""
        with self._stage("compile"):
            return self._compile_checked(llir, key)

    def _compile_checked(self, llir, key: str):
        values = llir_peak_bytes(llir, self.max_dims)
        check_memory_budget(values, self.max_memory, budget=self.budget)
        exe = self._prepared.pop(key, None)
        if exe is None:
            exe = self.backend.compile(llir, self.compile_options)
        scratch = exe.memory_bytes(self.max_dims) if self.max_memory is not None else None
        if scratch:  # buffers and scratch only the compiled form knows (NumPy's temporaries)
            check_memory_budget(values + scratch, self.max_memory, budget=self.budget)
        return exe

    def _time(self, llir, key: str) -> float:
        opts = self.options
        exe = self._compile_within_budget(llir, key)
        # The first run also builds what the backend compiles lazily (kernel modules, CUDA
        # graphs), so only a generous bound applies to it; profile_timeout applies to warm runs.
        with self._stage("first run"):
            t0 = time.perf_counter()
            outs = exe.run(self.inputs, self.run_dims)
            exe.synchronize()
            first = time.perf_counter() - t0
        bound = max(FIRST_RUN_BOUND, 10 * (opts.profile_timeout or 0))
        if first > bound:
            raise TimeoutError(f"first run (with its compilation) took {first:.3g} s > {bound:g} s")
        with self._stage("check"):
            self._check(outs, exe)
        with self._stage("profile"):
            t = self._profile(exe, first)
        entry = [t, key, llir, exe]
        if self.reference_entry is None:
            self.reference_entry = entry
        else:
            self.finalists.append(entry)
            self.finalists.sort(key=lambda e: e[0])
            del self.finalists[FINALISTS:]  # drop the rest's executables (device memory)
        return t

    def _profile(self, exe, first: float) -> float:
        """The candidate's seconds: its backend's profile over ``trials`` runs, or over one run
        when its first run and that one are each over SLOW times the fastest so far, or its first
        run alone where the backend's first run is a warm one (nothing compiled lazily:
        ``Executable.first_run_is_warm``) and that run took over twice as long (and over
        WARM_FIRST_RUN): one run that slow is no hiccup of a shared machine either."""
        timeout = self.options.profile_timeout or 1e9
        entries = self._entries()
        slow = SLOW * min(e[0] for e in entries) if entries else math.inf
        if first > slow:
            # (a run this long is not a first run's allocations and cold caches)
            if getattr(exe, "first_run_is_warm", False) and first > max(2 * slow, WARM_FIRST_RUN):
                return first
            # (one warm run, not the first alone: the first includes lazy compilation)
            t = exe.profile(self.inputs, self.run_dims, 1, timeout)
            if t > slow:
                return t
        return exe.profile(self.inputs, self.run_dims, self.options.trials, timeout)

    def _entries(self) -> list:
        """The reference candidate's entry (when one ran), then the finalists'."""
        return ([self.reference_entry] if self.reference_entry else []) + self.finalists

    def final(self, rounds: int = 4):
        """Re-time the reference and the fastest candidates, interleaved so that noise hits
        them alike, and return ``(seconds, LLIR, executable)`` of the one whose fastest run is
        fastest: a few noisy trials during the search must not pick a slower graph."""
        with self._stage("final"):
            return self._final(rounds)

    def _final(self, rounds: int):
        entries = self._entries()
        if len(entries) == 1:
            t, _, llir, exe = entries[0]
            return t, llir, exe
        times = [[] for _ in entries]
        for _ in range(rounds):
            for k, (_, _, _, exe) in enumerate(entries):
                times[k].append(self._retime(exe, self.options.trials))
        # the fastest of many runs: noise on a shared machine only ever adds time
        fastest = [min(ts) for ts in times]
        if all(t == math.inf for t in fastest):  # all over the timeout now: the search's times
            e = min(entries, key=lambda e: e[0])
            return e[0], e[2], e[3]
        best = 0
        for k in sorted(range(len(entries)), key=lambda k: fastest[k]):
            # a finalist must also beat the reference head to head; one that does not (a lucky
            # fast run) hands over to the next finalist, not straight to the reference, which
            # may be much slower than the others (the generic genome, no backend kernels)
            if k == 0 or self.reference_entry is None or self._beats(entries[k][3], entries[0][3]):
                best = k
                break
        return fastest[best], entries[best][2], entries[best][3]

    def _beats(self, challenger, reference, pairs: int = 7) -> bool:
        """True when ``challenger`` is faster than ``reference`` in most of ``pairs`` back-to-back
        comparisons (a load that drifts during the search cannot fake that)."""
        wins = 0
        for _ in range(pairs):
            t_ref = self._retime(reference, 1)
            t_new = self._retime(challenger, 1)
            wins += t_new < t_ref
        return wins > pairs // 2

    def _retime(self, exe, trials: int) -> float:
        """Seconds of a finalist timed again; one over profile_timeout this time (a load that
        came since, or a candidate close to the bound) is infinitely slow, not an error that
        would end a search that already has its answer."""
        try:
            return exe.profile(self.inputs, self.run_dims, trials, self.options.profile_timeout or 1e9)
        except TimeoutError:
            return math.inf

    def _check(self, outs, exe=None) -> None:
        """Reject a candidate whose outputs are not the reference's (see the module doc)."""
        if self.reference is None:
            self.reference = [self.backend.keep_output(o) for o in outs]
            self._reference_exe = exe
            return
        wrong = _disagreements(self.backend, outs, self.reference)
        if not wrong:
            return
        if (exe is None or self._second_inputs is None or self._reference_exe is None
                or not all(self.reference[k].discrete for k, _ in wrong)):
            raise CandidateRejected(wrong[0][1])
        inputs, reference = self._second_sample()  # (its time is the check's)
        again = _disagreements(self.backend, exe.run(inputs, self.run_dims), reference)
        if again:
            raise CandidateRejected(f"{wrong[0][1]}; and on a second sample of inputs: {again[0][1]}")
        self.n_rechecked += 1

    def _second_sample(self) -> tuple:
        """(the second sample of inputs as backend buffers, the reference's outputs for it)."""
        if self._second is None:
            inputs = [x if self.backend.is_buffer(x) else self.backend.from_numpy(x)
                      for x in self._second_inputs()]
            outs = self._reference_exe.run(inputs, self.run_dims)
            self._second = (inputs, [self.backend.keep_output(o) for o in outs])
        return self._second


def _disagreements(backend, outs: list, reference: list) -> list:
    """[(output index, why)] where ``outs`` differ from the reference's kept outputs: NaN or Inf
    where the reference is finite, or a relative L2 error over AGREEMENT (differences all below
    1e-5 pass, whatever their relative size)."""
    wrong = []
    distances = backend.output_distances(outs, reference)
    for k, (out, ref, d) in enumerate(zip(outs, reference, distances)):
        if not d.finite:
            wrong.append((k, f"output {k} has NaN/Inf where the reference candidate is finite"))
            continue
        if d.biggest <= 1e-5:
            continue
        err = d.l2 / ref.norm
        if err > AGREEMENT:
            values = ""
            if ref.shown is not None:  # (a picked token, say: what each picked)
                values = f": {np.asarray(backend.to_numpy(out)).ravel().tolist()} against {ref.shown}"
            wrong.append((k, f"output {k} disagrees with the reference candidate (relative error "
                             f"{err:.2e}){values}"))
    return wrong

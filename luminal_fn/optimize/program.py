"""A lowered program: the e-graph of one traced graph for one backend, searched per dim bucket.

``lower_graph`` makes the Lowered stage; its e-graph is built when first needed: by the stage's
views (``as_text``, ``stats``, ``rule_report``) or by a bucket whose LLIR the search cache lacks. ``Program.compile`` searches every bucket
combination whose representative dims are known (a dim without a bucket spec is searched at the
value of the first call that needs it), reusing the on-disk cache, and returns a
:class:`Runner` that dispatches each call to its bucket's executable.
"""
from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager

from ..ir.expr import evaluate, render
from ..ir.llir import GENERIC_KINDS
from .buckets import BucketError, BucketSet
from .cache import SearchCache, make_key
from .egraph import build_egraph, rule_report, rules_version
from .evaluate import CandidateEvaluator, sample_inputs
from .extract import Extractor
from .options import SearchOptions
from .progress import build_progress, search_progress
from .search import genetic_search


class BucketPlan:
    """The searched implementation of one bucket combination."""

    def __init__(self, bucket, dims, llir, executable, result=None, cached=False, search_s=0.0):
        self.bucket = bucket
        self.dims = dims  # the representative dims it was searched at
        self.llir = llir
        self.executable = executable
        self.result = result  # SearchResult, None on a cache hit
        self.cached = cached
        self.search_s = search_s

    def describe(self) -> str:
        head = f"bucket {self.bucket.describe(self.dims)}"
        if self.cached:
            head += ": from the search cache"
        elif self.result is not None:
            head += f": {self.result.summary()}"
        return head


SEARCH_GC_THRESHOLD = 10_000  # allocations between the cyclic collector's young passes while planning
_GC_LOCK = threading.Lock()
_GC_PAUSE = [0, None]  # plannings under way (any thread), the thresholds to restore


@contextmanager
def fewer_collections():
    """The cyclic collector's young passes a fourteenth as often while buckets are planned
    (the threshold 700 -> SEARCH_GC_THRESHOLD, restored after): a search allocates candidate
    after candidate while ~100k long-lived objects (the e-graph, the kept extractions) sit in
    the heap, and the passes took a sixth of a Llama candidate's extraction and planning on the
    CPU (benchmarks/cuda_plan_time.py --default-gc). Collection stays off where it was off."""
    with _GC_LOCK:
        if _GC_PAUSE[0] == 0:
            _GC_PAUSE[1] = gc.get_threshold()
            first, *older = _GC_PAUSE[1]
            if first:  # (0: automatic collection is off; left so)
                gc.set_threshold(max(first, SEARCH_GC_THRESHOLD), *older)
        _GC_PAUSE[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSE[0] -= 1
            if _GC_PAUSE[0] == 0:
                gc.set_threshold(*_GC_PAUSE[1])


def _settle_garbage(program):
    """After planning: the candidates' extractions dropped (kept for the buckets of one
    planning only: a jitted function's program lives as long as the function), then a full
    collection. Building the e-graph and searching leave many short-lived cycles and grow the
    long-lived heap (a Llama step keeps ~150k objects), which brings the collector's next full
    pass closer; that pass costs 40-80 ms and would otherwise fall inside some later call, such
    as a prefill timed for its latency."""
    if program._extractor is not None:
        program._extractor.forget_extractions()
    gc.collect()


class Runner:
    """Runs the executable chosen for the dims of each call."""

    def __init__(self, program: "Program"):
        self.program = program
        self.buckets = BucketSet(program.buckets, program.symbols)
        self.plans: dict = {}
        with fewer_collections():
            for b in self.buckets.combinations():
                if not b.needs_call_dims:
                    self.plans[b.index] = program.plan_bucket(b, None)
        if not program.symbols:
            self.run = self.plans[0].executable.run  # static shapes: no dispatch at all
        _settle_garbage(program)

    def run(self, bufs, dims):
        idx = self.buckets.select(dims)
        plan = self.plans.get(idx)
        if plan is None:
            with fewer_collections():
                plan = self.plans[idx] = self.program.plan_bucket(self.buckets[idx], dims)
            _settle_garbage(self.program)
        return plan.executable.run(bufs, dims)

    def as_text(self) -> str:
        parts = []
        for idx in sorted(self.plans):
            plan = self.plans[idx]
            parts.append(f"{plan.describe()}\n{plan.llir.as_text()}\n  backend: "
                         f"{plan.executable.describe()}")
        return "\n".join(parts) if parts else "no bucket compiled yet"

    def cost(self) -> dict:
        out = {}
        for plan in self.plans.values():
            r = plan.result
            out[plan.bucket.describe(plan.dims)] = {
                "best_time_s": None if r is None else r.best_time,
                "candidates": 0 if r is None else r.n_evaluated,
                "search_s": plan.search_s, "cached": plan.cached,
                # where the search's time went, by stage of its evaluations (seconds)
                "stage_s": {} if r is None else dict(r.stage_s),
                # accepted on a second sample of inputs: their integer or bool outputs alone had
                # differed (a pick among near-equal values)
                "rechecked": 0 if r is None else r.n_rechecked,
                "kernels": sum(1 for n in plan.llir.live_nodes() if n.op not in ("Input", "Output", "Constant")),
                # what each timed candidate gave, in order: seconds, or why it was dropped
                "timed": [] if r is None else [c.time if c.ok else f"{c.kind}: {c.reason}" for c in r.history],
            }
        return out


class Program:
    """One traced graph's e-graph for one backend (the Lowered stage)."""

    def __init__(self, graph, backend, search=None, buckets=None, symbols=(), fn_name="fn",
                 dim_checks=(), donated=()):
        self.graph = graph
        # inputs the caller gives up: the final executable may write them in place (search
        # candidates may not: they run many times on the same timing inputs)
        self.donated = tuple(donated)
        self.dim_checks = list(dim_checks)  # (lhs, rhs) Exprs every call satisfies
        self.backend = backend
        self.options = SearchOptions.from_user(search)
        self.buckets = buckets
        self.symbols = list(symbols)
        self.fn_name = fn_name
        BucketSet(buckets, self.symbols)  # validate the spec before the long work
        self._rules = list(backend.rule_sources())
        self.rules_version = rules_version(self._rules)
        self._egraph = self._extractor = None  # built on first need (see egraph_built)
        self._build_lock = threading.Lock()
        self._example = self._random = None  # timing inputs while compile() runs
        # the genomes other buckets chose (searched, or found in the search cache): a later
        # bucket's search times them early, as known-good starting points whose kernels are
        # mostly compiled already
        self._winners: list = []

    # ---- the e-graph, built when first needed ------------------------------------------------
    @property
    def egraph_built(self) -> bool:
        """Whether the e-graph exists. A compile whose every bucket finds its LLIR in the search
        cache never builds it; the stage views below and a bucket that must be searched do."""
        return self._egraph is not None

    @property
    def egraph(self):
        if self._egraph is None:  # (the lock only around the build: views read it often)
            with self._build_lock:  # two threads' first calls in new buckets: one build
                if self._egraph is None:
                    self._build()
        return self._egraph

    def _build(self):
        with build_progress(7, self.options.progress, desc=f"e-graph {self.fn_name}") as bar:
            egraph = build_egraph(self.graph, self._rules, progress=bar)
        self._extractor = Extractor(egraph, self.graph, self.backend.kernel_kinds, self.fn_name)
        self._egraph = egraph

    @property
    def extractor(self) -> Extractor:
        if self._extractor is None:
            self.egraph  # noqa: B018  (builds both)
        return self._extractor

    # ---- the Lowered stage's views ------------------------------------------------------------
    def stats(self) -> dict:
        s = self.egraph.stats
        return {"hlir_nodes": len(self.graph), "eclasses": s["classes"], "enodes": s["nodes"],
                "genes": len(self.extractor.genes), "choices": self.extractor.space().count(),
                "build_s": s["total_s"], "stage_s": dict(s["stages"]), "skipped": s["skipped"]}

    def rule_report(self, top: int = 15) -> str:
        """The slowest rules of this e-graph's build, with their match counts."""
        return rule_report(self.egraph.stats, top)

    def as_text(self) -> str:
        st = self.stats()
        lines = [f"e-graph of {self.fn_name}: {st['hlir_nodes']} HLIR nodes -> {st['eclasses']} "
                 f"e-classes, {st['enodes']} e-nodes; {st['genes']} choices (genes), "
                 f"{st['choices']}{'+' if st['choices'] >= 10**6 else ''} implementations; built in "
                 f"{st['build_s'] * 1e3:.0f} ms"]
        for gene in self.extractor.genes:
            opts = self.extractor.options[gene.name]
            lines.append(f"  {gene.name}: " + " | ".join(_enode_text(self.egraph, n) for n in opts))
        lines.append("cheapest extraction (before search):")
        lines.append(self.extractor.extract().as_text())
        return "\n".join(lines)

    # ---- searching ----------------------------------------------------------------------------
    def _satisfying(self, bucket, dims: dict) -> dict:
        """``dims``, or the nearest values inside the bucket that meet every size equality the
        trace assumed (a reshape(-1, 4) of s needs s % 4 == 0): the search must time the
        function at dims a call could have."""
        def ok(d):
            return all(evaluate(lhs, d) == evaluate(rhs, d) for lhs, rhs in self.dim_checks)

        if not self.dim_checks or ok(dims):
            return dims
        for step in range(1, 4097):
            for sign in (1, -1):
                cand = dict(dims)
                for p in bucket.parts:
                    if p.dim in cand:
                        cand[p.dim] = min(max(dims[p.dim] + sign * step, p.lo), p.hi)
                if ok(cand):
                    return cand
        checks = ", ".join(f"{render(a)} == {render(b)}" for a, b in self.dim_checks)
        raise BucketError(f"{self.fn_name}: no dims near {dims} inside bucket "
                          f"{bucket.describe(dims)} satisfy what the trace assumed ({checks}); "
                          f"give the bucket a representative that does, as (min, max, rep)")

    def _inputs_for(self, dims) -> list:
        """Timing inputs at ``dims``: the example's static-shaped arguments, and random arrays
        for the rest (static-shaped random ones made once for every bucket)."""
        given = dict(self._example or {})
        cache = self._random if self._random is not None else {}
        for k, hid in enumerate(self.graph.inputs):
            node = self.graph.nodes[hid]
            if k not in given and k in cache and all(isinstance(d, int) for d in node.shape):
                given[k] = cache[k]
        out = sample_inputs(self.graph, dims, self.options.seed, given)
        for k, hid in enumerate(self.graph.inputs):
            if k not in given and all(isinstance(d, int) for d in self.graph.nodes[hid].shape):
                cache[k] = out[k]
        return out

    def _second_inputs(self, dims):
        """() -> other timing inputs at ``dims`` (the same example arguments, other random
        values), for a candidate whose integer or bool outputs alone differ from the reference's."""
        given = dict(self._example or {})
        return lambda: sample_inputs(self.graph, dims, self.options.seed + 1, given)

    def compile(self, example: dict | None = None) -> Runner:
        """Search every bucket (see the module doc). ``example``: input index -> an argument
        of a real call (a backend buffer or NumPy array); static-shaped ones are timed with
        instead of random data (the weights, usually: large, and realistic)."""
        self._example = {}
        for k, x in (example or {}).items():
            node = self.graph.nodes[self.graph.inputs[k]]
            if all(isinstance(d, int) for d in node.shape) and tuple(x.shape) == node.shape:
                self._example[k] = x
        self._random: dict = {}
        try:
            return Runner(self)
        finally:
            self._example = self._random = None  # do not keep the caller's arrays alive

    def plan_bucket(self, bucket, call_dims) -> BucketPlan:
        t0 = time.perf_counter()
        opts = self.options
        run_dims = self._satisfying(bucket, bucket.representative(call_dims))
        max_dims = bucket.max_dims(call_dims)
        cache = SearchCache(opts.cache_dir) if opts.cache else None
        # the options that change a search's outcome are part of its identity: a larger limit,
        # another seed, memory budget or patience searches again
        searched = (f"{bucket.describe(call_dims)}|limit={opts.limit}|seed={opts.seed}"
                    f"|max_memory={opts.max_memory}|patience={opts.patience}|min_gain={opts.min_gain}")
        key = make_key(self.graph.structural_hash(), searched, self.backend.name,
                       self.backend.device_name(), rules_version=self.rules_version)
        # the backend plans buffers and kernels once for the whole bucket (its largest dims)
        compile_options = {"buckets": {p.dim: [(p.lo, p.hi)] for p in bucket.parts
                                       if not p.unbounded}}
        llir = cache.lookup_llir(key) if cache is not None else None  # needs no e-graph
        if llir is not None and not self._runs(llir):
            llir = None  # (a kernel kind this backend no longer offers: extract again)
        if llir is None:
            ex = self.extractor  # builds the e-graph on the first need: not search time
            t0 = time.perf_counter()
            genome = cache.lookup(key, ex.genes) if cache is not None else None
            if genome is not None:  # an entry without a usable LLIR: extract it, and keep it
                self._won(genome)
                llir = ex.extract(genome)
                cache.store(key, genome, ex.genes, cache.read_meta(key), llir=llir)
        if llir is not None:
            return BucketPlan(bucket, run_dims, llir, self._final(llir, compile_options),
                              cached=True, search_s=time.perf_counter() - t0)
        evaluate = CandidateEvaluator(ex, self.backend, opts, run_dims, max_dims,
                                      self._inputs_for(run_dims), compile_options,
                                      second_inputs=self._second_inputs(run_dims))
        desc = f"search {self.fn_name}" + (f" [{bucket.describe(call_dims)}]" if self.symbols else "")
        with search_progress(opts.limit, opts.progress, desc=desc) as bar:
            # the reference first (its outputs check every later candidate), then the cheapest,
            # then other buckets' choices, then those that read a rule's backend kernel where
            # the cheapest inlines its form
            result = genetic_search(ex.space(), evaluate, opts, report=bar,
                                    initial=[ex.generic_genome(), (0,) * len(ex.genes),
                                             *self._winners, *ex.kernel_genomes()])
        evaluate.drop_prepared()
        best_time, llir, exe = evaluate.final()
        genome = next(g for g, l in evaluate.graphs.items() if l is llir)
        result.best_genome, result.best_time = genome, best_time
        result.stage_s = dict(evaluate.stage_s)
        result.n_rechecked = evaluate.n_rechecked
        self._won(genome)
        if cache is not None:
            cache.store(key, genome, ex.genes,
                        meta={"fn": self.fn_name, "bucket": bucket.describe(call_dims),
                              "best_time_s": best_time}, llir=llir)
        if self.donated:
            exe = self._final(llir, compile_options)
        return BucketPlan(bucket, run_dims, llir, exe, result, search_s=time.perf_counter() - t0)

    def _won(self, genome) -> None:
        genome = tuple(genome)
        if genome not in self._winners:
            self._winners.append(genome)

    def _runs(self, llir) -> bool:
        """Whether every kernel of a stored LLIR is one this backend still offers."""
        kinds = {n.attrs.get("name") for n in llir.live_nodes() if n.op == "CustomOp"}
        return kinds <= set(GENERIC_KINDS) | set(self.backend.kernel_kinds)

    def _final(self, llir, compile_options: dict):
        """The executable calls run: told which inputs are donated (a backend may reuse them)."""
        if self.donated:
            compile_options = dict(compile_options, donated=self.donated)
        return self.backend.compile(llir, compile_options)


def _enode_text(eg, n) -> str:
    if n.op in ("Un", "Bin"):
        return f"{n.op}:{eg.literal(n.children[0])}"
    if n.op in ("FUn", "FBin"):
        return f"{n.op}:{eg.literal(n.children[0])}"
    if n.op == "Kernel":
        return f"Kernel:{eg.literal(n.children[0])}"
    return n.op


def lower_graph(graph, backend, search=None, buckets=None, symbols=(), fn_name="fn",
                dim_checks=(), donated=()) -> Program:
    return Program(graph, backend, search, buckets, symbols, fn_name, dim_checks, donated)

"""Genetic search over an abstract choice space, timed by a caller-supplied evaluate function.

The e-graph side turns every e-class with more than one implementation into a `Gene` (its
number of options); a genome is a tuple holding one option index per gene. This module knows
nothing of e-graphs: it breeds genomes, asks `space.is_valid` before timing one, and keeps the
fastest. The loop follows the seed (Luminal's `Graph::search_options`):

1. random valid genomes are timed one at a time until one succeeds (the first parent);
2. each generation mutates the best `keep_best` parents (1 to `mutations` gene flips each) into
   `generation_size` offspring; genomes already tried (or found invalid) are skipped by hash;
3. a generation in which nothing succeeded is followed by a generation of fresh random genomes;
4. the search stops at `limit` timed candidates, at `group_timeout`, or once every genome of
   the space has been tried.

Candidates whose evaluate raises `CandidateRejected` (memory budget, NaN/Inf outputs),
`TimeoutError` or any other Exception are dropped and counted. The same seed and the same
evaluate results give the same search.
"""
from __future__ import annotations

import collections
import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..frontend.errors import LuminalError
from .memory import CandidateRejected, check_memory_budget, estimate_peak_bytes
from .options import SearchOptions

__all__ = ["Gene", "ChoiceSpace", "Candidate", "SearchResult", "SearchError", "CandidateRejected",
           "genetic_search", "estimate_peak_bytes", "check_memory_budget"]

Genome = tuple

# Spaces up to this many genomes are enumerated (in a seeded random order) when fresh genomes are
# needed, so every genome is reachable and exhaustion is exact; larger ones are sampled.
ENUMERATE_LIMIT = 1 << 16
# Sampling attempts per wanted genome before a generation gives up (the seed uses 100).
ATTEMPTS_PER_GENOME = 100


class SearchError(LuminalError, RuntimeError):
    """No candidate of the search succeeded; `history` holds every attempt."""

    def __init__(self, message: str, history=()):
        super().__init__(message)
        self.history = list(history)


@dataclass(frozen=True)
class Gene:
    """One choice: an e-class with `n_options` implementations."""

    name: str
    n_options: int

    def __post_init__(self):
        if isinstance(self.n_options, bool) or not isinstance(self.n_options, int) \
                or self.n_options < 1:
            raise ValueError(f"Gene {self.name!r}: n_options must be an int >= 1, "
                             f"got {self.n_options!r}")


class ChoiceSpace:
    """The genes to choose and which genomes are valid.

    Pass `validator(genome) -> bool` or subclass and override `is_valid` (the extraction rejects
    genomes whose choices are inconsistent). `random_genome` may be overridden to bias sampling.
    """

    def __init__(self, genes: Iterable, validator: Callable[[Genome], bool] | None = None):
        self.genes: list[Gene] = [g if isinstance(g, Gene) else Gene(*g) for g in genes]
        self._validator = validator

    def is_valid(self, genome: Genome) -> bool:
        return True if self._validator is None else bool(self._validator(genome))

    def count(self, cap: int = 10**6) -> int:
        """The number of genomes (valid or not), capped at `cap`."""
        return _product(self.genes, cap)

    def random_genome(self, rng: random.Random) -> Genome:
        return tuple(rng.randrange(g.n_options) for g in self.genes)

    def genome_at(self, index: int) -> Genome:
        """The genome numbered `index` in mixed radix (gene 0 varies slowest)."""
        digits = []
        for g in reversed(self.genes):
            index, d = divmod(index, g.n_options)
            digits.append(d)
        return tuple(reversed(digits))

    def describe(self, genome: Genome) -> dict:
        return {g.name: v for g, v in zip(self.genes, genome)}


@dataclass(frozen=True)
class Candidate:
    """One timed genome: `kind` is "ok", "timeout", "rejected" or "error"."""

    genome: Genome
    kind: str
    time: float | None = None  # seconds, for kind == "ok"
    reason: str | None = None  # why it failed
    elapsed: float = 0.0  # wall seconds evaluate took

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


@dataclass
class SearchResult:
    best_genome: Genome
    best_time: float
    history: list = field(default_factory=list)  # Candidate per timed genome, in order
    n_timeouts: int = 0
    n_errors: int = 0
    n_rejected: int = 0
    n_invalid: int = 0  # genomes the space rejected; never evaluated
    wall_time: float = 0.0
    stop_reason: str = "limit"  # limit | patience | exhausted | group_timeout | no_new_genomes | no_choices
    space_size: int = 1  # capped genome count
    # seconds of the evaluations' stages (extract, compile, prepare, first run, check, profile,
    # where the evaluator reports them; then final, the finalists re-timed after wall_time)
    stage_s: dict = field(default_factory=dict)
    # candidates whose integer or bool outputs alone differed from the reference's and that
    # agreed on a second sample of inputs (where the evaluator reports them)
    n_rechecked: int = 0

    @property
    def n_evaluated(self) -> int:
        return len(self.history)

    @property
    def n_ok(self) -> int:
        return sum(1 for c in self.history if c.ok)

    def summary(self) -> str:
        return (f"{self.n_evaluated} candidates timed ({self.n_ok} ok, {self.n_timeouts} timed "
                f"out, {self.n_rejected} rejected, {self.n_errors} raised; {self.n_invalid} "
                f"invalid skipped{self._rechecked()}) in {self.wall_time:.2f} s{self._stages()}; best "
                f"{self.best_time * 1e3:.4g} ms; stopped: {self.stop_reason}")

    def _rechecked(self) -> str:
        return f"; {self.n_rechecked} ok on a second sample" if self.n_rechecked else ""

    def _stages(self) -> str:
        if not self.stage_s:
            return ""
        return " (" + ", ".join(f"{name} {s:.2f}" for name, s in self.stage_s.items()) + ")"


def _now() -> float:
    return time.perf_counter()


def _product(genes, cap: int) -> int:
    total = 1
    for g in genes:
        total *= g.n_options
        if total >= cap:
            return cap
    return total


def _failure_summary(history, top: int = 3) -> str:
    reasons = collections.Counter(f"{c.kind}: {c.reason}" for c in history if not c.ok)
    return "; ".join(f"{n}x {r}" for r, n in reasons.most_common(top))


class _Search:
    """State of one genetic search; `run` drives it."""

    def __init__(self, space: ChoiceSpace, evaluate, options: SearchOptions, seed: int, report):
        self.space, self.evaluate, self.options, self.report = space, evaluate, options, report
        self.clock = _now  # read at construction so tests can substitute a fake clock
        self.rng = random.Random(seed)
        # The raw product of option counts (invalid genomes included), computed from the genes
        # so that a subclass's own count() cannot desynchronise enumeration and exhaustion.
        product = _product(space.genes, 10**18)
        self.total = product if product < 10**18 else None  # None: too many to ever exhaust
        self.enumerable = product <= ENUMERATE_LIMIT
        self.order = None  # shuffled genome indices, made when first needed
        self.order_pos = 0
        self.mutable = [i for i, g in enumerate(space.genes) if g.n_options > 1]
        self.seen: set = set()
        self.history: list[Candidate] = []
        self.counts = collections.Counter()
        self.n_invalid = 0
        self.parents: list[tuple[float, int, Genome]] = []  # (time, order found, genome)
        self.gained_at = 0  # how many candidates had been timed at the last gain (patience)
        self.start = self.clock()

    # ---- stopping -----------------------------------------------------------------------------
    def exhausted(self) -> bool:
        return self.total is not None and len(self.seen) >= self.total

    def out_of_time(self) -> bool:
        t = self.options.group_timeout
        return t is not None and self.clock() - self.start >= t

    def budget_left(self) -> int:
        return self.options.limit - len(self.history)

    def out_of_patience(self) -> bool:
        """Whether ``patience`` candidates in a row brought no gain (once one has run)."""
        return self.options.patience is not None and bool(self.parents) and self.patience_left() <= 0

    def patience_left(self) -> int:
        """Candidates that may still be timed without a gain before patience stops the search
        (the budget's when there is no patience, or nothing has run yet)."""
        p = self.options.patience
        if p is None or not self.parents:
            return self.budget_left()
        return p - (len(self.history) - self.gained_at)

    # ---- genomes ------------------------------------------------------------------------------
    def _admit(self, genome: Genome) -> bool:
        """Mark `genome` tried; True when it is new and valid (so it should be timed)."""
        if genome in self.seen:
            return False
        self.seen.add(genome)
        if not self.space.is_valid(genome):
            self.n_invalid += 1
            return False
        return True

    def fresh(self, n: int) -> list:
        """Up to `n` new valid genomes drawn at random."""
        out = []
        if self.enumerable:
            if self.order is None:
                self.order = list(range(self.total))
                self.rng.shuffle(self.order)
            while len(out) < n and self.order_pos < len(self.order):
                g = self.space.genome_at(self.order[self.order_pos])
                self.order_pos += 1
                if self._admit(g):
                    out.append(g)
            return out
        attempts = 0
        while len(out) < n and attempts < n * ATTEMPTS_PER_GENOME:
            attempts += 1
            g = tuple(self.space.random_genome(self.rng))
            if self._admit(g):
                out.append(g)
        return out

    def mutate(self, parent: Genome) -> Genome:
        genes = self.space.genes
        g = list(parent)
        for _ in range(self.rng.randint(1, self.options.mutations)):
            i = self.mutable[self.rng.randrange(len(self.mutable))]
            v = self.rng.randrange(genes[i].n_options - 1)  # a different option than now
            g[i] = v + 1 if v >= g[i] else v
        return tuple(g)

    def offspring(self, n: int) -> list:
        """Up to `n` new valid mutants, the budget split evenly over the parents."""
        if not self.mutable:
            return []
        out = []
        per_parent = -(-n // len(self.parents))
        for _, _, parent in self.parents:
            want = min(per_parent, n - len(out))
            got = attempts = 0
            while got < want and attempts < want * ATTEMPTS_PER_GENOME and not self.exhausted():
                attempts += 1
                g = self.mutate(parent)
                if self._admit(g):
                    out.append(g)
                    got += 1
            if len(out) >= n:
                break
        return out

    # ---- timing -------------------------------------------------------------------------------
    def prepare(self, genomes: list) -> None:
        """Let the evaluator start work on genomes about to be timed (its ``prepare``, if any:
        a backend may compile a generation's kernels side by side)."""
        prepare = getattr(self.evaluate, "prepare", None)
        if prepare is not None and genomes:
            prepare(list(genomes))

    def time_one(self, genome: Genome) -> Candidate:
        t0 = self.clock()
        timeout = self.options.profile_timeout
        try:
            t = self.evaluate(genome)
            try:
                t = float(t)
            except (TypeError, ValueError):
                raise TypeError(f"evaluate returned {t!r}, not a time in seconds") from None
            if not math.isfinite(t) or t < 0:
                c = Candidate(genome, "rejected", reason=f"evaluate returned time {t!r}")
            elif timeout is not None and t > timeout:
                c = Candidate(genome, "timeout", reason=f"took {t:.3g} s > profile_timeout "
                                                        f"{timeout:g} s")
            else:
                c = Candidate(genome, "ok", time=t)
        except CandidateRejected as e:
            c = Candidate(genome, "rejected", reason=str(e.reason))
        except TimeoutError as e:
            c = Candidate(genome, "timeout", reason=str(e) or "timed out")
        except MemoryError as e:
            c = Candidate(genome, "rejected", reason=f"out of memory {e}".strip())
        except Exception as e:  # a broken candidate must not end the search
            c = Candidate(genome, "error", reason=f"{type(e).__name__}: {e}"[:300])
        c = Candidate(c.genome, c.kind, c.time, c.reason, self.clock() - t0)
        self.history.append(c)
        self.counts[c.kind] += 1
        if c.ok:
            best = self.best_time()  # (the parents are sorted: the fastest so far is the first)
            if best is None or c.time < best * (1 - self.options.min_gain):
                self.gained_at = len(self.history)
            self.parents.append((c.time, len(self.history), genome))
            self.parents.sort()
            del self.parents[self.options.keep_best:]
        if self.report is not None:
            self.report(c, len(self.history), self.best_time())
        return c

    def best_time(self):
        return self.parents[0][0] if self.parents else None

    # ---- the loop -----------------------------------------------------------------------------
    def run(self, initial: Sequence[Genome]) -> str:
        """Time candidates until a stop condition; returns why it stopped."""
        # Known-good genomes first (a previous bucket's winner, a cached choice), then random
        # genomes one at a time until something succeeds.
        first = [tuple(g) for g in initial]
        first = [g for g in first if len(g) == len(self.space.genes) and self._admit(g)]
        self.prepare(first[:self.budget_left()])
        for g in first:
            if self.budget_left() <= 0:
                return "limit"
            if self.history and self.out_of_time():
                return "group_timeout"
            if self.out_of_patience():
                return "patience"
            self.time_one(g)
        while not self.parents:
            if self.budget_left() <= 0:
                return "limit"
            if self.history and self.out_of_time():
                return "group_timeout"
            batch = self.fresh(1)
            if not batch:
                return "exhausted" if self.exhausted() else "no_new_genomes"
            self.time_one(batch[0])

        resample = False
        while True:
            if self.budget_left() <= 0:
                return "limit"
            if self.exhausted():
                return "exhausted"
            if self.out_of_time():
                return "group_timeout"
            if self.out_of_patience():
                return "patience"
            # (no more than patience may still time: a generation prepared past it is work
            # thrown away when the search stops)
            n = min(self.budget_left(), self.options.generation_size, self.patience_left())
            batch = self.fresh(n) if resample else self.offspring(n)
            if not batch and not resample:
                batch = self.fresh(n)  # the parents' neighbourhood is used up: jump elsewhere
            if not batch:
                return "exhausted" if self.exhausted() else "no_new_genomes"
            any_ok = False
            self.prepare(batch)
            for g in batch:
                if self.out_of_time():
                    return "group_timeout"
                if self.out_of_patience():
                    return "patience"
                any_ok |= self.time_one(g).ok
            resample = not any_ok


def genetic_search(space: ChoiceSpace, evaluate: Callable[[Genome], float],
                   options: SearchOptions | None = None, rng_seed: int | None = None, report=None,
                   initial: Sequence[Genome] = ()) -> SearchResult:
    """Pick the genome of `space` whose `evaluate(genome)` (seconds) is smallest.

    evaluate may raise `CandidateRejected`, `TimeoutError` or any Exception to drop a candidate.
    Where it has a ``prepare(genomes)`` method, each batch of genomes is given to it before they
    are timed one by one (work it can start ahead, such as compiling them side by side).
    rng_seed overrides ``options.seed``. report, if given, is called after every timed candidate
    as ``report(candidate, n_timed, best_time_or_None)``. initial: genomes to time first.
    Raises `SearchError` (with the most common failure reasons) when no candidate succeeds.
    """
    options = SearchOptions.from_user(options)
    seed = options.seed if rng_seed is None else rng_seed
    s = _Search(space, evaluate, options, seed, report)
    if not space.genes:
        s.seen.add(())
        s.time_one(())
        stop = "no_choices"
    else:
        stop = s.run(initial)
    wall = s.clock() - s.start
    if not s.parents:
        raise SearchError(_no_success_message(s, stop), s.history)
    best_time, _, best = s.parents[0]
    return SearchResult(best_genome=best, best_time=best_time, history=s.history,
                        n_timeouts=s.counts["timeout"], n_errors=s.counts["error"],
                        n_rejected=s.counts["rejected"], n_invalid=s.n_invalid, wall_time=wall,
                        stop_reason=stop, space_size=space.count())


def _no_success_message(s: _Search, stop: str) -> str:
    n = len(s.history)
    if n == 0:
        return (f"genetic_search: no valid genome found among {len(s.seen)} sampled "
                f"({s.n_invalid} rejected by the choice space's is_valid); the e-graph has no "
                f"consistent implementation to time")
    msg = (f"genetic_search: none of the {n} candidates timed succeeded ({s.counts['timeout']} "
           f"timed out, {s.counts['rejected']} rejected, {s.counts['error']} raised; stopped: "
           f"{stop}). Most common failures: {_failure_summary(s.history)}")
    if s.counts["timeout"] and s.options.profile_timeout is not None:
        msg += (f". If candidates are just slow, raise SearchOptions(profile_timeout=...) "
                f"(now {s.options.profile_timeout:g} s)")
    if stop == "limit":
        msg += f". A larger SearchOptions(limit=...) (now {s.options.limit}) tries more candidates"
    return msg

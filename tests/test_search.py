"""The genetic search on synthetic choice spaces: failures are dropped, dead generations resample,
the same seed repeats the same search, and limits stop it."""
import math

import pytest

from luminal_fn.optimize.memory import CandidateRejected
from luminal_fn.optimize.options import SearchOptions
from luminal_fn.optimize.search import ChoiceSpace, Gene, SearchError, genetic_search


def cost(genome):
    # a smooth landscape with its minimum at (3, 1, 4, 1, 5)
    return 1e-3 + sum((g - t) ** 2 for g, t in zip(genome, (3, 1, 4, 1, 5))) * 1e-4


SPACE = [Gene(f"g{i}", 6) for i in range(5)]


def test_finds_better_than_random_and_stays_in_budget():
    res = genetic_search(ChoiceSpace(SPACE), cost, SearchOptions(limit=60, seed=1, patience=None))
    assert res.n_evaluated == 60 and res.stop_reason == "limit"
    assert res.best_time == min(c.time for c in res.history if c.ok)
    assert res.best_time <= sorted(c.time for c in res.history[:10])[0]


def test_failures_are_dropped_and_counted():
    def evaluate(g):
        if g[0] == 0:
            raise TimeoutError("slow")
        if g[0] == 1:
            raise CandidateRejected("NaN in output 0")
        if g[0] == 2:
            raise RuntimeError("kernel failed to compile")
        return cost(g)

    res = genetic_search(ChoiceSpace(SPACE), evaluate, SearchOptions(limit=80, seed=3))
    assert res.n_timeouts and res.n_rejected and res.n_errors
    assert res.best_genome[0] >= 3
    assert all(c.kind != "ok" for c in res.history if c.genome[0] < 3)


def test_a_generation_with_nothing_usable_resamples():
    # only genomes whose first gene is 5 work; mutants of a parent with g0=5 mostly keep it, but
    # the first parent must be found by fresh random sampling after failed generations
    def evaluate(g):
        if g[0] != 5 or g[1] != 5:
            raise TimeoutError("slow")
        return cost(g)

    res = genetic_search(ChoiceSpace(SPACE), evaluate, SearchOptions(limit=400, seed=0))
    assert res.n_ok >= 1 and res.best_genome[:2] == (5, 5)


def test_all_fail_raises_with_reasons():
    def evaluate(g):
        raise CandidateRejected("over the memory budget")

    with pytest.raises(SearchError, match="over the memory budget"):
        genetic_search(ChoiceSpace(SPACE), evaluate, SearchOptions(limit=5))


def test_same_seed_same_choice_and_exhaustion():
    a = genetic_search(ChoiceSpace(SPACE), cost, SearchOptions(limit=30, seed=9))
    b = genetic_search(ChoiceSpace(SPACE), cost, SearchOptions(limit=30, seed=9))
    assert a.best_genome == b.best_genome and [c.genome for c in a.history] == [c.genome for c in b.history]
    small = [Gene("a", 2), Gene("b", 3)]
    res = genetic_search(ChoiceSpace(small), lambda g: 1.0 + g[0] + g[1], SearchOptions(limit=100))
    assert res.stop_reason == "exhausted" and res.n_evaluated == 6 and res.best_genome == (0, 0)


def test_patience_stops_a_search_that_no_longer_gains():
    """``patience`` candidates in a row without a gain of more than ``min_gain`` over the
    fastest so far end the search; smaller gains (timing noise) do not count."""
    res = genetic_search(ChoiceSpace(SPACE), lambda g: 1e-3, SearchOptions(limit=100, patience=12))
    assert res.stop_reason == "patience" and res.n_evaluated == 13  # the first, then 12 without gain

    def creeping():  # each candidate 0.5% faster than the one before
        t = [1e-3]

        def evaluate(g):
            t[0] *= 0.995
            return t[0]
        return evaluate

    res = genetic_search(ChoiceSpace(SPACE), creeping(), SearchOptions(limit=100, patience=12, min_gain=0.01))
    assert res.stop_reason == "patience" and res.n_evaluated == 13
    res = genetic_search(ChoiceSpace(SPACE), creeping(), SearchOptions(limit=100, patience=12, min_gain=0.0))
    assert res.stop_reason == "limit" and res.n_evaluated == 100
    res = genetic_search(ChoiceSpace(SPACE), lambda g: 1e-3, SearchOptions(limit=50, patience=None))
    assert res.stop_reason == "limit" and res.n_evaluated == 50
    # failures count as candidates without a gain, but only once something has run
    calls = []

    def fails_after_the_first(g):
        calls.append(g)
        if len(calls) > 1:
            raise CandidateRejected("over the memory budget")
        return 1e-3

    res = genetic_search(ChoiceSpace(SPACE), fails_after_the_first, SearchOptions(limit=100, patience=5))
    assert res.stop_reason == "patience" and res.n_evaluated == 6 and res.n_rejected == 5


def test_no_genome_is_prepared_past_where_patience_stops():
    """A generation is prepared (compiled ahead, on CUDA) before it is timed; near the end of
    its patience the search prepares only what it may still time, so nothing compiled is
    thrown away when it stops."""
    class Evaluator:
        def __init__(self):
            self.prepared, self.timed = [], []

        def prepare(self, genomes):
            self.prepared += genomes

        def __call__(self, g):
            self.timed.append(g)
            return 1e-3

    ev = Evaluator()
    res = genetic_search(ChoiceSpace(SPACE), ev, SearchOptions(limit=100, patience=12))
    assert res.stop_reason == "patience" and res.n_evaluated == 13
    assert ev.prepared == ev.timed[1:]  # (the first, found by random sampling, is timed alone)
    ev = Evaluator()
    res = genetic_search(ChoiceSpace(SPACE), ev, SearchOptions(limit=25, patience=None))
    assert res.n_evaluated == 25 and ev.prepared == ev.timed[1:]


def test_patience_and_min_gain_are_checked():
    from luminal_fn.optimize.options import SearchOptionsError

    for bad in ({"patience": 0}, {"patience": 2.5}, {"min_gain": 1.0}, {"min_gain": -0.1},
                {"min_gain": "1%"}, {"min_gain": True}):
        with pytest.raises(SearchOptionsError, match=next(iter(bad))):
            SearchOptions(**bad)
    assert SearchOptions().patience == 30 and SearchOptions(patience=None).patience is None


def test_group_timeout_stops_the_search():
    clock = [0.0]

    def evaluate(g):
        clock[0] += 1.0
        return cost(g)

    from luminal_fn.optimize import search as search_mod

    orig = search_mod._now
    search_mod._now = lambda: clock[0]
    try:
        res = genetic_search(ChoiceSpace(SPACE), evaluate,
                             SearchOptions(limit=1000, group_timeout=10.0, seed=2))
    finally:
        search_mod._now = orig
    assert res.stop_reason == "group_timeout" and 9 <= res.n_evaluated <= 11
    assert math.isfinite(res.best_time)


class _ScriptedExe:
    """An executable whose profile() returns scripted seconds (a lucky first run, then steady)."""

    def __init__(self, first, steady):
        self.first, self.steady, self.calls = first, steady, 0

    def profile(self, inputs, dims, trials, timeout):
        self.calls += 1
        return self.first if self.calls == 1 else self.steady


def test_final_retiming_falls_back_to_the_next_finalist_not_the_reference():
    from luminal_fn.optimize.evaluate import CandidateEvaluator

    ev = CandidateEvaluator.__new__(CandidateEvaluator)
    ev.stage_s = {}
    ev.options, ev.inputs, ev.run_dims = SearchOptions(trials=1), [], {}
    ref = _ScriptedExe(10e-3, 10e-3)  # the generic genome: slow but safe
    lucky = _ScriptedExe(1e-3, 12e-3)  # one lucky run makes it look fastest; slower than ref
    good = _ScriptedExe(8e-3, 8e-3)  # steadily faster than the reference
    ev.reference_entry = [10e-3, "r", "ref-llir", ref]
    ev.finalists = [[1e-3, "l", "lucky-llir", lucky], [8e-3, "g", "good-llir", good]]
    t, llir, exe = ev.final()
    assert llir == "good-llir" and exe is good and t == 8e-3
    # when no finalist beats the reference head to head, the reference is kept
    ev.finalists = [[1e-3, "l", "lucky-llir", _ScriptedExe(1e-3, 12e-3)]]
    assert ev.final()[1] == "ref-llir"


def test_each_batch_is_prepared_before_its_genomes_are_timed():
    """An evaluate with a ``prepare`` method sees every genome before it is timed: the initial
    genomes as one batch, then each generation (so a backend can compile them side by side)."""
    prepared, timed = [], []

    class Evaluate:
        def prepare(self, genomes):
            prepared.append(list(genomes))

        def __call__(self, genome):
            timed.append(genome)
            assert any(genome in batch for batch in prepared), "timed before it was prepared"
            return cost(genome)

    initial = [(0,) * len(SPACE), (1,) * len(SPACE)]
    res = genetic_search(ChoiceSpace(SPACE), Evaluate(), SearchOptions(limit=35, seed=2, generation_size=10,
                                                                       patience=None),
                         initial=initial)
    assert prepared[0] == initial and timed[:2] == initial
    assert len(timed) == 35 and res.best_time == min(cost(g) for g in timed)
    assert all(1 <= len(b) <= 10 for b in prepared[1:]) and len(prepared) >= 4

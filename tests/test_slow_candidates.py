"""A candidate far slower than the fastest timed so far is timed over one warm run, not the
search's trials (optimize/evaluate.py SLOW); one whose slowness was its first run alone (lazy
compilation, a hiccup) gets its full trials; the search still finds the fastest."""
from __future__ import annotations

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.optimize.evaluate import SLOW, CandidateEvaluator
from luminal_fn.optimize.options import SearchOptions


class _Exe:
    """Warm runs of ``warm`` seconds; records the trials of each profile asked for."""

    def __init__(self, warm):
        self.warm, self.asked = warm, []

    def profile(self, inputs, dims, trials, timeout):
        self.asked.append(trials)
        return self.warm


def _evaluator(best):
    ev = CandidateEvaluator.__new__(CandidateEvaluator)
    ev.stage_s = {}
    ev.options, ev.inputs, ev.run_dims = SearchOptions(trials=3), [], {}
    ev.reference_entry, ev.finalists = ([best * 2, "r", "ref", None] if best else None), []
    if best:
        ev.finalists = [[best, "f", "fast", None]]
    return ev


def test_slow_first_and_warm_runs_stop_after_one_trial():
    exe = _Exe(warm=0.1)
    assert _evaluator(best=0.01)._profile(exe, first=0.1) == 0.1
    assert exe.asked == [1]


def test_a_slow_first_run_alone_gets_the_full_trials():
    exe = _Exe(warm=0.012)  # its first run compiled something; warm it is close to the best
    assert _evaluator(best=0.01)._profile(exe, first=0.5) == 0.012
    assert exe.asked == [1, 3]


def test_candidates_near_the_best_or_first_get_the_full_trials():
    exe = _Exe(warm=0.03)
    _evaluator(best=0.01)._profile(exe, first=SLOW * 0.01 * 0.9)
    _evaluator(best=None)._profile(exe, first=100.0)  # nothing timed yet: no yardstick
    assert exe.asked == [3, 3]


def test_search_with_slow_candidates_still_answers_right(monkeypatch):
    # a matmul searched on NumPy: its broadcast-product forms are many times slower than the
    # matmul kernel, and are left at one run; the answer and the winner are unchanged
    asked = []
    real = CandidateEvaluator._profile

    def recording(self, exe, first):
        calls = []
        profile = exe.profile
        exe.profile = lambda inputs, dims, trials, timeout: calls.append(trials) or profile(inputs, dims, trials, timeout)
        try:
            return real(self, exe, first)
        finally:
            asked.append(calls)
            del exe.profile

    monkeypatch.setattr(CandidateEvaluator, "_profile", recording)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    f = lf.jit(lambda a, b: lnp.tanh(a @ b), search=lf.SearchOptions(cache=False, limit=30, trials=3))
    np.testing.assert_allclose(np.asarray(f(a, b)), np.tanh(a.astype(np.float64) @ b), rtol=1e-4, atol=1e-4)
    # the slow forms: one profiled run, or none where the first run alone was far over (NumPy's
    # first run is a warm one)
    assert any(a in ([1], []) for a in asked) and [3] in asked, asked


def test_the_search_times_the_executables_it_prepared(monkeypatch):
    # each generation is extracted and compiled ahead (Executable.prepare, where the CUDA backend
    # starts its compiles); the timing then runs those very executables, at the search's dims
    from luminal_fn.backends.numpy import NumpyExecutable

    prepared, ran = {}, set()
    real_run = NumpyExecutable.run
    monkeypatch.setattr(NumpyExecutable, "prepare", lambda self, dims: prepared.setdefault(id(self), dict(dims)))
    monkeypatch.setattr(NumpyExecutable, "run",
                        lambda self, inputs, dims: ran.add(id(self)) or real_run(self, inputs, dims))
    x = np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32)
    f = lf.jit(lambda x: lnp.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1), dynamic_axes={"x": {0: "s"}},
               search=lf.SearchOptions(cache=False, limit=12))
    want = np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-5)
    assert len(ran) >= 2 and ran <= set(prepared), "the search timed executables it had not prepared"
    assert all(d == {"s": 6} for d in prepared.values()), prepared


class _WarmExe(_Exe):
    first_run_is_warm = True  # (as NumPy's: nothing compiled on a first run)


def test_a_far_too_slow_warm_first_run_is_its_time():
    # over twice the slow bound (and over WARM_FIRST_RUN): the first run is the time, no more runs
    exe = _WarmExe(warm=0.5)
    assert _evaluator(best=0.01)._profile(exe, first=0.5) == 0.5
    assert exe.asked == []
    # between the bound and twice it, or too short to tell from a first run's own costs, or on a
    # backend whose first run compiles: runs again as before
    for ex, best, first in ((_WarmExe(warm=0.05), 0.01, 0.06), (_WarmExe(warm=0.005), 1e-4, 0.005),
                            (_Exe(warm=0.5), 0.01, 0.5)):
        _evaluator(best=best)._profile(ex, first=first)
        assert ex.asked[:1] == [1], (best, first, ex.asked)

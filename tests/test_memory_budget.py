"""Search candidates that would exhaust host memory are dropped before they run.

The NumPy backend's compiled form knows memory the LLIR estimate does not: its arena, the
temporaries of a fused tree evaluated one NumPy op at a time, padded views read into zero-filled
arrays. A DLRM with 32 tables had candidates needing over 20 GB at batch 2048 (the top MLP as a
broadcast multiply and sum) and the OOM killer ended the process. These tests check the
estimate against what NumPy really allocates (tracemalloc), the default budget, and that a final
re-timing past the timeout does not end a search that already has its answer.
"""
import tracemalloc

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.backends.host_memory as host_memory
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.backends.numpy.kernels import tree_temp_bytes
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.evaluate import CandidateEvaluator, llir_peak_bytes
from luminal_fn.optimize.extract import Extractor
from luminal_fn.optimize.options import SearchOptions


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_tree_temporaries_held_at_once():
    f32 = "float32"
    leaf = ("in", 0)
    # (a * b) + (c * d): the left product is held while the right one is computed, then the sum
    tree = ("Add", f32, ("Mul", f32, leaf, ("in", 1)), ("Mul", f32, ("in", 2), ("in", 3)))
    assert tree_temp_bytes(tree) == 12
    assert tree_temp_bytes(("Exp2", f32, leaf)) == 4
    # a comparison's result is a byte an element; a half-precision one is computed in float32
    assert tree_temp_bytes(("LessThan", "bool", leaf, ("in", 1))) == 1
    assert tree_temp_bytes(("Mul", "float16", leaf, ("const", 2.0, "float16"))) == 4


CASES = {
    # the product before the sum is 32 x 48 x 96 floats when the matmul is a broadcast multiply
    "matmul": (lambda a, b: a @ b, lambda: (_r(32, 96), _r(96, 48, seed=1))),
    # a padded view is read into a zero-filled array of the padded shape
    "pad": (lambda x: lnp.exp(lnp.pad(x, ((3, 5), (0, 7)))) * 2.0, lambda: (_r(40, 50),)),
    # the padded operand of a broadcast product is read at the product's whole shape
    "padded_product": (lambda x, w: (lnp.pad(x, ((0, 0), (2, 3)))[:, None, :] * w[None]).sum(axis=-1),
                       lambda: (_r(32, 59), _r(40, 64, seed=1))),
    "concat": (lambda x, y: lnp.tanh(lnp.concatenate([x, y * 3.0], axis=1)).sum(axis=0),
               lambda: (_r(64, 30), _r(64, 20, seed=1))),
    "softmax": (lambda x: lf.nn.softmax(x * 0.5 + 1.0, axis=-1), lambda: (_r(128, 200),)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_estimate_covers_what_numpy_allocates(case):
    """For every genome: the LLIR's values plus the compiled form's memory_bytes are at least the
    peak NumPy really allocated while running it (and not wildly more)."""
    fn, make = CASES[case]
    args = make()
    traced = lf.jit(fn).trace(*args)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    be = get_backend("numpy")
    seen = set()
    space = ex.space()
    for i in range(min(space.count(), 64)):
        genome = space.genome_at(i)
        if not space.is_valid(genome):
            continue
        llir = ex.extract(genome)
        if llir.structural_hash() in seen:
            continue
        seen.add(llir.structural_hash())
        exe = be.compile(llir)
        estimate = llir_peak_bytes(llir, {}) + exe.memory_bytes({})
        outputs = sum(np.asarray(o).nbytes for o in exe.run(list(args), {}))
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            exe.run(list(args), {})  # (the arena was allocated by the run above)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        arena = exe.plan.layout.nbytes
        # (NumPy's ufuncs buffer a strided reduction 8192 elements at a time: 64 KiB at most)
        assert peak <= estimate + outputs + 65536, (case, i, peak, estimate, llir.as_text())
        assert estimate <= 16 * (peak + arena + outputs) + 65536, (case, i, peak, estimate)
    assert seen


def test_default_budget_drops_the_broadcast_matmul(monkeypatch):
    # 2 MiB available: the broadcast product (64 x 64 x 256 floats, 4 MiB) is over 60% of it
    monkeypatch.setattr(host_memory, "available_host_memory", lambda: 2 << 20)
    assert get_backend("numpy").memory_budget() == int(0.6 * (2 << 20))
    a, b = _r(64, 256), _r(256, 64, seed=1)
    f = lf.jit(lambda a, b: a @ b, search=lf.SearchOptions(cache=False, limit=20))
    np.testing.assert_allclose(np.asarray(f(a, b)), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    (cost,) = f.compiled()[0].cost().values()
    dropped = [t for t in cost["timed"] if isinstance(t, str)]
    assert any("default budget" in t and "max_memory" in t for t in dropped), cost["timed"]
    assert any(not isinstance(t, str) for t in cost["timed"])


def test_max_memory_given_wins_over_the_default(monkeypatch):
    monkeypatch.setattr(host_memory, "available_host_memory", lambda: 1 << 10)  # 1 KiB: nothing fits
    a, b = _r(8, 16), _r(16, 8, seed=1)
    f = lf.jit(lambda a, b: a @ b, search=lf.SearchOptions(cache=False, limit=5, max_memory="64MiB"))
    np.testing.assert_allclose(np.asarray(f(a, b)), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    (cost,) = f.compiled()[0].cost().values()
    assert not any(isinstance(t, str) and "budget" in t for t in cost["timed"])


class _Exe:
    def __init__(self, seconds):
        self.seconds = seconds

    def profile(self, inputs, dims, trials, timeout):
        if self.seconds > timeout:
            raise TimeoutError(f"candidate took longer than {timeout} s")
        return self.seconds


def _evaluator(entries, timeout=1.0):
    ev = CandidateEvaluator.__new__(CandidateEvaluator)
    ev.stage_s = {}
    ev.options, ev.inputs, ev.run_dims = SearchOptions(trials=1, profile_timeout=timeout), [], {}
    ev.reference_entry, *rest = entries
    ev.finalists = rest
    return ev


def test_final_retiming_past_the_timeout_drops_that_entry():
    # the reference ran in 0.9 s during the search and now takes 1.5 s: the finalist wins
    ev = _evaluator([[0.9, "r", "ref", _Exe(1.5)], [0.2, "f", "fast", _Exe(0.2)]])
    t, llir, _ = ev.final()
    assert llir == "fast" and t == 0.2
    # a finalist that times out now gives way to the reference
    ev = _evaluator([[0.5, "r", "ref", _Exe(0.5)], [0.2, "f", "slow now", _Exe(3.0)]])
    assert ev.final()[1] == "ref"
    # everything over the timeout now: the search's own times decide
    ev = _evaluator([[0.9, "r", "ref", _Exe(2.0)], [0.8, "f", "fin", _Exe(2.0)]])
    assert ev.final()[1] == "fin"


def test_host_budget_takes_the_smaller_bound(monkeypatch):
    monkeypatch.setattr(host_memory, "available_host_memory", lambda: 10_000)
    assert host_memory.host_memory_budget() == 6000
    assert host_memory.host_memory_budget(5000) == 3000  # a device's own smaller bound
    monkeypatch.setattr(host_memory, "available_host_memory", lambda: None)
    assert host_memory.host_memory_budget() is None
    assert host_memory.host_memory_budget(5000) == 3000


def test_mlx_budget_reads_the_metal_working_set(monkeypatch):
    pytest.importorskip("mlx.core", reason="mlx is not installed")
    be = get_backend("mlx")
    monkeypatch.setattr(host_memory, "available_host_memory", lambda: 10 << 30)
    monkeypatch.setattr(be.mx, "device_info", lambda: {"max_recommended_working_set_size": 4 << 30})
    assert be.memory_budget() == int(0.6 * (4 << 30))
    monkeypatch.setattr(be.mx, "device_info", lambda: {"device_name": "cpu"})
    assert be.memory_budget() == int(0.6 * (10 << 30))


def test_tree_of_one_input_has_no_temporaries():
    assert tree_temp_bytes(("in", 0)) == 0
    assert tree_temp_bytes(("Gather", "float32", 0, ("in", 1))) == 4


def test_temporaries_of_a_deeply_shared_tree_are_counted_once():
    # x = x * x twenty times: 2^20 nodes as a tree, 21 distinct; each level's product is a
    # repeat held for the kernel (compile_tree memoises it), so the count stays linear
    t = ("in", 0)
    for _ in range(20):
        t = ("Mul", "float32", t, t)
    assert 4 <= tree_temp_bytes(t) <= 4 * 22


def test_a_graph_over_the_budget_is_not_compiled_ahead(monkeypatch):
    # the search prepares (compiles ahead) each generation: the broadcast product over the budget
    # is dropped there as it is when timed, before a backend spends a compile on it
    from luminal_fn.backends.numpy import NumpyExecutable

    monkeypatch.setattr(host_memory, "available_host_memory", lambda: 2 << 20)
    prepared = []
    monkeypatch.setattr(NumpyExecutable, "prepare", lambda self, dims: prepared.append(self))
    a, b = _r(64, 256), _r(256, 64, seed=1)
    f = lf.jit(lambda a, b: a @ b, search=lf.SearchOptions(cache=False, limit=20))
    np.testing.assert_allclose(np.asarray(f(a, b)), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    (cost,) = f.compiled()[0].cost().values()
    assert any(isinstance(t, str) and "default budget" in t for t in cost["timed"]), cost["timed"]
    budget = get_backend("numpy").memory_budget()
    assert prepared and all(llir_peak_bytes(exe.plan.graph, {}) <= budget for exe in prepared)

"""Independent grid-stride kernels next to each other share one launch (backends/cuda/horizontal.py).

CPU: what merges (independent elementwise kernels, RoPE of q and k in the tiny Llama step) and
what does not (a kernel reading its neighbour's result, one writing what the other reads, kernels
with barriers, the switch); merged plans on the CPU emulation of CUDA against NumPy. GPU (marked
``gpu``, skipped without one): the same function on the device against NumPy.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

SWITCH = "LUMINAL_CUDA_MERGE_INDEPENDENT"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")


def _llir(fn, args):
    g = lf.jit(fn).trace(*args).hlir
    return Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)


def two_heads(x, y):  # two results that read nothing of each other
    return lnp.exp(x) * 2.0, lnp.tanh(y) + 1.0


def chained(x, y):  # the second reads the first's sums (a reduction is not inlined twice)
    a = lnp.sum(lnp.exp(x), axis=1)
    return a, lnp.tanh(a[:, None] + y) + 1.0


ARGS = (np.linspace(-2, 2, 64 * 8, dtype=np.float32).reshape(64, 8),
        np.linspace(-1, 3, 64 * 8, dtype=np.float32).reshape(64, 8))


def _labels(bp):
    return [s.label for s in bp.steps]


def test_independent_kernels_share_a_launch(monkeypatch):
    ll = _llir(two_heads, ARGS)
    merged = plan_graph(ll, {})
    monkeypatch.setenv(SWITCH, "0")
    alone = plan_graph(ll, {})
    assert len(alone.steps) == 2 and all(s.source.kind == "ew" for s in alone.steps), _labels(alone)
    (step,) = merged.steps
    assert step.source.kind == "merged" and step.label == " + ".join(_labels(alone))
    assert step.bufs == alone.steps[0].bufs + alone.steps[1].bufs
    # each part keeps its own blocks: the grid is the sum of the two grids
    assert step.source.meta["grid3"][0] == 2 * 1 and step.source.meta["parts"] == 2
    assert step.source.text.count("lf_pdl_wait();") == 1


def test_a_kernel_reading_its_neighbours_result_keeps_its_launch():
    from luminal_fn.backends.cuda.horizontal import _independent

    ll = _llir(chained, ARGS)
    alone = _plain_steps(ll)
    assert len(alone) == 2 and not _independent([alone[0]], alone[1]), _labels_of(alone)
    assert _labels_of(plan_graph(ll, {}).steps) == _labels_of(alone)


def _labels_of(steps):
    return [s.label for s in steps]


def test_what_may_not_merge():
    from luminal_fn.backends.cuda.horizontal import _independent, _mergeable

    long_rows = np.ones((4, 8192), np.float32)
    bp = plan_graph(_llir(lambda x: lnp.sum(lnp.exp(x), axis=1) + 1.0, (long_rows,)), {})
    reductions = [s for s in bp.steps if "__syncthreads" in s.source.text or "lf_shfl" in s.source.text]
    assert reductions and not any(_mergeable(s) for s in reductions)  # barriers, shuffles
    (merged,) = plan_graph(_llir(two_heads, ARGS), {}).steps
    assert not _mergeable(merged)  # a merged launch has its own grid
    a, b = _plain_steps(_llir(two_heads, ARGS))
    assert _mergeable(a) and _mergeable(b) and _independent([a], b)


def _plain_steps(ll):
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SWITCH, "0")
        return plan_graph(ll, {}).steps


def test_the_tiny_llama_step_runs_rope_of_q_and_k_in_one_launch(monkeypatch):
    """RoPE of q, and RoPE of k storing into the k cache (rope_store.py); with the attention
    kernel the v cache scatter joins them (tests/test_attention_store.py). (With gemv_stores.py
    on, layers after the first compute them in the q/k/v GEMV's launch instead: off here.)"""
    from luminal_fn.backends.cuda.gemv_stores import SWITCH as STORES
    from test_cuda_gemv_prologue import _plan, _tiny_llama

    monkeypatch.setenv(STORES, "0")

    layers = 2
    traced, flat = _tiny_llama(layers)
    g = traced.hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    bp = _plan(ll, {"s": 1, "c": 64}, fold=False, donated=flat(39)[1].donated)
    labels = _labels(bp)
    both = [lb for lb in labels if lb.startswith("rope_half + rope_half -> Scatter (in place)")]
    assert len(both) >= layers - 1, labels
    parts = [p.split(" -> ")[0] for lb in labels for p in lb.split(" + ")]
    assert parts.count("rope_half") == 2 * layers


@needs_gxx
@pytest.mark.parametrize("fn", [two_heads, chained], ids=["independent", "chained"])
def test_merged_plans_on_the_cpu_emulation(fn, tmp_path):
    import cuda_model_emulation as emu

    ll = _llir(fn, ARGS)
    bp = plan_graph(ll, {})
    assert emu.why_not_emulable(bp) is None
    got = emu.run(emu.build([bp], str(tmp_path)), bp, list(ARGS), {})
    want = NumpyBackend().compile(ll).run(list(ARGS), {})
    for o, w in zip(got, want):
        np.testing.assert_allclose(o, np.asarray(w), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_merged_kernels_on_the_gpu():
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    ll = _llir(two_heads, ARGS)
    exe = be.compile(ll)
    for _ in range(3):  # captured, then replayed
        got = [np.asarray(be.to_numpy(o)) for o in exe.run([be.from_numpy(a) for a in ARGS], {})]
        np.testing.assert_allclose(got[0], np.exp(ARGS[0].astype(np.float64)) * 2.0, rtol=1e-5)
        np.testing.assert_allclose(got[1], np.tanh(ARGS[1].astype(np.float64)) + 1.0, rtol=1e-5, atol=1e-6)
    assert any(s.source.kind == "merged" for s in exe._last_bucket.plan.steps)

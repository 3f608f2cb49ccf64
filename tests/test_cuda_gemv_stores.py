"""RoPE of q and k and the KV-cache stores computed in the q/k/v GEMV launch
(backends/cuda/gemv_stores.py, kernels/gemv.cu's lf_gemv_nk_rope_to): plans, and the tiny Llama
decode step on the CPU emulation of CUDA, bit for bit against the plan that launches them (the
fold off: LUMINAL_CUDA_GEMV_STORES=0) and against the NumPy backend; on the GPU where there is
one.
"""
import shutil

import numpy as np
import pytest

from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.gemv_stores import SWITCH
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

from test_cuda_gemv_prologue import _tiny_llama, emulated_steps_agree

# what the emulation runs: the GEMVs, the norm, RoPE and attention kernels (no cuBLAS)
KINDS = frozenset({"rms_norm_rows", "rope_half", "attention_rows"})
FOLDED = "+ RoPE/cache stores"


def _plan(ll, dims, donated, fold=True):
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SWITCH, "1" if fold else "0")
        return plan_graph(ll, dims, donated=donated)


def _labels(bp):
    return [s.label for s in bp.steps]


def _step(layers, weights, kinds=KINDS):
    traced, flat = _tiny_llama(layers, weights, cache_rows=48)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=kinds)
    return ex, ex.extract(None), flat


@pytest.mark.parametrize("weights", ["float32", "bfloat16"])
def test_every_layer_loses_its_rope_and_scatter_launches(weights):
    _, ll, flat = _step(3, weights, KERNEL_KINDS)
    donated = flat(39)[1].donated
    before, after = _plan(ll, {"s": 1, "c": 48}, donated, fold=False), _plan(ll, {"s": 1, "c": 48}, donated)
    folded = [lb for lb in _labels(after) if lb.endswith(FOLDED)]
    assert len(folded) == 3, _labels(after)

    # (this genome's attention is two matmuls around softmax_rows, so each layer's v scatter comes
    # after them: a launch of its own, like RoPE's)
    def stores(bp):
        return [lb for lb in _labels(bp) if "rope_half" in lb or "Scatter" in lb]

    assert len(stores(before)) == 2 * 3 and not stores(after), _labels(after)
    assert len(after.steps) == len(before.steps) - 6
    for s in after.steps:
        if s.label.endswith(FOLDED):
            text = s.source.text
            assert text.count("lf_gemv_nk_rope_to<") == 2 and "lf_rope_half_pair(" in text
            assert len(s.source.meta["nodes"]) == 4  # the GEMVs' step and RoPE q, RoPE k, the v scatter


def test_nothing_moves_past_a_step_that_writes_what_it_reads(monkeypatch):
    """In graph order, layer 0 computes its RoPE tables and cache index after its q/k/v GEMV
    (the planner normally computes them first): its RoPE and scatter then stay where they are."""
    from luminal_fn.backends.cuda.plan import Planner

    monkeypatch.setattr(Planner, "_tables_first", lambda self, nodes: nodes)
    _, ll, flat = _step(3, "bfloat16", KERNEL_KINDS)
    labels = _labels(_plan(ll, {"s": 1, "c": 48}, flat(39)[1].donated))
    qkv = [lb for lb in labels if "(gemv nk x3)" in lb]
    assert [lb.endswith(FOLDED) for lb in qkv] == [False, True, True], labels
    assert sum("rope_half" in lb for lb in labels) == 2  # layer 0's RoPE of q, and of k with its store


def test_small_tables_of_the_inputs_are_planned_first():
    """The RoPE cos/sin rows and the cache index (small, from the positions alone) come before
    layer 0's GEMV and share launches with the step's first kernels."""
    _, ll, flat = _step(2, "bfloat16", KERNEL_KINDS)
    labels = _labels(_plan(ll, {"s": 1, "c": 48}, flat(39)[1].donated, fold=False))
    first_gemv = next(i for i, lb in enumerate(labels) if "gemv" in lb)
    assert labels[0].count("fused") == 4, labels  # cos, sin and the index's two kernels
    assert first_gemv <= 3, labels
    # which nodes move, by the bucket: constants, then the small kernels of the inputs alone (at
    # s = 1 the token cast, RoPE's angle rows, cos, sin, the index; up to s = 4096 only those of
    # at most TABLE_ELEMENTS elements), then the rest, inputs first
    from itertools import takewhile

    from luminal_fn.backends.cuda.plan import TABLE_ELEMENTS, Planner
    from luminal_fn.backends.render.index import max_value, numel

    for s_max, n_moved in ((1, 5), (4096, 3)):
        nodes = ll.live_nodes()
        order = Planner(ll, {"s": s_max, "c": 48}, sorted(ll.symbols()), 132)._tables_first(nodes)
        moved = [n for n in takewhile(lambda n: n.op != "Input", order) if n.op != "Constant"]
        assert len(moved) == n_moved, [(n.id, n.shape) for n in moved]
        assert all(n.attrs.get("name") == "fused" for n in moved)
        assert all(max_value(numel(n.shape), {"s": s_max}) <= TABLE_ELEMENTS for n in moved)
        assert sorted(n.id for n in order) == sorted(n.id for n in nodes)  # every node, once


def _gemv_then_rope(style):
    """x (1, 64) @ W (128, 64)^T -> (1, 2, 64) heads, then the attr-driven rope of ``style``."""
    from cuda_cases import B
    from luminal_fn.ir.view import View

    b = B()
    K, N, D = 64, 128, 64
    x, w, c, s = b.input((1, K)), b.input((N, K)), b.input((1, D)), b.input((1, D))
    y = b.custom("matmul", [b.c(x), (w, View.contiguous((N, K)).permute([1, 0]))], (1, N), m=1, n=N, k=K)
    heads = View.contiguous((1, N)).reshape((1, N // D, D))
    tab = View((1, N // D, D), (D, 0, 1), 0)
    b.output(b.custom("rope", [(y, heads), (c, tab), (s, tab)], (1, N // D, D), style=style))
    rng = np.random.default_rng(4)
    ins = [rng.standard_normal(shape).astype(np.float32) for shape in ((1, K), (N, K), (1, D), (1, D))]
    return b.g, ins


@pytest.mark.parametrize("style", ["half", "interleaved"])
def test_only_rotate_half_pairs_fold(style, tmp_path):
    """rotate_half's pairs (d, d + half) are rows of one block; the interleaved style's (2i,
    2i + 1) are not what lf_gemv_nk_rope_to pairs: that RoPE keeps its own launch."""
    g, ins = _gemv_then_rope(style)
    labels = _labels(plan_graph(g, {}))
    assert labels == (["matmul (gemv nk) + RoPE/cache stores"] if style == "half"
                      else ["matmul (gemv nk)", "rope"]), labels
    if shutil.which("g++") is not None:
        import cuda_model_emulation as emu

        bp = plan_graph(g, {})
        (got,) = emu.run(emu.build_with_hand(bp, ("rope.cu", "gemv.cu"), str(tmp_path)), bp, ins, {})
        x, w, c, sn = (a.astype(np.float64) for a in ins)
        y = (x @ w.T).reshape(2, 64)
        if style == "half":  # pairs (d, d + 32)
            i1, i2 = np.arange(32), np.arange(32) + 32
        else:  # pairs (2i, 2i + 1)
            i1, i2 = np.arange(0, 64, 2), np.arange(1, 64, 2)
        want = np.empty_like(y)
        want[:, i1] = y[:, i1] * c[0, i1] - y[:, i2] * sn[0, i1]
        want[:, i2] = y[:, i2] * c[0, i2] + y[:, i1] * sn[0, i2]
        np.testing.assert_allclose(got.reshape(2, 64), want, rtol=1e-4, atol=1e-4)


def test_the_switch_is_checked():
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SWITCH, "maybe")
        with pytest.raises(ValueError, match=SWITCH):
            _, ll, flat = _step(1, "float32")
            plan_graph(ll, {"s": 1, "c": 48}, donated=flat(39)[1].donated)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
@pytest.mark.parametrize("weights,early", [("float32", ""), ("bfloat16", ""), ("bfloat16", "3")])
def test_tiny_llama_decode_step_on_the_cpu_emulation(weights, early, tmp_path, monkeypatch):
    """Two layers (both folded): the logits and both layers' caches, at three cache
    lengths, bit for bit as the unfolded plan computes them and close to the NumPy backend;
    also with every folded GEMV loading its first rows before the norm (LF_GEMV_EARLY 3)."""
    import cuda_model_emulation as emu

    if early:
        monkeypatch.setenv("LUMINAL_CUDA_GEMV_EARLY", early)

    ex, ll, flat = _step(2, weights)
    donated = flat(39)[1].donated
    before, after = _plan(ll, {"s": 1, "c": 48}, donated, fold=False), _plan(ll, {"s": 1, "c": 48}, donated)
    assert sum(lb.endswith(FOLDED) for lb in _labels(after)) == 2, _labels(after)
    lib = emu.build_with_hand([before, after], ("rms_norm.cu", "rope.cu", "gemv.cu", "attention.cu"),
                              str(tmp_path))
    emulated_steps_agree(lib, before, after, ex, flat, 2e-3)


def test_the_module_compiles():
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    _, ll, flat = _step(2, "bfloat16", KERNEL_KINDS)
    after = _plan(ll, {"s": 1, "c": 48}, flat(39)[1].donated)
    assert any(lb.endswith(FOLDED) for lb in _labels(after))
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plan was made, the module not compiled")
    nvcc_check(module_source(after.kernels()))


@pytest.mark.gpu
@pytest.mark.parametrize("weights", ["float32", "bfloat16"])
def test_tiny_llama_decode_step_on_the_gpu(weights):
    """Folded and unfolded plans on the GPU, every kernel kind offered, agree to an ulp or two:
    NVRTC contracts RoPE's multiply-adds into FMAs one way inside the GEMV's kernel and another in
    RoPE's own (H200, run CW: at most 2.4e-7 apart; the CPU emulation, without FMAs, is bit for
    bit)."""
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    _, ll, flat = _step(2, weights, KERNEL_KINDS)
    outs = {}
    for fold in (False, True):
        with pytest.MonkeyPatch.context() as env:
            env.setenv(SWITCH, "1" if fold else "0")
            exe = be.compile(ll, {"donated": flat(39)[1].donated})
            for c in (21, 48):
                args, _ = flat(c - 1)
                got = exe.run([be.from_numpy(a) for a in args], {"s": 1, "c": c})
                outs[fold, c] = [np.asarray(be.to_numpy(o)).copy() for o in got]
    for c in (21, 48):
        for a, b in zip(outs[True, c], outs[False, c]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

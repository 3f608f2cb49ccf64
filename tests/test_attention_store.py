"""The attention row kernel's store takes over the copies after it (backends/cuda/attention_store.py):
which copies fold, which must not, and the strides it derives. The folded kernels compute the
reference on the CPU emulation in tests/test_attention_rule.py (calls with s = 1, 2 and 3) and
on the GPU there; here the plans are inspected (no GPU, no compiler)."""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys

import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.attention_store import _axes, _narrow_rounding, _permuted
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.expr import same, var
from luminal_fn.ir.view import View
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from test_attention_rule import DECODE, N_CACHE, attention_genome, decode_args, extractor, gqa_config  # noqa: E402


def _tiny_llama_plan(layers=2):
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step, new_cache, step_inputs

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=layers, hidden_size=64,
                              intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=256)
    args = (random_weights(cfg, "bfloat16"), *step_inputs([5], 39), new_cache(cfg, 64))
    traced = make_step(cfg).trace(*args)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS)
    genome = next(g for g in ex.kernel_genomes()
                  if any(n.attrs.get("name") == "attention_rows" for n in ex.extract(g).live_nodes()))
    leaves = len(lf.tree_leaves(args))  # the caches are donated, as the model's step donates them
    return plan_graph(ex.extract(genome), {"s": 1, "c": 64}, donated=tuple(range(leaves - 2 * layers, leaves)))


def test_the_llama_step_attention_writes_the_o_projections_input():
    """The transpose to (s, heads * head_dim) and the cast to bfloat16 are folded: the o
    projection's GEMV reads what attention_rows stored, in bfloat16."""
    plan = _tiny_llama_plan()
    steps = plan.steps
    at = [i for i, s in enumerate(steps) if s.label == "attention_rows"]
    assert len(at) == 2
    for i in at:
        src, nxt = steps[i].source, steps[i + 1]
        assert len(src.meta["stores_into"]) == 2, src.meta.get("stores_into")
        assert nxt.label.startswith("matmul (gemv nk)") and nxt.bufs[0] == steps[i].bufs[-1]
        assert "__nv_bfloat16* __restrict__ out" in src.text
        # (hk, g, s, e) -> (s, hk * 2 + g, e) of 4 heads of 16: strides 32, 16, 64, 1
        assert "out, (long long)(32), (long long)(16), (long long)(64), (long long)(1)" in src.text


@pytest.mark.parametrize("stores", ["1", "0"])
def test_the_llama_step_runs_five_launches_a_layer(stores, monkeypatch):
    """rms + q/k/v with RoPE q, RoPE k into the k cache and the v scatter (gemv_stores.py),
    attention, o, rms + gate/up, down: the second layer's steps (the first also builds the RoPE
    tables). Each norm runs inside the GEMVs after it (prologue.py). With gemv_stores.py off,
    six: RoPE and the scatter in one launch of their own."""
    monkeypatch.setenv("LUMINAL_CUDA_GEMV_STORES", stores)
    labels = [s.label for s in _tiny_llama_plan().steps]
    first = labels.index("attention_rows")
    second = labels.index("attention_rows", first + 1)
    qkv = "rms_norm_rows + matmul (gemv nk x3)"
    layer = labels[next(i for i in range(first + 3, second) if labels[i].startswith(qkv)):second + 1]
    if stores == "1":
        assert layer == [f"{qkv} + RoPE/cache stores", "attention_rows"], labels
    else:
        assert layer == [qkv, "rope_half + rope_half -> Scatter (in place) + Scatter (in place)",
                         "attention_rows"], labels
    assert labels[second + 1:second + 4] == ["matmul (gemv nk) + epilogue",
                                             "rms_norm_rows + matmul (gemv nk pair) + epilogue",
                                             "matmul (gemv nk) + epilogue"]


def test_strides_of_a_transposed_view_with_a_symbolic_row_count():
    s = var("s")
    axes = _axes(2, 2, s, 16)  # the attention output (2, 2, s, 16), contiguous
    view = View((s, 4, 16), (16, 16 * s, 1), 0)  # (s, heads, e): heads merged from (hk, g)
    got = {n: st for n, _, st in _permuted(axes, view, (s, 4, 16))}
    for name, want in (("hk", 32), ("g", 16), ("s", 64), ("e", 1)):
        assert same(got[name], want), (name, got[name])
    # separate hk and g axes in another order: (g, s, hk, e)
    view = View((2, s, 2, 16), (16 * s, 16, 32 * s, 1), 0)
    got = {n: st for n, _, st in _permuted(axes, view, (2, s, 2, 16))}
    for name, want in (("g", s * 32), ("s", 32), ("hk", 16), ("e", 1)):
        assert same(got[name], want), (name, got[name])


def test_views_that_are_not_a_relayout_are_refused():
    s = var("s")
    axes = _axes(2, 2, s, 16)
    # half of the elements (a slice along e)
    assert _permuted(axes, View((s, 4, 8), (16, 16 * s, 1), 0), (s, 4, 8)) is None
    # an element read twice (broadcast along a new axis)
    assert _permuted(axes, View((2, s, 4, 16), (0, 16, 16 * s, 1), 0), (2, s, 4, 16)) is None
    # an offset view
    assert _permuted(axes, View((s, 4, 16), (16, 16 * s, 1), 8), (s, 4, 16)) is None


def test_roundings():
    f32, bf16, f16 = dt.float32, dt.bfloat16, dt.float16
    assert _narrow_rounding([f32, f32]) is None
    assert _narrow_rounding([f32, bf16, bf16]) == bf16
    assert _narrow_rounding([bf16, f32, f16]) is False  # two different narrow roundings: kept apart


def test_arithmetic_after_the_attention_is_not_folded():
    """A consumer that scales the output is a computation, not a copy: it keeps its kernel."""
    import luminal_fn.numpy as lnp
    from test_attention_rule import llama_attention

    config = gqa_config(4, 2, 16)
    inner = llama_attention(config)

    def scaled(*a):
        return lnp.multiply(inner(*a), 2.0)

    ex = extractor(scaled, decode_args(config, 9), kinds=KERNEL_KINDS, dynamic_axes=DECODE)
    plan = plan_graph(ex.extract(attention_genome(ex)), {"s": 16, "c": N_CACHE})
    labels = [s.label for s in plan.steps]
    print(labels)
    assert labels[:2] == ["attention_rows", "fused"]
    assert "stores_into" not in plan.steps[0].source.meta


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
def test_the_merged_layer_on_the_cpu_emulation(tmp_path):
    """A float32 tiny Llama decode step with attention_rows and rope_half chosen (the matmuls
    rendered: GEMVs and cuBLAS are not emulated): RoPE of k stores into the k cache, attention
    stores the o projection's input; the logits and both layers' caches match the NumPy backend."""
    import cuda_model_emulation as emu
    from llama.model import step_inputs
    from luminal_fn.backends.numpy import NumpyBackend
    from test_attention_rule import kernel_option
    from test_rope_rule import _flat, _tiny_llama

    _, w, cache, step = _tiny_llama("float32", layers=2)
    g = step.trace(w, *step_inputs([7], 39), cache).hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=frozenset({"attention_rows", "rope_half"}))
    genome = tuple(0 if p is None else p for p in (kernel_option(ex, gene) for gene in ex.genes))
    ll = ex.extract(genome)
    for n in ll.live_nodes():
        if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
            n.attrs["strategy"] = "rendered"
    ins, lay = _flat(step, (w, *step_inputs([7], 39), cache))
    bp = plan_graph(ll, {"s": 1, "c": 64}, donated=lay.donated)
    labels = [s.label for s in bp.steps]
    # (rendered matmuls keep their own steps between, so nothing merges here; the merged launch
    # is checked on the GEMV plan above and emulated in tests/test_cuda_horizontal.py)
    assert labels.count("rope_half -> Scatter (in place)") == 2, labels
    assert all(bp.steps[i + 1].label != "fused" for i, lb in enumerate(labels) if lb == "attention_rows")
    lib = emu.build_with_hand(bp, ("rope.cu", "rms_norm.cu", "attention.cu"), str(tmp_path))
    want = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    for c in (40, 57):
        args, _ = _flat(step, (w, *step_inputs([7], c - 1), cache))
        ref = want.run([a.copy() for a in args], {"s": 1, "c": c})
        got = emu.run(lib, bp, [a.copy() for a in args], {"s": 1, "c": c})
        assert len(got) == len(ref) == 5
        for o, r in zip(got, ref):
            np.testing.assert_allclose(o, np.asarray(r), rtol=1e-4, atol=1e-4)

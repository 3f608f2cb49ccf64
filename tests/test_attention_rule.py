"""The decode-attention rule of optimize/rules/specialize_attention.egg: the grouped-query
attention the Llama step traces (QK product, scaled and masked softmax_rows, AV product) offered
as one ``attention_rows`` kernel.

The rule fires on the tiny Llama decode step (and on the same attention alone, through the
example's own ``model.attention``, grouped or with one key/value head per query head, static or
with dynamic s and c), not on near misses; the kernel's NumPy semantics match a
float64 NumPy attention for several cache lengths within a bucket; every random genome still
computes the reference; the CUDA lowering runs on the CPU emulation of CUDA (g++ stand-in,
tests/cuda_model_emulation.py) against the same reference, and on a real GPU (marked ``gpu``).
"""
from __future__ import annotations

import os
import random
import shutil
import sys
import types

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.backends.numpy.attention_kernels import attention_rows
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

from llama import model  # noqa: E402

KIND = "attention_rows"
R = np.random.default_rng(5)
N_CACHE = 64  # cache rows; the context is rows 0..c-1, read as a view (C = min(64, c))
DECODE = {"q": {0: "s"}, "mask": {0: "s", 1: "c"}}
BUCKETS = {"s": [(1, 1), (2, 16)], "c": [(1, N_CACHE)]}  # c <= 64: the context fits the cache


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def gqa_config(heads, kv_heads, head_dim):
    """The fields of LlamaConfig that model.attention reads."""
    return types.SimpleNamespace(num_attention_heads=heads, num_key_value_heads=kv_heads,
                                 head_dim=head_dim, q_dim=heads * head_dim)


def llama_attention(config):
    """The Llama step's attention over a contiguous cache: q (s, H*E), the caches (64, Hk*E),
    mask (s, c); the context is the first c cache rows."""
    def fn(q, k_cache, v_cache, mask):
        k, v = k_cache[:mask.shape[1]], v_cache[:mask.shape[1]]
        return model.attention(q, k, v, mask[:, :k.shape[0]], config)  # as layer_forward slices

    return fn


def decode_args(config, c, s=1):
    q = f32(s, config.q_dim)
    kc, vc = (f32(N_CACHE, config.num_key_value_heads * config.head_dim) for _ in range(2))
    pos = np.arange(c - s, c)
    mask = model.causal_mask(pos, c)
    return q, kc, vc, mask


# ---- float64 reference -------------------------------------------------------------------------
def ref_attention(config, q, kc, vc, mask):
    """(s, H*E): head h of q attends with key/value head h // G over cache rows 0..c-1."""
    s, c = mask.shape
    h, hk, e = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    qh = q.astype(np.float64).reshape(s, h, e).transpose(1, 0, 2)
    kh, vh = (x[:c].astype(np.float64).reshape(c, hk, e).transpose(1, 0, 2) for x in (kc, vc))
    kh, vh = (np.repeat(x, h // hk, axis=0) for x in (kh, vh))
    sc = qh @ kh.transpose(0, 2, 1) / np.sqrt(e) + mask.astype(np.float64)
    w = np.exp(sc - sc.max(-1, keepdims=True))
    out = (w / w.sum(-1, keepdims=True)) @ vh
    return out.transpose(1, 0, 2).reshape(s, h * e)


def close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-5, atol=2e-5)


# ---- helpers -----------------------------------------------------------------------------------
def extractor(fn, args, kinds=NumpyBackend.kernel_kinds, dynamic_axes=DECODE):
    buckets = {k: v for k, v in BUCKETS.items() if any(k in ax.values() for ax in dynamic_axes.values())}
    graph = lf.jit(fn, dynamic_axes=dynamic_axes, buckets=buckets or None).trace(*args).hlir
    return Extractor(build_egraph(graph), graph, kernel_kinds=kinds)


def kernel_option(ex, gene) -> int | None:
    return next((i for i, n in enumerate(ex.options[gene.name])
                 if n.op == "Kernel" and ex.eg.literal(n.children[0]) == KIND), None)


def attention_genome(ex) -> tuple:
    """The cheapest genome with the attention kernel chosen wherever it is offered."""
    picks = [kernel_option(ex, g) for g in ex.genes]
    assert any(p is not None for p in picks), "the rule did not offer attention_rows"
    return tuple(0 if p is None else p for p in picks)


def kernels(llir, name=KIND) -> list:
    return [n for n in llir.live_nodes() if n.op == "CustomOp" and n.attrs.get("name") == name]


# ---- the rule ----------------------------------------------------------------------------------
def test_the_rule_fires_on_the_tiny_llama_decode_step():
    """The real step (examples/llama, tiny config: 4 heads over 2 kv heads of 16, 2 layers): one
    attention kernel per layer, no softmax_rows left, and the step computes what the generic
    genome computes at several cache lengths (logits and the updated caches)."""
    config, graph, inputs = _tiny_llama_step()
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=NumpyBackend.kernel_kinds)
    ll = ex.extract(attention_genome(ex))
    ks = kernels(ll)
    assert len(ks) == config.num_hidden_layers
    hk, e = config.num_key_value_heads, config.head_dim
    for k in ks:
        p = tuple(k.attrs["params"])
        assert p[:2] == (hk, config.num_attention_heads // hk) and p[4:] == (e, e)
        assert (str(p[2]), str(p[3])) == ("s", f"min({N_CACHE}, c)")
        assert len(k.inputs) == 7
    assert kernels(ll, "softmax_rows") == []
    be = NumpyBackend()
    want_plan, got_plan = be.compile(ex.extract(ex.generic_genome())), be.compile(ll)
    for c in (1, 8, 40):
        args = inputs(c)
        want = want_plan.run([a.copy() for a in args], {"s": 1, "c": c})
        got = got_plan.run([a.copy() for a in args], {"s": 1, "c": c})
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _leaves(tree) -> list:
    from luminal_fn.frontend.pytree import flatten

    return [np.asarray(x) for x in flatten(tree)[0]]


GQA = {"4x2x16": (4, 2, 16), "8x2x32": (8, 2, 32), "6x3x8": (6, 3, 8),
       "mha_3x3x16": (3, 3, 16)}  # one key/value head per query head: plain products, G = 1


@pytest.mark.parametrize("name", sorted(GQA))
def test_the_kernel_computes_the_float64_attention_at_several_cache_lengths(name):
    """One extraction serves the bucket: decode rows (s = 1) and a 3-row prefill-shaped call,
    with the context c from 1 to the cache size (C = min(64, c) symbolic)."""
    config = gqa_config(*GQA[name])
    fn = llama_attention(config)
    ex = extractor(fn, decode_args(config, 9))
    ll = ex.extract(attention_genome(ex))
    (k,) = kernels(ll)
    assert len(k.inputs) == 7
    plan = NumpyBackend().compile(ll)
    for s, c in ((1, 1), (1, 2), (1, 17), (1, 64), (3, 5), (3, 40)):
        args = decode_args(config, c, s)
        got = plan.run(list(args), {"s": s, "c": c})[0]
        close(got, ref_attention(config, *args))


def test_the_formula_matches_the_reference_with_masked_keys():
    """attention_rows itself (the kernel's formula) on (Hk, G, S, E) operands: masked keys get
    no weight, and the traced literals (-1, log2(e), 1/sqrt(E)) give the softmax."""
    hk, g, s, c, e = 2, 3, 2, 11, 8
    q, k, v = f32(hk, g, s, e), f32(hk, c, e), f32(hk, c, e)
    mask = np.where(R.random((s, c)) < 0.4, -1e10, 0.0).astype(np.float32)
    mask[:, 3] = 0.0
    got = attention_rows(q, k, v, -1.0, np.log2(np.e), 1 / np.sqrt(e), mask)
    sc = np.einsum("agse,ace->agsc", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(e) + mask
    w = np.exp(sc - sc.max(-1, keepdims=True))
    want = np.einsum("agsc,ace->agse", w / w.sum(-1, keepdims=True), v.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    assert got.dtype == np.float32 and got.shape == (hk, g, s, e)


@pytest.mark.parametrize("name", sorted(GQA))
def test_random_genomes_compute_the_reference(name):
    config = gqa_config(*GQA[name])
    fn = llama_attention(config)
    ex = extractor(fn, decode_args(config, 9))
    rnd = random.Random(7)
    genomes = [None, attention_genome(ex)] + [tuple(rnd.randrange(g.n_options) for g in ex.genes)
                                             for _ in range(16)]
    be = NumpyBackend()
    used = 0
    for genome in genomes:
        ll = ex.extract(genome)
        used += bool(kernels(ll))
        for s, c in ((1, 9), (2, 30)):
            args = decode_args(config, c, s)
            close(be.compile(ll).run(list(args), {"s": s, "c": c})[0], ref_attention(config, *args))
    assert used >= 2


def _no_mask(q, kc, vc, mask):
    c = kc[:mask.shape[1]].shape[0]
    qh = lnp.reshape(q, (q.shape[0], 4, 16)).transpose((1, 0, 2))
    kh, vh = (lnp.reshape(x[:c], (c, 2, 16)).transpose((1, 0, 2)) for x in (kc, vc))
    return lf.nn.scaled_dot_product_attention(qh, kh, vh)


def _weights_transposed(q, kc, vc, mask):
    """softmax rows over the keys, but the product sums over the queries (s == c here)."""
    c = mask.shape[1]
    mask = mask[:, :kc[:c].shape[0]]
    qh = lnp.reshape(q, (q.shape[0], 4, 16)).transpose((1, 0, 2))
    kh, vh = (lnp.reshape(x[:c], (c, 2, 16)).transpose((1, 0, 2)) for x in (kc, vc))
    qg = lnp.reshape(qh, (2, 2, q.shape[0], 16))
    sc = lnp.reshape(lnp.matmul(qg, lnp.expand_dims(lnp.swapaxes(kh, -1, -2), -3)), (4, q.shape[0], c))
    w = lf.nn.softmax(sc * 0.25 + mask, axis=-1)
    wg = lnp.reshape(lnp.swapaxes(w, -1, -2), (2, 2, c, q.shape[0]))
    return lnp.matmul(wg, lnp.expand_dims(vh, -3))


def _mha_weights_transposed(q, kc, vc, mask):
    """one kv head per query head, the product summing over the queries (s == c here)"""
    c = mask.shape[1]
    qh = lnp.reshape(q, (q.shape[0], 2, 16)).transpose((1, 0, 2))
    kh, vh = (lnp.reshape(x[:c], (c, 2, 16)).transpose((1, 0, 2)) for x in (kc, vc))
    w = lf.nn.softmax(lnp.matmul(qh, lnp.swapaxes(kh, -1, -2)) * 0.25 + mask, axis=-1)
    return lnp.matmul(lnp.swapaxes(w, -1, -2), vh)


@pytest.mark.parametrize("name,fn,args,axes", [
    ("no_mask", _no_mask, decode_args(gqa_config(4, 2, 16), 9), DECODE),
    ("weights_transposed", _weights_transposed, decode_args(gqa_config(4, 2, 16), 9, 9), {}),
    ("mha_weights_transposed", _mha_weights_transposed, decode_args(gqa_config(2, 2, 16), 9, 9), {}),
])
def test_near_misses_do_not_fire(name, fn, args, axes):
    ex = extractor(fn, args, dynamic_axes=axes)
    assert all(kernel_option(ex, g) is None for g in ex.genes), name
    assert kernels(ex.extract(None)) == [], name


def test_other_backends_are_not_offered_the_kind():
    config = gqa_config(4, 2, 16)
    ex = extractor(llama_attention(config), decode_args(config, 9), kinds=frozenset({"softmax_rows"}))
    assert all(kernel_option(ex, g) is None for g in ex.genes)


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (2, 2)], ids=["gqa", "mha"])
@pytest.mark.parametrize("s,c", [(1, 9), (3, 12)])
def test_static_shapes_fire_too(s, c, heads, kv_heads):
    """Static dims fold S*C and G*S*C to numbers, and a size-1 S axis reads with stride 0."""
    config = gqa_config(heads, kv_heads, 16)
    args = decode_args(config, c, s)
    ex = extractor(llama_attention(config), args, dynamic_axes={})
    ll = ex.extract(attention_genome(ex))
    assert [tuple(k.attrs["params"]) for k in kernels(ll)] == [(kv_heads, heads // kv_heads, s, c, 16, 16)]
    close(NumpyBackend().compile(ll).run(list(args), {})[0], ref_attention(config, *args))


# ---- CUDA --------------------------------------------------------------------------------------
@pytest.mark.parametrize("recompute", [False, True, "split"], ids=["scores_in_shared", "scores_recomputed", "split"])
@pytest.mark.parametrize("shape", [(8, 2, 32), (32, 8, 64)], ids=["8x2x32", "llama_1b_32x8x64"])
def test_cuda_plans_one_kernel_and_the_module_compiles(shape, recompute, monkeypatch):
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    if recompute is True:
        monkeypatch.setattr(attentionkernels, "SCORES_IN_SHARED", 0)
    if recompute == "split":  # flash decoding: 8 keys a part
        monkeypatch.setattr(attentionkernels, "PART_KEYS", 8)
    config = gqa_config(*shape)
    ex = extractor(llama_attention(config), decode_args(config, 9), kinds=KERNEL_KINDS)
    plan = plan_graph(ex.extract(attention_genome(ex)), {"s": 1, "c": N_CACHE})
    labels = [s.label for s in plan.steps]  # q, caches and mask read in place
    assert labels[0] == "attention_rows" and labels.count("attention_rows") == 1
    assert not {"softmax_rows", "matmul", "materialize"} & set(labels), labels  # then the output's transpose
    assert (plan.steps[0].source.meta["parts"] > 1) == (recompute == "split")
    if nvcc_available():
        nvcc_check(module_source(plan.kernels()))


# name -> (heads, kv heads, head dim, dynamic, the calls' (s, c)). Planned at c = 64 the kernel
# runs 4 warps: up to 32 keys are held in registers (lf_attn_rows_held), more take the passes.
EMULATED = {
    "decode_4x2x16": (4, 2, 16, True, ((1, 1), (1, 17), (1, 64), (3, 20))),
    "decode_8x2x32": (8, 2, 32, True, ((1, 9), (1, 64))),
    "static_6x3x40": (6, 3, 40, False, ((1, 13),)),  # E over one warp's 32 lanes
    "mha_3x3x16": (3, 3, 16, True, ((1, 5), (2, 33))),
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("name,recompute", [(n, False) for n in sorted(EMULATED)]
                         + [("decode_4x2x16", True), ("mha_3x3x16", True)])
def test_cuda_kernel_on_the_cpu_emulation_computes_the_reference(name, recompute, tmp_path, monkeypatch):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph

    if recompute:  # C over the shared-memory budget: passes 2 and 3 recompute the scores
        monkeypatch.setattr(attentionkernels, "SCORES_IN_SHARED", 0)
    heads, kv_heads, head_dim, dynamic, calls = EMULATED[name]
    config = gqa_config(heads, kv_heads, head_dim)
    s0, c0 = calls[0]
    ex = extractor(llama_attention(config), decode_args(config, c0, s0),
                   kinds=KERNEL_KINDS, dynamic_axes=DECODE if dynamic else {})
    ll = ex.extract(attention_genome(ex))
    bp = plan_graph(ll, {"s": 16, "c": N_CACHE} if dynamic else {})
    assert [s.label for s in bp.steps].count("attention_rows") == 1
    if dynamic:  # the output's transposed copy is folded into the kernel's store (attention_store.py)
        assert bp.steps[0].source.meta.get("stores_into") and "fused" not in [s.label for s in bp.steps[1:]]
    lib = emu.build_with_hand(bp, ("rms_norm.cu", "attention.cu"), str(tmp_path))
    for s, c in calls:
        args = decode_args(config, c, s)
        got = emu.run(lib, bp, list(args), {"s": s, "c": c} if dynamic else {})[0]
        close(got, ref_attention(config, *args))


def test_a_prompts_many_rows_get_smaller_blocks():
    from luminal_fn.backends.cuda.attentionkernels import row_warps

    assert row_warps(128, 1, 32, 132) == 8  # a decode step: 32 heads, one row each
    assert row_warps(2048, 1, 32, 132) == 16
    assert row_warps(128, 1, 2048, 132) == 4  # a prompt bucket up to 64 tokens: 2048 rows
    assert row_warps(2048, 1, 2048, 132) == 4
    assert row_warps(32, 1, 2048, 132) == 2  # few keys: fewer warps still


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("warps", ["2", "4", "16"])
@pytest.mark.parametrize("name", ["decode_4x2x16", "mha_3x3x16", "static_6x3x40"])
def test_rows_with_a_forced_block_size_compute_the_reference(name, warps, tmp_path, monkeypatch):
    """LUMINAL_CUDA_ATTN_WARPS (the prompt's A/B of block sizes): each size computes the same."""
    from luminal_fn.backends.cuda.attentionkernels import WARPS_SWITCH, row_warps

    monkeypatch.setenv(WARPS_SWITCH, warps)
    assert row_warps(128, 1, 32, 132) == row_warps(128, 1, 4096, 132) == int(warps)
    test_cuda_kernel_on_the_cpu_emulation_computes_the_reference(name, False, tmp_path, monkeypatch)
    monkeypatch.setenv(WARPS_SWITCH, "3")
    with pytest.raises(ValueError, match=WARPS_SWITCH):
        row_warps(128, 1, 32, 132)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("name", sorted(EMULATED))
def test_split_rows_on_the_cpu_emulation_compute_the_reference(name, tmp_path, monkeypatch):
    """Flash decoding: with 8 keys a part (128 on the device) a row's keys are split among up to
    PARTS blocks, each writing its (max, sum, values), the last one merging them; short contexts
    (C <= 8) take the whole-row path; causal rows whose later parts are wholly masked add nothing."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph

    monkeypatch.setattr(attentionkernels, "PART_KEYS", 8)
    heads, kv_heads, head_dim, dynamic, calls = EMULATED[name]
    calls = calls + (((1, 8), (16, 40), (1, 57)) if dynamic else ())
    config = gqa_config(heads, kv_heads, head_dim)
    s0, c0 = calls[0]
    ex = extractor(llama_attention(config), decode_args(config, c0, s0),
                   kinds=KERNEL_KINDS, dynamic_axes=DECODE if dynamic else {})
    ll = ex.extract(attention_genome(ex))
    dims = {"s": 16, "c": N_CACHE} if dynamic else {}
    bp = plan_graph(ll, dims)
    (step,) = [st for st in bp.steps if st.label == "attention_rows"]
    rows = heads * (16 if dynamic else s0)
    c_max = N_CACHE if dynamic else c0
    parts = max(1, min(2 * 132 // rows, -(-c_max // 8), 32))
    assert step.source.meta["parts"] == parts > 1
    assert f", {parts}, 8>(" in step.source.text
    lib = emu.build_with_hand(bp, ("rms_norm.cu", "attention.cu"), str(tmp_path))
    for s, c in calls:
        args = decode_args(config, c, s)
        for _ in range(2):  # the per-row counts are zero again after a launch
            got = emu.run(lib, bp, list(args), {"s": s, "c": c} if dynamic else {})[0]
            close(got, ref_attention(config, *args))


def test_no_split_when_the_rows_fill_the_device_or_the_switch_is_off(monkeypatch):
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph

    config = gqa_config(4, 2, 16)
    ex = extractor(llama_attention(config), decode_args(config, 9), kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))

    def parts(**kw):
        (step,) = [st for st in plan_graph(ll, {"s": 16, "c": N_CACHE}, **kw).steps if st.label == "attention_rows"]
        return step.source.meta["parts"]

    assert parts() == 1  # C <= 64 is one part of 128 keys
    monkeypatch.setattr(attentionkernels, "PART_KEYS", 8)
    assert parts() == 4 and parts(sm_count=16) == 1  # 64 rows x 4 parts: 2 blocks an SM; 64 rows fill 16 SMs
    monkeypatch.setenv("LUMINAL_CUDA_ATTN_SPLIT", "0")
    assert parts() == 1


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GQA))
def test_cuda_attention_kernel_on_the_gpu(name):
    """The kernel the rule offers, chosen by the genome, against the float64 reference; then the
    jitted function on the CUDA backend (whatever its search picks) agrees too."""
    from luminal_fn.backends.cuda import KERNEL_KINDS

    config = gqa_config(*GQA[name])
    fn = llama_attention(config)
    ex = extractor(fn, decode_args(config, 9), kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))
    assert len(kernels(ll)) == 1
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    exe = be.compile(ll)
    for s, c in ((1, 1), (1, 37), (1, 64), (5, 40)):
        args = decode_args(config, c, s)
        got = be.to_numpy(exe.run([be.from_numpy(a) for a in args], {"s": s, "c": c})[0])
        close(got, ref_attention(config, *args))
    jf = lf.jit(fn, backend="cuda", dynamic_axes=DECODE, buckets=BUCKETS)
    for s, c in ((1, 12), (4, 30)):
        args = decode_args(config, c, s)
        close(np.asarray(jf(*args)), ref_attention(config, *args))


@pytest.mark.gpu
def test_split_rows_on_the_gpu_match_float64():
    """Llama-3.2-1B's attention (32 heads over 8 kv heads of 64; float32 activations and cache,
    as the Llama step keeps them) over a cache of 1536 rows: at long contexts a row's keys are
    split among blocks (flash decoding) whose parts the last block merges on the device; every
    context length and both row counts match float64, and a second launch (the per-row counts
    zero again) gives the same values."""
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.cuda import KERNEL_KINDS

    config, n = gqa_config(32, 8, 64), 1536

    def args(c, s=1):
        q = f32(s, config.q_dim)
        kc, vc = (f32(n, 512) for _ in range(2))
        return q, kc, vc, model.causal_mask(np.arange(c - s, c), c)

    buckets = {"s": [(1, 1), (2, 16)], "c": [(1, n)]}
    graph = lf.jit(llama_attention(config), dynamic_axes=DECODE, buckets=buckets).trace(*args(9)).hlir
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))
    be = get_backend("cuda")
    exe = be.compile(ll)
    from luminal_fn.backends.cuda.executable import plan_graph

    (step,) = [st for st in plan_graph(ll, {"s": 1, "c": n}).steps if st.label == "attention_rows"]
    assert step.source.meta["parts"] == 8  # 32 rows: floor(2 * 132 SMs / 32), at most 1536 / 128
    tol = 2e-5
    for s, c in ((1, 1), (1, 100), (1, 129), (1, 700), (1, 1536), (3, 1000)):
        a = args(c, s)
        for _ in range(2):
            got = be.to_numpy(exe.run([be.from_numpy(x) for x in a], {"s": s, "c": c})[0])
            np.testing.assert_allclose(np.asarray(got, np.float64), ref_attention(config, *a),
                                       rtol=tol, atol=tol, err_msg=f"s={s} c={c}")


def _tiny_llama_step():
    """The tiny Llama decode step traced (2 layers, 4 heads over 2 kv heads of 16), and its
    flat inputs at a context of c rows (random cache rows, the new token at row c - 1)."""
    from llama.checkpoint import random_weights
    from llama.config import config_from_dict
    from llama.tiny import tiny_config_dict

    config = config_from_dict(tiny_config_dict(384, 1, [2]), source="the test")
    weights = random_weights(config, "float32", seed=0, as_numpy=True, embed_std=0.1)
    step = model.make_step(config, backend="numpy", buckets={"s": [(1, 1)], "c": [(1, N_CACHE, 16)]})
    graph = step.trace(weights, *model.step_inputs([5], 7), model.new_cache(config, N_CACHE, "numpy")).hlir

    def inputs(c):
        rng = np.random.default_rng(c)
        cache = [{"k": rng.standard_normal((N_CACHE, config.kv_dim)).astype(np.float32),
                  "v": rng.standard_normal((N_CACHE, config.kv_dim)).astype(np.float32)}
                 for _ in range(config.num_hidden_layers)]
        return _leaves((weights, *model.step_inputs([7], c - 1), cache))

    return config, graph, inputs


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
def test_tiny_llama_decode_step_with_the_kernel_on_the_cpu_emulation(tmp_path):
    """The whole step planned for CUDA with attention_rows chosen (matmuls forced to the rendered
    reduction: cuBLAS and the GEMV kernels are not emulated) computes the NumPy backend's generic
    step: logits and both layers' updated caches."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    config, graph, inputs = _tiny_llama_step()
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=frozenset({KIND}))
    ll = ex.extract(attention_genome(ex))
    for n in ll.live_nodes():
        if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
            n.attrs["strategy"] = "rendered"
    bp = plan_graph(ll, {"s": 1, "c": N_CACHE})
    labels = [s.label for s in bp.steps]
    assert labels.count(KIND) == config.num_hidden_layers and "softmax_rows" not in labels
    lib = emu.build_with_hand(bp, ("rms_norm.cu", "attention.cu"), str(tmp_path))
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    for c in (1, 40):
        args = inputs(c)
        want = want_plan.run([a.copy() for a in args], {"s": 1, "c": c})
        got = emu.run(lib, bp, [a.copy() for a in args], {"s": 1, "c": c})
        assert len(got) == len(want) == 1 + 2 * config.num_hidden_layers
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_tiny_llama_decode_step_with_the_kernel_on_the_gpu():
    """The whole step on the CUDA backend with attention_rows chosen computes the NumPy
    backend's generic step."""
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.cuda import KERNEL_KINDS

    config, graph, inputs = _tiny_llama_step()
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))
    assert len(kernels(ll)) == config.num_hidden_layers
    be = get_backend("cuda")
    exe = be.compile(ll)
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    for c in (1, 23, N_CACHE):
        args = inputs(c)
        want = want_plan.run([a.copy() for a in args], {"s": 1, "c": c})
        got = exe.run([be.from_numpy(a) for a in args], {"s": 1, "c": c})
        for g, w in zip(got, want):
            np.testing.assert_allclose(be.to_numpy(g), np.asarray(w), rtol=1e-4, atol=1e-4)


def test_the_search_seeds_a_genome_with_the_attention_kernel():
    """The kernel sits behind the AV product's MatMul (equal cost, MatMul ordered first), so the
    cheapest genome does not take it; kernel_genomes proposes it for the search to time."""
    config, graph, _ = _tiny_llama_step()
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=NumpyBackend.kernel_kinds)
    assert kernels(ex.extract()) == []
    seeded = [len(kernels(ex.extract(g))) for g in ex.kernel_genomes()]
    assert config.num_hidden_layers in seeded, seeded


def test_the_split_kernels_launch_bound_follows_its_switch(monkeypatch):
    """LUMINAL_CUDA_ATTN_SPLIT_BLOCKS sets the blocks an SM the split (flash-decoding) kernel is
    compiled to fit (its registers: 72 at the default 3, 47 at 4 with nvcc 13.5); the plain kernel keeps
    none; a bad value names the switch."""
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    monkeypatch.setattr(attentionkernels, "PART_KEYS", 8)
    config = gqa_config(32, 8, 64)
    ex = extractor(llama_attention(config), decode_args(config, 9), kinds=KERNEL_KINDS)
    genome = attention_genome(ex)
    for value, want in (("", ", 3) lf_attention_rows"), ("4", ", 4) lf_attention_rows")):
        monkeypatch.setenv(attentionkernels.SPLIT_BLOCKS_SWITCH, value)
        plan = plan_graph(ex.extract(genome), {"s": 1, "c": N_CACHE})
        (step,) = [s for s in plan.steps if s.label == "attention_rows"]
        assert step.source.meta["parts"] > 1 and want in step.source.text, step.source.text[:400]
        if nvcc_available():
            nvcc_check(module_source(plan.kernels()))
    monkeypatch.setenv(attentionkernels.SPLIT_BLOCKS_SWITCH, "9")
    with pytest.raises(ValueError, match="LUMINAL_CUDA_ATTN_SPLIT_BLOCKS"):
        plan_graph(ex.extract(genome), {"s": 1, "c": N_CACHE})

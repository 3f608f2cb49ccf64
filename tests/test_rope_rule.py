"""The RoPE rule of optimize/rules/specialize_rope.egg and its kernel, rope_half.

The rule fires on what nn.rope traces over a 3-D x (the Llama step's q and k, heads-first x,
full-width or half tables, x widened from a narrower dtype) and not on near misses; the NumPy
kernel and every random genome agree with an independent float64 RoPE (the pairs rotated as
complex numbers); the CUDA lowering runs on the CPU emulation of CUDA (g++ stand-in,
tests/cuda_model_emulation.py) against NumPy, for the cases and for a tiny Llama step in decode
and prefill; on a real GPU (marked ``gpu``) the extracted kernels agree with the same references.
"""
from __future__ import annotations

import dataclasses
import os
import random
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.backends.numpy.rope_kernels import rope_half_reference
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

R = np.random.default_rng(17)
KIND = "rope_half"
H, KVH, D = 4, 2, 16


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


# ---- the float64 reference: each pair (x[d], x[d + D/2]) times cos + i sin -------------------------
def ref_rope(x, cos_half, sin_half):
    """x (..., D); cos_half, sin_half broadcast against (..., D/2)."""
    x = np.asarray(x).astype(np.float64)
    h = x.shape[-1] // 2
    z = (x[..., :h] + 1j * x[..., h:]) * (np.asarray(cos_half, np.float64) + 1j * np.asarray(sin_half, np.float64))
    return np.concatenate([z.real, z.imag], axis=-1)


def _angles(pos, inv):
    return pos.astype(np.float64)[:, None] * inv.astype(np.float64)[None, :]


# ---- cases: name -> (fn, args, reference, dynamic axes, expected params) ---------------------------
def llama_case(s=3, heads=H, dtype=np.float32):
    """The Llama step's rotary: x (s, heads*D) seen as (s, heads, D), tables from the positions
    and inverse frequencies computed in the graph (examples/llama/model.py)."""
    x = f32(s, heads * D).astype(dtype)
    pos = np.arange(5, 5 + s, dtype=np.int32)
    inv = (1.0 / 500.0 ** (np.arange(D // 2) / (D // 2))).astype(np.float32)

    def fn(x, pos, inv):
        angles = lnp.astype(pos, lnp.float32)[:, None] * inv[None, :]
        n = x.shape[0]
        xh = lnp.reshape(lnp.astype(x, lnp.float32), (n, heads, D))
        return lnp.reshape(lf.nn.rope(xh, cos=lnp.cos(angles), sin=lnp.sin(angles), seq_axis=0), (n, heads * D))

    a = _angles(pos, inv)[:, None, :]
    want = ref_rope(x.astype(np.float32).reshape(s, heads, D), np.cos(a), np.sin(a)).reshape(s, heads * D)
    return fn, (x, pos, inv), want, {"x": {0: "s"}, "pos": {0: "s"}}, {"s": s}


def heads_first_case():
    """x (H, S, D) read plain; half tables (S, D/2) given."""
    x, a = f32(H, 5, D), f32(5, D // 2)
    c, s = np.cos(a), np.sin(a)
    return (lambda x, c, s: lf.nn.rope(x, cos=c, sin=s)), (x, c, s), ref_rope(x, c, s), \
        {"x": {1: "s"}, "c": {0: "s"}, "s": {0: "s"}}, {"s": 5}


def one_head_case():
    """A 2-D x (s, D): one head."""
    x, a = f32(7, D), f32(7, D // 2)
    c, s = np.cos(a), np.sin(a)
    return (lambda x, c, s: lf.nn.rope(x, cos=c, sin=s)), (x, c, s), ref_rope(x, c, s), \
        {"x": {0: "s"}, "c": {0: "s"}, "s": {0: "s"}}, {"s": 7}


def batch_heads_case():
    """A 4-D x (B, H, s, D), the layout of PyTorch attention, tables (s, D/2)."""
    x, a = f32(2, 3, 5, D), f32(5, D // 2)
    c, s = np.cos(a), np.sin(a)
    return (lambda x, c, s: lf.nn.rope(x, cos=c, sin=s)), (x, c, s), ref_rope(x, c, s), \
        {"x": {2: "s"}, "c": {0: "s"}, "s": {0: "s"}}, {"s": 5}


def full_tables_case():
    """Hugging Face's full-width tables (S, D) given as they are."""
    x, a = f32(H, 6, D), f32(6, D // 2)
    c, s = np.cos(a), np.sin(a)
    cf, sf = np.concatenate([c, c], -1), np.concatenate([s, s], -1)
    return (lambda x, c, s: lf.nn.rope(x, cos=c, sin=s)), (x, cf, sf), ref_rope(x, c, s), None, {}


def narrow_x_case():
    """x stored in float16 and widened first (the bf16 Llama's GEMV output): the kernel reads it
    narrow."""
    fn, (x, pos, inv), _, axes, dims = llama_case(s=4, heads=KVH)
    x16 = x.astype(np.float16)
    a = _angles(pos, inv)[:, None, :]
    want = ref_rope(x16.astype(np.float32).reshape(4, KVH, D), np.cos(a), np.sin(a)).reshape(4, KVH * D)
    return fn, (x16, pos, inv), want, axes, dims


CASES = {"llama": llama_case, "heads_first": heads_first_case, "full_tables": full_tables_case,
         "narrow_x": narrow_x_case, "one_head": one_head_case, "batch_heads": batch_heads_case}


def _extractor(fn, args, kinds, axes=None):
    graph = lf.jit(fn, dynamic_axes=axes).trace(*args).hlir
    return Extractor(build_egraph(graph), graph, kernel_kinds=kinds)


def _ropes(llir) -> list:
    """(params, input dtypes, last dim of each table view) of every rope_half kernel."""
    out = []
    for n in llir.live_nodes():
        if n.op == "CustomOp" and n.attrs.get("name") == KIND:
            dts = tuple(llir.nodes[i].dtype.name for i, _ in n.inputs)
            out.append((tuple(str(p) for p in n.attrs["params"]), dts,
                        tuple(v.shape[-1] for _, v in n.inputs[1:3])))
    return out


def _close(got, want, tol=2e-5):
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol, atol=tol)


# ---- the NumPy semantics ------------------------------------------------------------------------
def test_kernel_formula_matches_the_float64_rope_with_full_and_half_tables():
    x, a = f32(3, 2, D), f32(3, 1, D // 2)
    c, s = np.cos(a), np.sin(a)
    want = ref_rope(x, c, s)
    _close(rope_half_reference(x, c, s), want, 1e-6)
    _close(rope_half_reference(x, np.concatenate([c, c], -1), np.concatenate([s, s], -1)), want, 1e-6)
    # the literal is an input: with +1 the first half turns the other way (not a constant -1)
    flipped = rope_half_reference(x, c, s, np.float32(1.0))
    _close(flipped[..., :D // 2], x[..., :D // 2] * c + x[..., D // 2:] * s, 1e-6)


# ---- the rule ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name,expect", [
    # the tables are the half tables the front end concatenates: the kernel reads them directly
    ("llama", [(("s", "4", "16"), ("float32", "float32", "float32", "float32"), (8, 8))]),
    ("heads_first", [(("4", "s", "16"), ("float32", "float32", "float32", "float32"), (8, 8))]),
    ("full_tables", [(("4", "6", "16"), ("float32", "float32", "float32", "float32"), (16, 16))]),
    # the float16 x is read as it is stored: the Cast to float32 is the kernel's load
    ("narrow_x", [(("s", "2", "16"), ("float16", "float32", "float32", "float32"), (8, 8))]),
    ("one_head", [(("s", "16"), ("float32", "float32", "float32", "float32"), (8, 8))]),
    ("batch_heads", [(("2", "3", "s", "16"), ("float32", "float32", "float32", "float32"), (8, 8))]),
])
def test_rope_becomes_one_kernel(name, expect):
    fn, args, _, axes, _ = CASES[name]()
    ll = _extractor(fn, args, NumpyBackend.kernel_kinds, axes).extract(None)
    assert _ropes(ll) == expect
    # nothing else reads x in pairs: the only other kernels make the tables (llama) or none
    others = [n.attrs.get("name") for n in ll.live_nodes() if n.op == "CustomOp" and n.attrs.get("name") != KIND]
    assert len(others) <= 2, others


def _rot_no_neg(x, c, s):
    h = D // 2
    return x * c + lnp.concatenate([x[..., h:], x[..., :h]], axis=-1) * s


def _rot_other(x, y, c, s):
    h = D // 2
    return x * c + lnp.concatenate([-y[..., h:], y[..., :h]], axis=-1) * s


def _rot_unswapped(x, c, s):
    h = D // 2
    return x * c + lnp.concatenate([-x[..., :h], x[..., h:]], axis=-1) * s


@pytest.mark.parametrize("name,fn,args", [
    # the halves swapped without the negation (no literal times x2)
    ("no_neg", _rot_no_neg, (f32(2, 3, D), f32(3, D), f32(3, D))),
    # the rotated halves come from another tensor than x
    ("other_tensor", _rot_other, (f32(2, 3, D), f32(2, 3, D), f32(3, D), f32(3, D))),
    # the halves negated in place, not swapped
    ("unswapped", _rot_unswapped, (f32(2, 3, D), f32(3, D), f32(3, D))),
    # a 5-D x: ranks other than 2, 3 and 4 keep the generic kernels
    ("rank5", lambda x, c, s: lf.nn.rope(x, cos=c, sin=s), (f32(2, 1, 2, 5, D), f32(5, D // 2), f32(5, D // 2))),
    # x read through a transposed view (seq_axis=0 on (s, H, D) data seen as (H, s, D)): the
    # rotated halves and x*cos read other elements than a plain x would
    ("x_transposed_read", lambda x, c, s: x * c + lnp.concatenate([-lnp.transpose(x, (1, 0, 2))[..., D // 2:],
                                                                   x[..., :D // 2]], axis=-1) * s,
     (f32(3, 3, D), f32(3, D), f32(3, D))),
])
def test_near_misses_do_not_fire(name, fn, args):
    ex = _extractor(fn, args, NumpyBackend.kernel_kinds)
    assert _ropes(ex.extract(None)) == [], name
    assert list(ex.kernel_genomes()) == [], name


def test_the_rule_leaves_other_backends_alone():
    fn, args, _, axes, _ = llama_case()
    assert _ropes(_extractor(fn, args, frozenset(), axes).extract(None)) == []


def _tiny_llama(dtype="float32", layers=2):
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=layers, hidden_size=64,
                              intermediate_size=128, num_attention_heads=H, num_key_value_heads=KVH,
                              head_dim=D, vocab_size=256)
    w = random_weights(cfg, dtype, as_numpy=True)
    rng = np.random.default_rng(2)
    cache = [{"k": (rng.standard_normal((64, cfg.kv_dim)) * 0.3).astype(np.float32),
              "v": (rng.standard_normal((64, cfg.kv_dim)) * 0.3).astype(np.float32)}
             for _ in range(layers)]
    return cfg, w, cache, make_step(cfg)


def _flat(step, args):
    dyn, _, _, dyn_kw = step._split(args, {})
    leaves, lay = step._layout(dyn, dyn_kw)
    return [np.asarray(x) for x in leaves], lay


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_llama_step_ropes_q_and_k_with_one_kernel_each(dtype):
    from llama.model import step_inputs

    _, w, cache, step = _tiny_llama(dtype)
    g = step.trace(w, *step_inputs([7], 39), cache).hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=NumpyBackend.kernel_kinds).extract(None)
    ropes = _ropes(ll)
    x_dt = "bfloat16" if dtype == "bfloat16" else "float32"  # the GEMV's own output, not its Cast
    q = (("s", str(H), str(D)), (x_dt, "float32", "float32", "float32"), (8, 8))
    k = (("s", str(KVH), str(D)), (x_dt, "float32", "float32", "float32"), (8, 8))
    assert sorted(ropes) == sorted([q, k] * 2), ropes


# ---- every genome computes the reference (NumPy backend), decode and prefill ---------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_random_genomes_compute_the_reference(name):
    fn, args, want, axes, dims = CASES[name]()
    ex = _extractor(fn, args, NumpyBackend.kernel_kinds, axes)
    be = NumpyBackend()
    rnd = random.Random(3)
    used = 0
    for genome in [None, ex.generic_genome()] + [tuple(rnd.randrange(g.n_options) for g in ex.genes)
                                                 for _ in range(16)]:
        ll = ex.extract(genome)
        used += bool(_ropes(ll))
        _close(be.compile(ll).run(list(args), dims)[0], want, 2e-5)
    assert used > 0


@pytest.mark.parametrize("s", [1, 6])
def test_jit_with_a_symbolic_sequence_matches_the_reference(s):
    fn, _, _, axes, _ = llama_case()
    jf = lf.jit(fn, backend="numpy", dynamic_axes=axes, buckets={"s": [(1, 1), (2, 8)]})
    _, args, want, _, _ = llama_case(s=s)
    _close(jf(*args), want)


def test_llama_step_decode_and_prefill_agree_with_the_generic_kernels():
    from llama.model import step_inputs

    _, w, cache, step = _tiny_llama()
    g = step.trace(w, *step_inputs([7], 39), cache).hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=NumpyBackend.kernel_kinds)
    be = NumpyBackend()
    with_rope, generic = be.compile(ex.extract(None)), be.compile(ex.extract(ex.generic_genome()))
    for tokens, start in (([7], 39), ([3, 9, 4, 11, 2], 20)):
        ins, _ = _flat(step, (w, *step_inputs(tokens, start), cache))
        dims = {"s": len(tokens), "c": start + len(tokens)}
        for a, b in zip(with_rope.run([x.copy() for x in ins], dims), generic.run([x.copy() for x in ins], dims)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


# ---- CUDA: planning and the CPU emulation --------------------------------------------------------
def test_cuda_plans_rope_half_and_the_module_compiles():
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    labels, kernels = [], []
    for name in sorted(CASES):
        fn, args, _, axes, _ = CASES[name]()
        plan = plan_graph(_extractor(fn, args, KERNEL_KINDS, axes).extract(None), {"s": 8})
        labels += [s.label for s in plan.steps]
        kernels += plan.kernels()
    assert labels.count(KIND) == len(CASES)
    text = module_source(kernels)
    assert "lf_rope_half_pair(" in text
    if nvcc_available():
        nvcc_check(text)


def _emulation_library(plans, workdir):
    """The stand-in for CUDA, kernels/rope.cu and the plans' kernels."""

    import cuda_model_emulation as emu
    from luminal_fn.backends.render.files import kernel_file

    parts = [emu._SHIM, kernel_file("rope.cu")]
    seen = {}
    for bp in plans:
        for s in bp.steps:
            seen.setdefault(s.source.name, s.source)
    for src in seen.values():
        parts += [emu._shared_static(src.text), emu._runner(src)]
    return emu.compile_parts(parts, f"{workdir}/rope")


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_rope_half_on_the_cpu_emulation(name, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    fn, args, want, axes, dims = CASES[name]()
    ll = _extractor(fn, args, frozenset({KIND}), axes).extract(None)
    bp = plan_graph(ll, {k: 8 for k in dims})  # the bucket's largest s; called at the real one
    assert [s.label for s in bp.steps].count(KIND) == 1
    got = emu.run(_emulation_library([bp], str(tmp_path)), bp, list(args), dims)[0]
    np.testing.assert_allclose(got, NumpyBackend().compile(ll).run(list(args), dims)[0], rtol=1e-6, atol=1e-6)
    _close(got, want, 2e-5)


@needs_gxx
def test_cuda_llama_step_with_rope_half_on_the_cpu_emulation(tmp_path):
    """Decode (s = 1) and prefill (s = 5) of a float32 tiny Llama, one plan per bucket: every
    output (logits, both caches) matches the NumPy backend."""
    import cuda_model_emulation as emu
    from llama.model import step_inputs
    from luminal_fn.backends.cuda.executable import plan_graph

    _, w, cache, step = _tiny_llama(layers=1)
    g = step.trace(w, *step_inputs([7], 39), cache).hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=frozenset({KIND})).extract(None)
    for n in ll.live_nodes():  # GEMV kernels and cuBLAS are not emulated: rendered matmuls
        if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
            n.attrs["strategy"] = "rendered"
    calls = []
    for tokens, start, bucket in (([7], 39, {"s": 1, "c": 48}), ([3, 9, 4, 11, 2], 20, {"s": 8, "c": 48})):
        ins, lay = _flat(step, (w, *step_inputs(tokens, start), cache))
        calls.append((ins, {"s": len(tokens), "c": start + len(tokens)}, plan_graph(ll, bucket, donated=lay.donated)))
    for *_, bp in calls:  # (q's and k's, alone or sharing a launch: cuda/horizontal.py; k's
        # storing into the cache: cuda/rope_store.py)
        parts = [p.split(" -> ") for s in bp.steps for p in s.label.split(" + ")]
        assert sum(p[0] == KIND for p in parts) == 2
        assert sum(p == [KIND, "Scatter (in place)"] for p in parts) == 1
    lib = _emulation_library([bp for *_, bp in calls], str(tmp_path))
    be = NumpyBackend().compile(ll)
    for ins, dims, bp in calls:
        want = be.run([x.copy() for x in ins], dims)
        got = emu.run(lib, bp, [x.copy() for x in ins], dims)
        for k, (o, r) in enumerate(zip(got, want)):
            np.testing.assert_allclose(o, np.asarray(r), rtol=1e-4, atol=1e-4, err_msg=f"dims {dims} output {k}")


@needs_gxx
@pytest.mark.parametrize("style", ["half", "interleaved"])
def test_cuda_attr_driven_rope_on_the_cpu_emulation(style, tmp_path):
    """The attr-driven ``rope`` kind (no rule offers it) shares rope_half's pair loop: x (3, 2, D)
    and full-width tables broadcast over the heads, against the float64 rotation."""
    import cuda_model_emulation as emu
    from cuda_cases import B
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.ir.view import View

    b = B()
    shape = (3, 2, D)
    x, c, s = b.input(shape), b.input((3, D)), b.input((3, D))
    tab = View((3, 2, D), (D, 0, 1), 0)
    b.output(b.custom("rope", [b.c(x), (c, tab), (s, tab)], shape, style=style))
    xs, a = f32(*shape), f32(3, 1, D // 2)
    if style == "half":
        cf, sf = np.concatenate([np.cos(a), np.cos(a)], -1), np.concatenate([np.sin(a), np.sin(a)], -1)
        want = ref_rope(xs, np.cos(a), np.sin(a))
    else:  # pairs (2i, 2i + 1): the tables repeat each angle twice
        cf, sf = np.repeat(np.cos(a), 2, -1), np.repeat(np.sin(a), 2, -1)
        pairs = xs.reshape(3, 2, D // 2, 2).transpose(0, 1, 3, 2).reshape(shape)
        want = ref_rope(pairs, np.cos(a), np.sin(a)).reshape(3, 2, 2, D // 2).transpose(0, 1, 3, 2).reshape(shape)
    bp = plan_graph(b.g, {})
    got = emu.run(_emulation_library([bp], str(tmp_path)), bp, [xs, cf[:, 0], sf[:, 0]], {})[0]
    _close(got, want)


# ---- CUDA on a GPU ------------------------------------------------------------------------------
def _gpu_cases():
    def bf16_llama():
        fn, (x, pos, inv), _, axes, dims = llama_case(s=5, heads=H)
        xb = x.astype(ml_dtypes.bfloat16)
        a = _angles(pos, inv)[:, None, :]
        want = ref_rope(xb.astype(np.float32).reshape(5, H, D), np.cos(a), np.sin(a)).reshape(5, H * D)
        return fn, (xb, pos, inv), want, axes, dims

    return {**CASES, "bf16_llama": bf16_llama}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(_gpu_cases()))
def test_cuda_rope_half_on_the_gpu(name):
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.cuda import KERNEL_KINDS

    fn, args, want, axes, dims = _gpu_cases()[name]()
    ll = _extractor(fn, args, KERNEL_KINDS, axes).extract(None)
    assert _ropes(ll), name
    cuda = get_backend("cuda")
    exe = cuda.compile(ll)
    for call in (1, 2):  # the second call replays the captured graph
        got = cuda.to_numpy(exe.run([cuda.from_numpy(a) for a in args], dims)[0])
        _close(got, want, 1e-4)
    jf = lf.jit(fn, backend="cuda", dynamic_axes=axes)  # and through jit, whatever search picks
    _close(np.asarray(jf(*args)), want, 1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_llama_step_with_rope_half_on_the_gpu(dtype):
    """The tiny Llama step as the CUDA backend extracts it (rope_half for q and k, reading the
    GEMV output), decode and prefill, against the NumPy backend on the same kernels."""
    from llama.model import step_inputs
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.cuda import KERNEL_KINDS

    _, w, cache, step = _tiny_llama(dtype, layers=2)
    g = step.trace(w, *step_inputs([7], 39), cache).hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    assert len(_ropes(ll)) == 4
    cuda = get_backend("cuda")
    exe = cuda.compile(ll)
    ref = NumpyBackend().compile(ll)
    tol = 2e-2 if dtype == "bfloat16" else 1e-3  # a bf16 product may round the other way
    for tokens, start in (([7], 39), ([3, 9, 4, 11, 2], 20)):
        ins, _ = _flat(step, (w, *step_inputs(tokens, start), cache))
        dims = {"s": len(tokens), "c": start + len(tokens)}
        want = ref.run([x.copy() for x in ins], dims)
        got = exe.run([cuda.from_numpy(x.copy()) for x in ins], dims)
        for k, (o, r) in enumerate(zip(got, want)):
            np.testing.assert_allclose(cuda.to_numpy(o).astype(np.float64), np.asarray(r).astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=f"{dtype} dims {dims} output {k}")

"""Planned CUDA kernels run on a CPU emulation (tests/cuda_model_emulation.py: g++ against a
stand-in for CUDA) and compared with the NumPy backend on the same LLIR.

What extraction now hands the renderer: fused trees whose inputs are read through composed
reshape/slice/broadcast views and through padded (masked) views (optimize/view_inline.py). Here
the rendered generic kernels (elementwise with their vector paths, reductions in each strategy
with split scratch, output/materialize copies, Iota, Gather, Scatter copied and in place) run
with the backend's parameter table and launch shapes, for every case of test_view_inline.py
(static and with the symbolic dim below and at the bucket's largest value, the generic genome
and random ones), RoPE's rotate_half, a tiny float32 Llama decode step (matmuls forced to the
rendered reduction: the GEMV kernels and cuBLAS are not emulated) and a residual RMS stack.
Nothing here needs a GPU: g++ only.
"""
from __future__ import annotations

import importlib.util

import dataclasses
import random
import shutil
import os
import sys

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

import cuda_model_emulation as emu
from test_view_inline import CASES
from test_optimizer import _rms_residual_stack, _rms_residual_stack_ref

pytestmark = pytest.mark.skipif(shutil.which("g++") is None,
                                reason="g++ is not installed: the CUDA emulation compiles kernels with it")

R = np.random.default_rng(11)


def _r(*shape):
    return R.standard_normal(shape).astype(np.float32)


def _genomes(ex, n, seed):
    rng = random.Random(seed)
    return [ex.generic_genome()] + [tuple(rng.randrange(g.n_options) for g in ex.genes) for _ in range(n)]


def _close(got, want, what, tol):
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs the reference's {want.shape}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol, err_msg=what)


def _emulate_all(cases, tmp_path, tol=2e-5):
    """cases: (label, llir, bucket dims, [(inputs, dims)], donated). Plans each LLIR for its
    bucket, compiles every kernel of every plan into one library, runs each call emulated and
    on the NumPy backend; returns the plans."""
    plans = []
    for label, llir, bucket, calls, donated in cases:
        bp = plan_graph(llir, bucket, donated=donated)
        why = emu.why_not_emulable(bp)
        assert why is None, f"{label}: not emulable: {why}\n{bp.describe()}"
        plans.append(bp)
    lib = emu.build(plans, str(tmp_path))
    be = get_backend("numpy")
    for (label, llir, bucket, calls, _), bp in zip(cases, plans):
        prog = be.compile(llir)
        for inputs, dims in calls:
            want = prog.run([np.array(x, copy=True) for x in inputs], dims)
            got = emu.run(lib, bp, inputs, dims)
            for k, (o, w) in enumerate(zip(got, want)):
                _close(o, np.asarray(w), f"{label} dims {dims} bucket {bucket}, output {k}\n"
                       f"{bp.describe()}", tol)
    return plans


def _steps(plans):
    return [s for bp in plans for s in bp.steps]


# ---- (1) every case of test_view_inline.py ----------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_view_inline_cases_emulated(name, tmp_path):
    fn, ref_fn, make, axes, _ = CASES[name]
    cases = []
    for dynamic in (False, True):
        if dynamic and axes is None:
            continue
        jitted = lf.jit(fn, dynamic_axes=axes) if dynamic else lf.jit(fn)
        traced = jitted.trace(*make(5))
        ex = Extractor(build_egraph(traced.hlir), traced.hlir)
        for genome in _genomes(ex, 10, 17 + dynamic):
            llir = ex.extract(genome)
            if dynamic:  # below and at the bucket's largest s, and s = 1
                calls = [(make(s), {"s": s}) for s in (1, 5, 9)]
                cases.append((f"{name} genome {genome}", llir, {"s": 9}, calls, ()))
            else:
                cases.append((f"{name} genome {genome}", llir, {}, [(make(5), {})], ()))
    plans = _emulate_all(cases, tmp_path)
    # and the reference function itself, on the generic genome's emulated output
    args = make(5)
    bp, (label, llir, *_rest) = plans[0], cases[0]
    (got,) = emu.run(emu.build([bp], str(tmp_path)), bp, args, {})
    np.testing.assert_allclose(got, ref_fn(*args), rtol=2e-5, atol=2e-5, err_msg=label)


# ---- (2) RoPE's rotate_half, float32 ------------------------------------------------------------
def test_rotate_half_under_a_padded_read_emulated(tmp_path):
    def rope(q, cos, sin):
        x = q.astype(lnp.float32)
        x1, x2 = x[:, :8], x[:, 8:]
        return x * cos + lnp.concatenate([-x2, x1], axis=-1) * sin

    q, cos, sin = _r(3, 16), _r(3, 16), _r(3, 16)
    traced = lf.jit(rope).trace(q, cos, sin)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    cases = [(f"rope genome {g}", ex.extract(g), {}, [([q, cos, sin], {})], ())
             for g in _genomes(ex, 10, 4)]
    plans = _emulate_all(cases, tmp_path, tol=1e-5)
    # the padded halves are read in the kernel (masks rendered), not copied first
    assert any("?" in s.source.text for s in _steps(plans[:1]))
    ref = q * cos + np.concatenate([-q[:, 8:], q[:, :8]], axis=-1) * sin
    (got,) = emu.run(emu.build(plans[:1], str(tmp_path)), plans[0], [q, cos, sin], {})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# ---- (3) a tiny float32 Llama decode step ---------------------------------------------------------
def _llama_step():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step, step_inputs

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=2, hidden_size=64,
                              intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=256)
    w = random_weights(cfg, "float32", as_numpy=True)
    rng = np.random.default_rng(2)
    cache = [{"k": (rng.standard_normal((64, cfg.kv_dim)) * 0.3).astype(np.float32),
              "v": (rng.standard_normal((64, cfg.kv_dim)) * 0.3).astype(np.float32)}
             for _ in range(cfg.num_hidden_layers)]
    step = make_step(cfg)

    def flat(start):
        args = (w, *step_inputs([7], start), cache)
        dyn, _, _, dyn_kw = step._split(args, {})
        leaves, lay = step._layout(dyn, dyn_kw)
        return [np.asarray(x) for x in leaves], lay

    traced = step.trace(w, *step_inputs([7], 39), cache)
    return traced, flat


def test_llama_decode_step_emulated(tmp_path):
    traced, flat = _llama_step()
    g = traced.hlir
    ex = Extractor(build_egraph(g), g)
    llir = ex.extract(ex.generic_genome())
    for n in llir.live_nodes():  # the GEMV kernels and cuBLAS are not emulated: rendered matmuls
        if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
            n.attrs["strategy"] = "rendered"
    (in39, lay), (in20, _) = flat(39), flat(20)
    calls = [(in39, {"s": 1, "c": 40}), (in20, {"s": 1, "c": 21})]
    plans = _emulate_all([("llama decode step", llir, {"s": 1, "c": 48}, calls, lay.donated)],
                         tmp_path, tol=1e-4)
    # (each kernel of a step, merged launches included: "fused + Gather")
    labels = {p for s in _steps(plans) for q in s.label.split(" + ") for p in q.split(" -> ")}
    # (no Iota kernel: the positions are computed inside the trees that read them)
    assert {"Gather", "Scatter (in place)", "matmul", "fused", "fused_reduce"} <= labels, labels
    assert "Iota" not in labels, labels
    assert any(s.source.meta.get("vector") for s in _steps(plans))


# ---- (4) a residual RMS stack -----------------------------------------------------------------------
def test_rms_residual_stack_emulated(tmp_path):
    layers = 4
    x = _r(4, 32)
    ws = [_r(32, 32) * 0.2 for _ in range(layers)]
    traced = lf.jit(_rms_residual_stack).trace(x, ws)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    cases = []
    for genome in [(0,) * len(ex.genes)] + _genomes(ex, 5, 5):
        llir = ex.extract(genome)
        for n in llir.live_nodes():
            if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
                n.attrs["strategy"] = "rendered"
        cases.append((f"rms stack genome {genome}", llir, {}, [([x] + ws, {})], ()))
    plans = _emulate_all(cases, tmp_path, tol=1e-4)
    (got,) = emu.run(emu.build(plans[:1], str(tmp_path)), plans[0], [x] + ws, {})
    np.testing.assert_allclose(got, _rms_residual_stack_ref(x, ws), rtol=1e-4, atol=1e-4)


# ---- every reduction strategy, Scatter copied, int32/bool data ----------------------------------
def _forced(llir, strategy):
    for n in llir.live_nodes():
        if n.op == "CustomOp" and n.attrs.get("name") in ("fused_reduce", "matmul"):
            n.attrs["strategy"] = strategy
    return llir


@pytest.mark.parametrize("strategy", ["thread", "warp", "block", "split"])
def test_every_reduction_strategy_emulated(strategy, tmp_path):
    """softmax over long rows (split makes partials in scratch), an int32 sum, a bool any()."""
    def f(x, k):
        sm = lf.nn.softmax(x, axis=-1)
        return sm, lnp.sum(k * 3, axis=-1), lnp.any(x[:, ::3] > 2.5, axis=-1), lnp.max(x[:, :40], axis=0)

    def make(s):
        return [_r(s, 1100), R.integers(-50, 50, (s, 700)).astype(np.int32)]

    traced = lf.jit(f, dynamic_axes={"x": {0: "s"}, "k": {0: "s"}}).trace(*make(3))
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    llir = ex.extract(ex.generic_genome())
    llir = _forced(llir, strategy)
    calls = [(make(s), {"s": s}) for s in (1, 3)]
    plans = _emulate_all([(f"reductions ({strategy})", llir, {"s": 4}, calls, ())], tmp_path)
    seen = {s.source.meta.get("strategy") for s in _steps(plans)} - {None}
    assert seen == {strategy}, seen
    if strategy == "split":  # partials merged by each row's last warp in the same launch
        assert any(s.source.meta.get("chunks", 1) > 1 and s.source.meta.get("count") is not None
                   for s in _steps(plans))
        assert all(s.source.kind != "red2" for s in _steps(plans) if s.source.meta.get("chunks", 1) > 1
                   and s.source.meta.get("scratch")[0].name != "bool")


@pytest.mark.parametrize("strategy", ["thread", "warp", "block", "split"])
def test_reduction_epilogues_emulated(strategy, tmp_path):
    """An elementwise consumer of a reduction folded into its store (cuda/reduce_epilogue.py):
    a mean scaled by a per-row weight and cast to bfloat16 (rounded once, as the consumer's own
    kernel would), an int32 argmin (the sign flip after its min), a root of a sum of squares."""
    import ml_dtypes

    def f(x, w, k):
        m = (lnp.mean(x, axis=-1) * w + 1.0).astype(lnp.bfloat16)
        return m, lnp.argmin(k, axis=-1), lnp.sqrt(lnp.sum(x * x, axis=-1))

    def make(s):
        return [_r(s, 1100), _r(s), R.integers(-50, 50, (s, 700)).astype(np.int32)]

    traced = lf.jit(f, dynamic_axes={"x": {0: "s"}, "w": {0: "s"}, "k": {0: "s"}}).trace(*make(3))
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    llir = _forced(ex.extract(ex.generic_genome()), strategy)
    calls = [(make(s), {"s": s}) for s in (1, 3)]
    plans = _emulate_all([(f"reduction epilogues ({strategy})", llir, {"s": 4}, calls, ())], tmp_path,
                         tol=1e-5)
    joined = " + ".join(s.label for s in _steps(plans))  # (independent steps may share a launch)
    assert joined.count("fused_reduce + epilogue") == 3 and "fused" not in joined.split(" + "), joined
    x, w, k = make(3)  # the bf16 output against independent NumPy (rounded once from float)
    bp = plans[0]
    lib = emu.build(plans, str(tmp_path / "again"))
    got = emu.run(lib, bp, [x, w, k], {"s": 3})
    want = (x.astype(np.float64).mean(-1) * w + 1.0).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got[0].astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(got[1], np.argmin(k, axis=-1))


def test_split_reductions_take_one_launch_where_the_language_has_counters():
    """CUDA merges a split row's partials in the launch that makes them (a zeroed int32 counter
    per row, left zero again); Metal, without such counters, and bool partials keep a second
    kernel that reduces the partials."""
    from luminal_fn.backends.render import CUDA, METAL, KernelInput
    from luminal_fn.backends.render.reduce import render_reduce
    from luminal_fn.ir import dtypes as dt
    from luminal_fn.ir.view import View

    for d, lang, want in ((dt.float32, CUDA, ["red"]), (dt.int32, CUDA, ["red"]), (dt.float32, METAL, ["red", "red2"]),
                          (dt.bool_, CUDA, ["red", "red2"])):
        inp = KernelInput(View.contiguous((2, 100000)), d)
        ks = render_reduce(lang, (2, 100000), 1, "max", ("in", 0), [inp], d, strategy="split")
        assert [k.kind for k in ks] == want, (d, lang.name)
        assert ("count" in ks[0].buffers) == (want == ["red"])


def test_scatter_copy_and_modes_emulated(tmp_path):
    """Scatter as a copy of dest then the scatter kernel (no donation), set/add/max, with
    repeated and out-of-range indices, into float32 and int32 destinations."""
    def f(x, k, i, v):
        a = x.at[i].add(v)
        b = k.at[i].max(lnp.astype(v * 10, lnp.int32))
        c = x.at[2].set(-1.0)
        return a * 2.0, b, c, lnp.arange(x.shape[0]) * 2 + 1

    x, k = _r(6, 5), R.integers(-9, 9, (6, 5)).astype(np.int32)
    i = np.array([0, 3, 3, 5], np.int32)
    v = _r(4, 5)
    traced = lf.jit(f).trace(x, k, i, v)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    cases = [(f"scatter genome {g}", ex.extract(g), {}, [([x, k, i, v], {})], ())
             for g in _genomes(ex, 4, 9)]
    plans = _emulate_all(cases, tmp_path)
    # (each kernel of a step, merged launches included: "fused + Gather")
    labels = {p for s in _steps(plans) for q in s.label.split(" + ") for p in q.split(" -> ")}
    assert "Scatter" in labels, labels


# ---- a Scatter whose float32 source cast is left to the Scatter (fuse-scatter-cast) ----------
@pytest.mark.parametrize("src_dtype", [np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("mode", ["set", "add", "max"])
def test_scatter_converts_its_source_emulated(src_dtype, mode, tmp_path):
    """dest.at[idx].op(src.astype(float32)): the rule lets the Scatter read src itself and
    convert on store; every genome (cast kept or not) gives the NumPy backend's values, on the
    CPU emulation of the CUDA kernels, the NumPy backend and MLX, and the cast-free form exists."""
    def f(dest, idx, src):
        return getattr(dest.at[idx], mode)(src.astype(np.float32))

    rng = np.random.default_rng(3)
    dest = rng.standard_normal(10).astype(np.float32)
    idx = np.array([1, 3, 3, 9, -1, 12], np.int32)
    src = rng.random(6) > 0.5 if src_dtype is np.bool_ else (rng.standard_normal(6) * 3).astype(src_dtype)
    traced = lf.jit(f).trace(dest, idx, src)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    want = np.asarray(lf.jit(f, backend="numpy")(dest, idx, src))
    llirs = [ex.extract(g) for g in _genomes(ex, 6, 1)]
    direct = [ll for ll in llirs if any(n.op == "Scatter" and ll.nodes[n.inputs[2][0]].op == "Input"
                                        for n in ll.live_nodes())]
    assert direct, "no genome lets the Scatter convert its source itself"
    _emulate_all([(f"scatter {mode} {np.dtype(src_dtype).name}", ll, {}, [([dest, idx, src], {})], ())
                  for ll in llirs], tmp_path)
    # (available_backends() lists registered backends; MLX is usable only where mlx imports)
    backends = ["numpy"] + (["mlx"] if importlib.util.find_spec("mlx") is not None else [])
    for name in backends:
        be = get_backend(name)
        for ll in llirs:
            out = be.compile(ll).run([be.from_numpy(x) for x in (dest, idx, src)], {})[0]
            np.testing.assert_array_equal(np.asarray(be.to_numpy(out)), want, err_msg=name)


# ---- joins: the position test on the vector path ----------------------------------------------------
JOINS = {  # name: (function, NumPy's, vector path expected in the join's kernel[, shapes[, dtype]])
    "rows": (lambda a, b: lnp.concatenate([a, -b]), lambda a, b: np.concatenate([a, -b]), True),
    "columns at a multiple of 4": (lambda a, b: lnp.concatenate([a, b[:, :4]], axis=1),
                                   lambda a, b: np.concatenate([a, b[:, :4]], axis=1), True),
    "three pieces": (lambda a, b: lnp.concatenate([a, b[:2], a]), lambda a, b: np.concatenate([a, b[:2], a]), True),
    "stack": (lambda a, b: lnp.stack([a, b]), lambda a, b: np.stack([a, b]), True),
    # bounds or shifts inside a vector: those pieces are read lane by lane, the store stays a vector
    "roll by 3": (lambda a, b: lnp.roll(a, 3, axis=1), lambda a, b: np.roll(a, 3, axis=1), True),
    "roll by 5": (lambda a, b: lnp.roll(a, 5, axis=-1), lambda a, b: np.roll(a, 5, axis=-1), True, ((4, 64), (1,))),
    "roll by -3": (lambda a, b: lnp.roll(a, -3, axis=1), lambda a, b: np.roll(a, -3, axis=1), True),
    "1-d roll by 5": (lambda a, b: lnp.roll(a, 5), lambda a, b: np.roll(a, 5), True, ((36,), (1,))),
    "columns at 4093": (lambda a, b: lnp.concatenate([a, b], axis=1), lambda a, b: np.concatenate([a, b], axis=1),
                        True, ((2, 4093), (2, 3))),
    "three pieces at odd columns": (lambda a, b: lnp.concatenate([a, b, a[:, :1]], axis=1),
                                    lambda a, b: np.concatenate([a, b, a[:, :1]], axis=1), True, ((3, 5), (3, 6))),
    "stack of shifted slices": (lambda a, b: lnp.stack([a[:, 1:5], b[:, 3:7]], axis=1),
                                lambda a, b: np.stack([a[:, 1:5], b[:, 3:7]], axis=1), True),
    "float16 columns at 5": (lambda a, b: lnp.concatenate([a, b], axis=1), lambda a, b: np.concatenate([a, b], axis=1),
                             True, ((3, 5), (3, 11)), np.float16),
    # pieces cast on the way in (the cast is computed inside the join's kernel): still the join,
    # -0.0 kept (an Add of the cast pieces turned it into +0.0)
    "cast pieces": (lambda a, b: lnp.concatenate([a.astype(lnp.float16), b.astype(lnp.float16)], axis=1),
                    lambda a, b: np.concatenate([a.astype(np.float16), b.astype(np.float16)], axis=1), True,
                    ((3, 8), (3, 8))),
    # rows that are no whole vectors: the scalar path (a vector would run past a row)
    "columns of 5 + 2": (lambda a, b: lnp.concatenate([a, b], axis=1), lambda a, b: np.concatenate([a, b], axis=1),
                         False, ((4, 5), (4, 2))),
    "stack on the last axis": (lambda a, b: lnp.stack([a, b], axis=-1), lambda a, b: np.stack([a, b], axis=-1), False),
}


def _join_case(fn, ref, vector, shapes=((6, 8), (6, 8)), dtype=np.float32):
    return fn, ref, vector, shapes, dtype


@pytest.mark.parametrize("name", sorted(JOINS))
def test_joins_emulated_bit_for_bit(name, tmp_path):
    """A join's kernel (a select on the position, optimize/exact_joins.py) keeps every element,
    -0.0 included, on the vector path where its rows are whole vectors: the position is read at
    each element of the vector, and a piece whose bound or shift falls inside a vector is read
    lane by lane (the scalar path where a row is no whole vector)."""
    fn, ref, vector, shapes, dtype = _join_case(*JOINS[name])
    a, b = _r(*shapes[0]).astype(dtype), _r(*shapes[1]).astype(dtype)
    a.flat[::5], b.flat[1::3] = -0.0, -0.0
    traced = lf.jit(fn).trace(a, b)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    cases = [(f"{name} genome {g}", ex.extract(g), {}, [([a, b], {})], ()) for g in _genomes(ex, 3, 2)]
    plans = _emulate_all(cases, tmp_path)
    want = ref(a, b)
    (got,) = emu.run(emu.build(plans[:1], str(tmp_path)), plans[0], [a, b], {})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    texts = [s.source for s in _steps(plans[:1]) if "?" in s.source.text or "(i + j)" in s.source.text]
    assert texts, plans[0].describe()
    assert any(k.meta.get("vector") for k in texts) == vector, [k.text for k in texts]

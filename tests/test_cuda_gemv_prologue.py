"""The decode step's RMS norm folded into the GEMVs that read its row (backends/cuda/prologue.py):
the one-row rms_norm_rows before q/k/v (three merged GEMVs), before gate/up (the pair with its
silu * up epilogue) and before the LM head (with its widening epilogue) is computed by the GEMV
as it loads x (each block sums the squares first), and its own launch and buffer disappear.

CPU: the plans (the three shapes, the tiny Llama decode step: launch counts and labels), the
cases that must not fold, the module compiling with nvcc where installed; the kernels on the CPU
emulation of CUDA (g++ stand-in, tests/cuda_model_emulation.py) against float64 NumPy and
bit for bit against the unfolded plan, and the tiny float32 Llama step against the NumPy backend.
GPU (marked ``gpu``, skipped without one): the same at the 1B model's sizes in bfloat16.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

EPS = 1e-5
SWITCH = "LUMINAL_CUDA_RMS_PROLOGUE"
WPR_SWITCH = "LUMINAL_CUDA_GEMV_WPR"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")


# ---- the three decode shapes, as examples/llama/model.py writes them ---------------------------
def _linear(h, w):
    if w.dtype == np.float32:
        return lnp.matmul(h, lnp.transpose(w))
    return lnp.astype(lnp.matmul(lnp.astype(h, w.dtype), lnp.transpose(w)), lnp.float32)


def head(x, g, w):
    return _linear(lf.nn.rms_norm(x, g, eps=EPS), w)


def qkv(x, g, wq, wk, wv):
    h = lf.nn.rms_norm(x, g, eps=EPS)
    return [_linear(h, wq), _linear(h, wk), _linear(h, wv)]


def mlp(x, g, wg, wu):
    h = lf.nn.rms_norm(x, g, eps=EPS)
    return lf.nn.silu(_linear(h, wg)) * _linear(h, wu)


SHAPES = {"head": (head, (1,)), "qkv": (qkv, (1, 0.25, 0.25)), "mlp": (mlp, (4, 4))}  # rows per n
LABELS = {"head": {np.float32: "rms_norm_rows + matmul (gemv nk)",
                   "half": "rms_norm_rows + matmul (gemv nk) + epilogue"},
          "qkv": {np.float32: "rms_norm_rows + matmul (gemv nk x3)", "half": "rms_norm_rows + matmul (gemv nk x3)"},
          "mlp": {np.float32: "rms_norm_rows + matmul (gemv nk pair) + epilogue",
                  "half": "rms_norm_rows + matmul (gemv nk pair) + epilogue"}}


def _inputs(name, D, d, seed=0, rows=1, n=64):
    """x (rows, D), the norm's weight, and each GEMV's (rows per n, D) weights."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, D)) * 3).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    ws = [(rng.uniform(-1, 1, (max(8, int(n * f)), D)) / np.sqrt(D)).astype(d) for f in SHAPES[name][1]]
    return (x, g, *ws)


def _want(name, args, d) -> list:
    """float64 results, each stored value (the normalised row, a half-precision product) rounded
    to its dtype as the step stores it."""
    x, g, *ws = args
    x64 = x.astype(np.float64)
    h = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + EPS) * g.astype(np.float64)
    h = h.astype(d).astype(np.float64)
    ys = [(h @ w.astype(np.float64).T).astype(d).astype(np.float64) for w in ws]
    if name == "mlp":
        gate, up = ys
        return [gate / (1 + np.exp(-gate)) * up]
    return ys


def _extract(fn, args, kinds=KERNEL_KINDS, dynamic_axes=None):
    jitted = lf.jit(fn, dynamic_axes=dynamic_axes) if dynamic_axes else lf.jit(fn)
    g = jitted.trace(*args).hlir
    return Extractor(build_egraph(g), g, kernel_kinds=kinds).extract(None)


@contextlib.contextmanager
def _switches(fold, one_warp=False):
    """The fold on or off through its environment switch; ``one_warp``: every Linear GEMV one warp
    a row, as the folded ones run, so an unfolded plan adds each dot product in the same order."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SWITCH, "1" if fold else "0")
        if one_warp:
            env.setenv(WPR_SWITCH, "1")
        else:
            env.delenv(WPR_SWITCH, raising=False)
        yield


def _plan(ll, dims, fold=True, donated=(), one_warp=False):
    """The CUDA plan of ``ll`` with the fold on, or off (see _switches)."""
    with _switches(fold, one_warp):
        return plan_graph(ll, dims, donated=donated)


def _labels(bp):
    return [s.label for s in bp.steps]


def _norm_outputs(bp) -> list:
    return [s.bufs[-1] for s in bp.steps if s.label == "rms_norm_rows"]


# ---- plans -------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_decode_shape_reads_the_norm_in_its_gemv(name, d):
    args = _inputs(name, 64, d)
    ll = _extract(SHAPES[name][0], args)
    before, after = _plan(ll, {}, fold=False), _plan(ll, {})
    assert _labels(before).count("rms_norm_rows") == 1, _labels(before)
    assert len(after.steps) == len(before.steps) - 1
    assert "rms_norm_rows" not in _labels(after)
    assert _labels(after)[0] == LABELS[name][np.float32 if d is np.float32 else "half"]
    (row,) = _norm_outputs(before)
    assert after.bufs[row].first < 0  # the normalised row's buffer is gone
    step = after.steps[0]
    T = "float" if d is np.float32 else "__nv_bfloat16"
    # one row of 64: the norm kernel's 32 threads, inside the GEMV's block of 256
    text = step.source.text
    assert f"__shared__ __align__(16) {T} lf_xs[64];" in text
    assert f"LfRmsRow<float, float, {T}, 32, float, 64> lf_rx{{rx + (0), rw + (0), lf_xs, " in text
    assert text.count("lf_rx,") == {"qkv": 3, "head": 1, "mlp": 1}[name]  # each GEMV call reads it
    assert step.source.meta["waits_inside"]  # x is read after the GEMV's own wait
    assert step.source.buffers[:2] == ["rms_x", "rms_w"]
    assert step.bufs[:2] == before.steps[0].bufs[:2]  # the norm's own x and weight


def _tiny_llama(layers, weights="bfloat16", cache_rows=64):
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step, step_inputs

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=layers, hidden_size=64,
                              intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=256)
    w = random_weights(cfg, weights, as_numpy=True)
    rng = np.random.default_rng(2)
    cache = [{"k": (rng.standard_normal((cache_rows, cfg.kv_dim)) * 0.3).astype(np.float32),
              "v": (rng.standard_normal((cache_rows, cfg.kv_dim)) * 0.3).astype(np.float32)}
             for _ in range(layers)]
    step = make_step(cfg)

    def flat(start, tokens=(7,)):
        args = (w, *step_inputs(list(tokens), start), cache)
        dyn, _, _, dyn_kw = step._split(args, {})
        leaves, lay = step._layout(dyn, dyn_kw)
        return [np.asarray(x) for x in leaves], lay

    return step.trace(w, *step_inputs([7], 39), cache), flat


def test_the_tiny_llama_decode_step_loses_every_norm_launch():
    layers = 3
    traced, flat = _tiny_llama(layers)
    g = traced.hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    donated = flat(39)[1].donated
    before = _plan(ll, {"s": 1, "c": 64}, fold=False, donated=donated)
    after = _plan(ll, {"s": 1, "c": 64}, donated=donated)
    norms = 2 * layers + 1
    assert _labels(before).count("rms_norm_rows") == norms
    assert "rms_norm_rows" not in _labels(after)
    assert len(after.steps) == len(before.steps) - norms
    labels = _labels(after)
    # q, k, v (with RoPE and the cache stores after layer 0: cuda/gemv_stores.py)
    assert sum(lb.startswith("rms_norm_rows + matmul (gemv nk x3)") for lb in labels) == layers
    assert labels.count("rms_norm_rows + matmul (gemv nk pair) + epilogue") == layers  # gate, up
    assert labels.count("rms_norm_rows + matmul (gemv nk) + epilogue") == 1  # the LM head
    assert all(after.bufs[b].first < 0 for b in _norm_outputs(before))


def test_no_fold_when_the_row_is_read_by_something_else():
    D = 64
    x, g, w = _inputs("head", D, np.float32)

    def also_returned(x, g, w):
        h = lf.nn.rms_norm(x, g, eps=EPS)
        return _linear(h, w), h

    def also_summed(x, g, w):
        h = lf.nn.rms_norm(x, g, eps=EPS)
        return _linear(h, w) + lnp.sum(h)

    def half_the_row(x, g, w):  # the GEMV reads only the first 32 values: K != D
        return _linear(lf.nn.rms_norm(x, g, eps=EPS)[:, :32], w)

    for fn, args in ((also_returned, (x, g, w)), (also_summed, (x, g, w)), (half_the_row, (x, g, w[:, :32].copy()))):
        bp = _plan(_extract(fn, args), {})
        assert "rms_norm_rows" in _labels(bp), (fn.__name__, _labels(bp))
        assert not any(lab.startswith("rms_norm_rows +") for lab in _labels(bp)), (fn.__name__, _labels(bp))


def test_no_fold_over_several_rows():
    x, g, w = _inputs("head", 64, np.float32, rows=3)  # three rows: no GEMV, no fold
    assert _labels(_plan(_extract(head, (x, g, w)), {})).count("rms_norm_rows") == 1
    # a symbolic row count whose bucket reaches 4 (prefill) keeps its norm kernel too
    ll = _extract(head, _inputs("head", 64, np.float32, rows=2), dynamic_axes={"x": {0: "s"}})
    assert _labels(_plan(ll, {"s": 4})).count("rms_norm_rows") == 1
    # and the same graph in its one-row bucket folds (the launch skipped when s is 0)
    bp = _plan(ll, {"s": 1})
    assert "rms_norm_rows" not in _labels(bp)
    assert "if ((d_s) == 0) { lf_pdl_wait(); return; }" in bp.steps[0].source.text


def test_the_fold_switch_turns_it_off_and_rejects_a_bad_value(monkeypatch):
    ll = _extract(head, _inputs("head", 64, np.float32))
    assert _labels(_plan(ll, {}, fold=False)) == ["rms_norm_rows", "matmul (gemv nk)"]
    monkeypatch.setenv(SWITCH, "rows")
    with pytest.raises(ValueError, match="LUMINAL_CUDA_RMS_PROLOGUE='rows': expected 1 .fold"):
        plan_graph(ll, {})


def test_no_fold_when_the_weight_is_computed_in_the_step():
    """The folded GEMV loads the norm's weight before it waits for the kernel before: a weight
    that a kernel of the step computes (here 1 + g, Gemma's form) keeps the norm's own launch."""
    x, g, w = _inputs("head", 64, np.float32)

    def shifted_weight(x, g, w):
        return _linear(lf.nn.rms_norm(x, 1.0 + g, eps=EPS), w)

    bp = _plan(_extract(shifted_weight, (x, g, w)), {})
    labels = _labels(bp)
    assert "rms_norm_rows" in labels and not any(lab.startswith("rms_norm_rows +") for lab in labels), labels
    norm = next(s for s in bp.steps if s.label == "rms_norm_rows")
    assert bp.bufs[norm.bufs[1]].kind == "arena"  # (the weight as a kernel stored it)


def test_no_fold_when_x_or_w_are_not_whole_vectors():
    """The GEMV reads the norm's x and weight in 16-byte vectors: a weight read with a stride, or
    x from an offset that is no whole vector, keeps the norm kernel."""
    x, g, w = _inputs("head", 64, np.float32)

    def strided_weight(x, g2, w):  # the norm's weight is every other value of g2
        return _linear(lf.nn.rms_norm(x, g2[::2], eps=EPS), w)

    def shifted_row(x, g, w):  # the row starts 2 floats into x: not 16-byte aligned
        return _linear(lf.nn.rms_norm(x[:, 2:66], g, eps=EPS), w)

    g2 = np.repeat(g, 2)
    x2 = np.concatenate([x, x[:, :2]], axis=1)
    for fn, args in ((strided_weight, (x, g2, w)), (shifted_row, (x2, g, w))):
        labels = _labels(_plan(_extract(fn, args), {}))
        assert "rms_norm_rows" in labels and not any(lab.startswith("rms_norm_rows +") for lab in labels), (fn.__name__, labels)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
def test_folded_modules_compile_with_nvcc():
    kernels = []
    for name in sorted(SHAPES):
        for d in (np.float32, np.float16, ml_dtypes.bfloat16):
            kernels += _plan(_extract(SHAPES[name][0], _inputs(name, 2048, d)), {}).kernels()
    nvcc_check(module_source(kernels))


# ---- the CPU emulation of CUDA -----------------------------------------------------------------
def _library(plans, workdir):
    """The stand-in for CUDA, kernels/rms_norm.cu and gemv.cu, and every kernel of ``plans``."""
    import cuda_model_emulation as emu

    return emu.build_with_hand(plans, ("rms_norm.cu", "gemv.cu"), workdir)


EMULATED = [("head", 64, np.float32), ("qkv", 64, np.float16), ("mlp", 64, np.float32),
            ("qkv", 512, np.float32), ("mlp", 512, np.float16), ("head", 2048, np.float16)]


# each case with the default early loads and with all of them; the pairs also with 3 blocks
EMULATED_EARLY = ([(*case, early) for case in EMULATED for early in ("default", "3")]
                  + [(*case, "3-loop") for case in EMULATED if case[0] == "mlp"])


@needs_gxx
@pytest.mark.parametrize("name,D,d,early", EMULATED_EARLY,
                         ids=[f"{n}-{D}-{d.__name__}-early-{e}" for n, D, d, e in EMULATED_EARLY])
def test_folded_kernels_on_the_cpu_emulation(tmp_path, monkeypatch, name, D, d, early):
    """Against float64 NumPy, and bit for bit against the plan that launches the norm kernel
    (D = 64, 512, 2048: the norm kernel's 32, 64 and 256 threads inside the GEMV's 256); with
    the first rows' weights loaded before the row is computed as by default (pairs), and in
    every folded kernel (LUMINAL_CUDA_GEMV_EARLY=3); "loop": a pair of at most 3 blocks, which
    then loop over the rows after their first (LUMINAL_CUDA_GEMV_PAIR_BLOCKS)."""
    import cuda_model_emulation as emu

    if early != "default":
        monkeypatch.setenv("LUMINAL_CUDA_GEMV_EARLY", early.split("-")[0])
    if early.endswith("loop"):
        monkeypatch.setenv("LUMINAL_CUDA_GEMV_PAIR_BLOCKS", "3")

    args = _inputs(name, D, d, seed=D)
    ll = _extract(SHAPES[name][0], args)
    before, after = _plan(ll, {}, fold=False, one_warp=True), _plan(ll, {})
    assert "rms_norm_rows" in _labels(before) and "rms_norm_rows" not in _labels(after)
    if early.endswith("loop"):  # 4 * 64 rows, 8 a block: 32 row groups in 3 blocks
        assert [s.source.meta["grid3"] for s in after.steps if "pair" in s.label] == [(3, 1, 1)]
    lib = _library([before, after], str(tmp_path))
    got = emu.run(lib, after, list(args), {})
    ref = emu.run(lib, before, list(args), {})
    want = _want(name, args, d)
    assert len(got) == len(ref) == len(want)
    tol = 4e-3 if d is np.float16 else 2e-5
    for a, b, w in zip(got, ref, want):
        np.testing.assert_array_equal(a, b)  # the normalised row rounded as the norm stores it, the same sums
        np.testing.assert_allclose(a.astype(np.float64), w, rtol=tol, atol=tol)


@needs_gxx
def test_tiny_llama_decode_step_on_the_cpu_emulation(tmp_path):
    """The float32 tiny Llama step, planned for CUDA with its norms folded into the GEMVs (the
    norm kernel and the GEMVs chosen, the rest generic), computes the NumPy backend's generic
    step, and exactly what the unfolded plan computes, at three cache lengths."""
    traced, flat = _tiny_llama(2, "float32", cache_rows=48)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=frozenset({"rms_norm_rows"}))
    ll = ex.extract(None)
    donated = flat(39)[1].donated
    before = _plan(ll, {"s": 1, "c": 48}, fold=False, donated=donated)
    after = _plan(ll, {"s": 1, "c": 48}, donated=donated)
    assert _labels(before).count("rms_norm_rows") == 5 and "rms_norm_rows" not in _labels(after)
    emulated_steps_agree(_library([before, after], str(tmp_path)), before, after, ex, flat, 1e-4)


def emulated_steps_agree(lib, before, after, ex, flat, tol):
    """The tiny two-layer Llama step of ``flat`` at cache lengths 1, 21 and 48, emulated: plan
    ``after`` bit for bit as plan ``before``, and within ``tol`` of the NumPy backend's generic
    genome of ``ex`` (the logits and both layers' caches)."""
    import cuda_model_emulation as emu

    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    for c in (1, 21, 48):
        args, _ = flat(c - 1)
        dims = {"s": 1, "c": c}
        want = want_plan.run([a.copy() for a in args], dims)
        got = emu.run(lib, after, [a.copy() for a in args], dims)
        ref = emu.run(lib, before, [a.copy() for a in args], dims)
        assert len(got) == len(want) == 5  # logits and two layers' caches
        for k, (a, b, w) in enumerate(zip(got, ref, want)):
            np.testing.assert_array_equal(a, b, err_msg=f"c={c} output {k}")
            np.testing.assert_allclose(a, np.asarray(w), rtol=tol, atol=tol, err_msg=f"c={c} output {k}")


# ---- on the GPU ----------------------------------------------------------------------------------
def _run_on_gpu(ll, args, dims, fold, one_warp=False):
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    with _switches(fold, one_warp):  # (the bucket is planned at the first run)
        exe = be.compile(ll)
        outs = exe.run([be.from_numpy(a) for a in args], dims)
        first = [np.asarray(be.to_numpy(o)).copy() for o in outs]
        again = [np.asarray(be.to_numpy(o)) for o in exe.run([be.from_numpy(a) for a in args], dims)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)  # replayed: the same values
    return first


GPU_SHAPES = [(n, 2048, dname) for n in sorted(SHAPES) for dname in ("float32", "bfloat16")]


@pytest.mark.gpu
@pytest.mark.parametrize("name,D,dname", GPU_SHAPES)
def test_folded_kernels_on_the_gpu(name, D, dname):
    """Llama-3.2-1B's sizes (D = 2048; q 2048, k and v 512, gate and up 8192, a 2048-row head):
    the folded plan against float64 and bit for bit against the unfolded one."""
    d = np.float32 if dname == "float32" else ml_dtypes.bfloat16
    args = _inputs(name, D, d, seed=5, n=D)
    ll = _extract(SHAPES[name][0], args)
    assert "rms_norm_rows" not in _labels(_plan(ll, {}))
    got = _run_on_gpu(ll, args, {}, fold=True)
    ref = _run_on_gpu(ll, args, {}, fold=False, one_warp=True)
    tol = 2e-2 if dname == "bfloat16" else 1e-4
    for a, b, w in zip(got, ref, _want(name, args, d)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a.astype(np.float64), w, rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("weights", ["float32", "bfloat16"])
def test_tiny_llama_decode_step_on_the_gpu(weights):
    """The tiny Llama step on the CUDA backend, all kernel kinds offered: folded and unfolded plans
    agree bit for bit, and with the NumPy backend's generic step."""
    traced, flat = _tiny_llama(2, weights, cache_rows=64)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS)
    ll = ex.extract(None)
    assert "rms_norm_rows" not in _labels(_plan(ll, {"s": 1, "c": 64}, donated=flat(39)[1].donated))
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    tol = 1e-4 if weights == "float32" else 3e-2
    for c in (1, 23, 64):
        args, _ = flat(c - 1)
        dims = {"s": 1, "c": c}
        want = want_plan.run([a.copy() for a in args], dims)
        got = _run_on_gpu(ll, [a.copy() for a in args], dims, fold=True)
        ref = _run_on_gpu(ll, [a.copy() for a in args], dims, fold=False)
        for k, (a, b, w) in enumerate(zip(got, ref, want)):
            np.testing.assert_array_equal(a, b, err_msg=f"c={c} output {k}")
            np.testing.assert_allclose(a.astype(np.float64), np.asarray(w).astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=f"c={c} output {k}")

"""The decode step's RMS norm folded into the GEMVs that read its row (backends/cuda/prologue.py):
the one-row rms_norm_rows before q/k/v (three merged GEMVs), before gate/up (the pair with its
silu * up epilogue) and before the LM head (with its widening epilogue) is computed by the GEMV
itself, and its own launch and buffer disappear. Two modes: ``row`` (each GEMV block stores the
normalised row in shared memory: the same bits as the unfolded plan) and ``scale`` (the GEMV
reads x and the norm's weight, and scales each sum by the norm's 1/rms as it stores it).

CPU: the plans (the three shapes, the tiny Llama decode step: launch counts and labels), the
cases that must not fold, the module compiling with nvcc where installed; the kernels on the CPU
emulation of CUDA (g++ stand-in, tests/cuda_model_emulation.py) against float64 NumPy (``row``
also bit for bit against the unfolded plan), and the tiny float32 Llama step against the NumPy
backend. GPU (marked ``gpu``, skipped without one): the same at the 1B model's sizes in bfloat16.
"""
from __future__ import annotations

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
from luminal_fn.ir.expr import add, mul, var
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

EPS = 1e-5
SWITCH = "LUMINAL_CUDA_RMS_PROLOGUE"
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


MODES = ["row", "scale"]


def _want(name, args, d, mode="row") -> list:
    """float64 results, each stored value (the normalised row unless ``scale`` folds it, a
    half-precision product) rounded to its dtype as the step stores it."""
    x, g, *ws = args
    x64 = x.astype(np.float64)
    h = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + EPS) * g.astype(np.float64)
    if mode == "row":
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


def _switch_value(fold) -> str:
    return "0" if not fold else ("row" if fold is True else fold)


def _plan(ll, dims, fold=True, donated=()):
    """The CUDA plan of ``ll`` with the fold on (True: ``row``, or the mode named), or off,
    through its environment switch."""
    old = os.environ.get(SWITCH)
    os.environ[SWITCH] = _switch_value(fold)
    try:
        return plan_graph(ll, dims, donated=donated)
    finally:
        if old is None:
            del os.environ[SWITCH]
        else:
            os.environ[SWITCH] = old


def _labels(bp):
    return [s.label for s in bp.steps]


def _norm_outputs(bp) -> list:
    return [s.bufs[-1] for s in bp.steps if s.label == "rms_norm_rows"]


# ---- plans -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("d", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_decode_shape_reads_the_norm_in_its_gemv(name, d, mode):
    args = _inputs(name, 64, d)
    ll = _extract(SHAPES[name][0], args)
    before, after = _plan(ll, {}, fold=False), _plan(ll, {}, fold=mode)
    assert _labels(before).count("rms_norm_rows") == 1, _labels(before)
    assert len(after.steps) == len(before.steps) - 1
    assert "rms_norm_rows" not in _labels(after)
    assert _labels(after)[0] == LABELS[name][np.float32 if d is np.float32 else "half"]
    (row,) = _norm_outputs(before)
    assert after.bufs[row].first < 0  # the normalised row's buffer is gone
    step = after.steps[0]
    T = "float" if d is np.float32 else "__nv_bfloat16"
    text = step.source.text
    if mode == "row":
        # one row of 64: the norm kernel's 32 threads, inside the GEMV's block of 256
        assert f"lf_rms_row_to<float, float, {T}, 32, 256, float>" in text
        assert f"__shared__ __align__(16) {T} lf_xs[64];" in text
        assert not step.source.meta["waits_inside"]  # (it reads x before the GEMV's wait)
    else:
        assert "const LfRmsX<float, float> lf_rx{rx + (0), rw + (0), " in text
        assert "lf_rms_row_to" not in text and "lf_xs" not in text
        assert step.source.meta["waits_inside"]  # x is read after the GEMV's own wait
        assert text.count("lf_rx,") == {"qkv": 3, "head": 1, "mlp": 1}[name]  # each GEMV call reads it
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


@pytest.mark.parametrize("mode", MODES)
def test_the_tiny_llama_decode_step_loses_every_norm_launch(mode):
    layers = 3
    traced, flat = _tiny_llama(layers)
    g = traced.hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    donated = flat(39)[1].donated
    before = _plan(ll, {"s": 1, "c": 64}, fold=False, donated=donated)
    after = _plan(ll, {"s": 1, "c": 64}, fold=mode, donated=donated)
    norms = 2 * layers + 1
    assert _labels(before).count("rms_norm_rows") == norms
    assert "rms_norm_rows" not in _labels(after)
    assert len(after.steps) == len(before.steps) - norms
    labels = _labels(after)
    assert labels.count("rms_norm_rows + matmul (gemv nk x3)") == layers  # q, k, v
    assert labels.count("rms_norm_rows + matmul (gemv nk pair) + epilogue") == layers  # gate, up
    assert labels.count("rms_norm_rows + matmul (gemv nk) + epilogue") == 1  # the LM head
    assert all(after.bufs[b].first < 0 for b in _norm_outputs(before))


@pytest.mark.parametrize("mode", MODES)
def test_no_fold_when_the_row_is_read_by_something_else(mode):
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
        bp = _plan(_extract(fn, args), {}, fold=mode)
        assert "rms_norm_rows" in _labels(bp), (fn.__name__, _labels(bp))
        assert not any(lab.startswith("rms_norm_rows +") for lab in _labels(bp)), (fn.__name__, _labels(bp))


@pytest.mark.parametrize("mode", MODES)
def test_no_fold_over_several_rows(mode):
    x, g, w = _inputs("head", 64, np.float32, rows=3)  # three rows: no GEMV, no fold
    assert _labels(_plan(_extract(head, (x, g, w)), {}, fold=mode)).count("rms_norm_rows") == 1
    # a symbolic row count whose bucket reaches 4 (prefill) keeps its norm kernel too
    ll = _extract(head, _inputs("head", 64, np.float32, rows=2), dynamic_axes={"x": {0: "s"}})
    assert _labels(_plan(ll, {"s": 4}, fold=mode)).count("rms_norm_rows") == 1
    # and the same graph in its one-row bucket folds (the launch skipped when s is 0)
    bp = _plan(ll, {"s": 1}, fold=mode)
    assert "rms_norm_rows" not in _labels(bp)
    assert "if ((d_s) == 0) { lf_pdl_wait(); return; }" in bp.steps[0].source.text


def test_the_fold_switch_turns_it_off_and_rejects_a_bad_value():
    ll = _extract(head, _inputs("head", 64, np.float32))
    assert _labels(_plan(ll, {}, fold=False)) == ["rms_norm_rows", "matmul (gemv nk)"]
    with pytest.raises(ValueError, match="LUMINAL_CUDA_RMS_PROLOGUE='rows': expected 0"):
        _plan(ll, {}, fold="rows")


def test_scale_needs_a_norm_that_rounds_nothing_before_its_weight():
    """A norm that rounds x * r to its input's dtype before the weight multiply (HF's bf16
    hidden states) is not a scale of W @ (x * w): ``scale`` leaves it as its own launch."""
    from luminal_fn.backends.cuda.prologue import _scalable
    from luminal_fn.backends.cuda.rowkernels import RmsRowsCall

    call = RmsRowsCall("float", "float", "float", 32, 0, 64, 1, 64, 0, 1, "1.5625e-2f", "1e-5f")
    assert _scalable(call, 4)
    assert not _scalable(dataclasses.replace(call, TR="__nv_bfloat16"), 4)
    assert not _scalable(dataclasses.replace(call, w_stride=2), 4)
    assert not _scalable(dataclasses.replace(call, x_offset=6), 4)  # (a misaligned vector)
    last_row = add(mul(64, var("s")), -64)  # the prompt's last row, before the LM head
    assert _scalable(dataclasses.replace(call, x_offset=last_row), 4)
    assert not _scalable(dataclasses.replace(call, x_offset=add(last_row, 2)), 4)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
@pytest.mark.parametrize("mode", MODES)
def test_folded_modules_compile_with_nvcc(mode):
    kernels = []
    for name in sorted(SHAPES):
        for d in (np.float32, np.float16, ml_dtypes.bfloat16):
            kernels += _plan(_extract(SHAPES[name][0], _inputs(name, 2048, d)), {}, fold=mode).kernels()
    nvcc_check(module_source(kernels))


# ---- the CPU emulation of CUDA -----------------------------------------------------------------
def _library(plans, workdir):
    """The stand-in for CUDA, kernels/rms_norm.cu and gemv.cu, and every kernel of ``plans``."""
    import cuda_model_emulation as emu

    return emu.build_with_hand(plans, ("rms_norm.cu", "gemv.cu"), workdir)


EMULATED = [("head", 64, np.float32), ("qkv", 64, np.float16), ("mlp", 64, np.float32),
            ("qkv", 512, np.float32), ("mlp", 512, np.float16), ("head", 2048, np.float16)]


@needs_gxx
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,D,d", EMULATED, ids=[f"{n}-{D}-{d.__name__}" for n, D, d in EMULATED])
def test_folded_kernels_on_the_cpu_emulation(tmp_path, name, D, d, mode):
    """Against float64 NumPy; ``row`` also bit for bit against the plan that launches the norm
    kernel (D = 64, 512, 2048: the norm kernel's 32, 64 and 256 threads inside the GEMV's 256),
    ``scale`` within the half-precision row's rounding of it."""
    import cuda_model_emulation as emu

    args = _inputs(name, D, d, seed=D)
    ll = _extract(SHAPES[name][0], args)
    before, after = _plan(ll, {}, fold=False), _plan(ll, {}, fold=mode)
    assert "rms_norm_rows" in _labels(before) and "rms_norm_rows" not in _labels(after)
    lib = _library([before, after], str(tmp_path))
    got = emu.run(lib, after, list(args), {})
    ref = emu.run(lib, before, list(args), {})
    want = _want(name, args, d, mode)
    assert len(got) == len(ref) == len(want)
    tol = 4e-3 if d is np.float16 else 2e-5
    for a, b, w in zip(got, ref, want):
        if mode == "row":
            np.testing.assert_array_equal(a, b)  # the normalised row rounded as the norm stores it
        else:
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=3 * tol, atol=3 * tol)
        np.testing.assert_allclose(a.astype(np.float64), w, rtol=tol, atol=tol)


@needs_gxx
@pytest.mark.parametrize("mode", MODES)
def test_tiny_llama_decode_step_on_the_cpu_emulation(tmp_path, mode):
    """The float32 tiny Llama step, planned for CUDA with its norms folded into the GEMVs (the
    norm kernel and the GEMVs chosen, the rest generic), computes the NumPy backend's generic
    step (``row``: exactly what the unfolded plan computes) at three cache lengths."""
    import cuda_model_emulation as emu

    traced, flat = _tiny_llama(2, "float32", cache_rows=48)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=frozenset({"rms_norm_rows"}))
    ll = ex.extract(None)
    donated = flat(39)[1].donated
    before = _plan(ll, {"s": 1, "c": 48}, fold=False, donated=donated)
    after = _plan(ll, {"s": 1, "c": 48}, fold=mode, donated=donated)
    assert _labels(before).count("rms_norm_rows") == 5 and "rms_norm_rows" not in _labels(after)
    lib = _library([before, after], str(tmp_path))
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    for c in (1, 21, 48):
        args, _ = flat(c - 1)
        dims = {"s": 1, "c": c}
        want = want_plan.run([a.copy() for a in args], dims)
        got = emu.run(lib, after, [a.copy() for a in args], dims)
        ref = emu.run(lib, before, [a.copy() for a in args], dims)
        assert len(got) == len(want) == 5  # logits and two layers' caches
        for k, (a, b, w) in enumerate(zip(got, ref, want)):
            if mode == "row":
                np.testing.assert_array_equal(a, b, err_msg=f"c={c} output {k}")
            np.testing.assert_allclose(a, np.asarray(w), rtol=1e-4, atol=1e-4, err_msg=f"c={c} output {k}")


# ---- on the GPU ----------------------------------------------------------------------------------
def _run_on_gpu(ll, args, dims, fold):
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    old = os.environ.get(SWITCH)
    os.environ[SWITCH] = _switch_value(fold)
    try:  # (the bucket is planned at the first run)
        exe = be.compile(ll)
        outs = exe.run([be.from_numpy(a) for a in args], dims)
        first = [np.asarray(be.to_numpy(o)).copy() for o in outs]
        again = [np.asarray(be.to_numpy(o)) for o in exe.run([be.from_numpy(a) for a in args], dims)]
    finally:
        if old is None:
            del os.environ[SWITCH]
        else:
            os.environ[SWITCH] = old
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)  # replayed: the same values
    return first


GPU_SHAPES = [(n, 2048, dname) for n in sorted(SHAPES) for dname in ("float32", "bfloat16")]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,D,dname", GPU_SHAPES)
def test_folded_kernels_on_the_gpu(name, D, dname, mode):
    """Llama-3.2-1B's sizes (D = 2048; q 2048, k and v 512, gate and up 8192, a 2048-row head):
    the folded plan against float64 (``row``: bit for bit against the unfolded one)."""
    d = np.float32 if dname == "float32" else ml_dtypes.bfloat16
    args = _inputs(name, D, d, seed=5, n=D)
    ll = _extract(SHAPES[name][0], args)
    assert "rms_norm_rows" not in _labels(_plan(ll, {}, fold=mode))
    got = _run_on_gpu(ll, args, {}, fold=mode)
    ref = _run_on_gpu(ll, args, {}, fold=False)
    tol = 2e-2 if dname == "bfloat16" else 1e-4
    for a, b, w in zip(got, ref, _want(name, args, d, mode)):
        if mode == "row":
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a.astype(np.float64), w, rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("weights", ["float32", "bfloat16"])
def test_tiny_llama_decode_step_on_the_gpu(weights, mode):
    """The tiny Llama step on the CUDA backend, all kernel kinds offered: the folded plan agrees
    with the NumPy backend's generic step (``row``: bit for bit with the unfolded plan)."""
    traced, flat = _tiny_llama(2, weights, cache_rows=64)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS)
    ll = ex.extract(None)
    assert "rms_norm_rows" not in _labels(_plan(ll, {"s": 1, "c": 64}, fold=mode, donated=flat(39)[1].donated))
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    tol = 1e-4 if weights == "float32" else 3e-2
    for c in (1, 23, 64):
        args, _ = flat(c - 1)
        dims = {"s": 1, "c": c}
        want = want_plan.run([a.copy() for a in args], dims)
        got = _run_on_gpu(ll, [a.copy() for a in args], dims, fold=mode)
        ref = _run_on_gpu(ll, [a.copy() for a in args], dims, fold=False)
        for k, (a, b, w) in enumerate(zip(got, ref, want)):
            if mode == "row":
                np.testing.assert_array_equal(a, b, err_msg=f"c={c} output {k}")
            np.testing.assert_allclose(a.astype(np.float64), np.asarray(w).astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=f"c={c} output {k}")

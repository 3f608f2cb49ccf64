"""The greedy pick folded into the LM head's GEMV launch (backends/cuda/gemv_argmax.py,
kernels/argmax.cu's lf_am_fold_block and lf_am_key_index): plans, the kernel on the CPU emulation of CUDA against
np.argmax on every hard case (ties, NaNs, infinities, a row of -inf) and against the plan that
launches argmax_rows on its own (the fold off), the tiny Llama greedy step, and the same on the
GPU where there is one (replayed: the key is back at zero for the next launch).
"""
from __future__ import annotations

import os
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.gemv_argmax import SWITCH

import cuda_cases as C

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

FOLDED = "rms_norm_rows + matmul (gemv nk) + epilogue + argmax"
KEY = "argmax_rows (the GEMV's key)"


def head_pick(h, g, w):
    """The end of a greedy decode step: RMS norm, the LM head in w's dtype widened to float32,
    the last row's argmax (as examples/llama/model.py's greedy_token writes it)."""
    x = h * lnp.reciprocal(lnp.sqrt(lnp.mean(h * h, axis=-1, keepdims=True) + 1e-5)) * g
    logits = lnp.astype(lnp.matmul(lnp.astype(x, w.dtype), lnp.transpose(w)), lnp.float32)
    return lnp.argmax(logits[-1]).astype(lnp.int32).reshape(1)


def _inputs(n, k, d, case, seed=0):
    """h (1, k) > 0 and W (n, k) whose products make ``case`` hard; the index np.argmax gives."""
    rng = np.random.default_rng(seed)
    h = rng.uniform(0.5, 1.5, (1, k)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, k).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    want = None
    if case == "ties":  # three equal rows hold the maximum: the first of them
        w[[n // 3, n // 2, n - 1]] = np.abs(w).max() + 1.0
        want = n // 3
    elif case == "nan":  # a NaN row anywhere wins over the maximum; the first NaN
        w[n - 2] = 50.0
        w[[n // 2, n // 5], 3] = np.nan
        want = n // 5
    elif case == "inf":
        w[[n // 4, n - 1], 1] = np.inf
        want = n // 4
    elif case == "all_ninf":
        w[:, 0] = -np.inf
        want = 0
    return h, g, w.astype(d), want


def _plan(ll, fold=True):
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SWITCH, "1" if fold else "0")
        return plan_graph(ll, {})


def _labels(bp):
    return [s.label for s in bp.steps]


def test_the_pick_joins_the_lm_head_launch():
    ll = C.cheapest_llir(head_pick, _inputs(300, 64, ml_dtypes.bfloat16, "random")[:3])
    before, after = _plan(ll, fold=False), _plan(ll)
    assert _labels(before)[-2:] == ["rms_norm_rows + matmul (gemv nk) + epilogue", "argmax_rows"]
    assert _labels(after)[-2:] == [FOLDED, KEY] and "argmax_rows" not in _labels(after)
    assert len(after.steps) == len(before.steps)
    text = after.steps[-2].source.text
    assert "lf_am_fold_block<256>" in text and "lf_am_take(lf_ld(lf_am_s), n, lf_am_v, lf_am_i);" in text


def test_the_tiny_llama_greedy_step_ends_in_one_launch():
    import dataclasses

    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step, new_cache, step_inputs

    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=1, hidden_size=64,
                              intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=256)
    args = (random_weights(cfg, "bfloat16"), *step_inputs([5], 9), new_cache(cfg, 16))
    g = make_step(cfg, output="greedy").trace(*args).hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SWITCH, "1")
        labels = _labels(plan_graph(ll, {"s": 1, "c": 16}))
    assert labels[-2:] == [FOLDED, KEY] and "argmax_rows" not in labels, labels


def test_no_fold_when_the_logits_are_returned_too():
    def both(h, g, w):
        logits = lnp.astype(lnp.matmul(lnp.astype(h * g, w.dtype), lnp.transpose(w)), lnp.float32)
        return logits, lnp.argmax(logits[-1]).astype(lnp.int32).reshape(1)

    ll = C.cheapest_llir(both, _inputs(300, 64, ml_dtypes.bfloat16, "random")[:3])
    labels = _labels(_plan(ll))
    assert "argmax_rows" in labels and not any(lb.endswith("+ argmax") for lb in labels)


def test_the_switch_is_checked(monkeypatch):
    from luminal_fn.backends.cuda.gemv_argmax import enabled

    monkeypatch.setenv(SWITCH, "maybe")
    with pytest.raises(ValueError, match=SWITCH):
        enabled()


CASES = ("random", "ties", "nan", "inf", "all_ninf")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
@pytest.mark.parametrize("n,k,dname", [(300, 64, "bfloat16"), (5000, 128, "bfloat16"), (777, 256, "float16")])
def test_the_folded_pick_on_the_cpu_emulation(n, k, dname, tmp_path):
    """Folded and unfolded plans pick the same index on every case, np.argmax's where the case
    decides it; the random case against the float64 logits rounded as the GEMV stores them."""
    import cuda_model_emulation as emu

    d = ml_dtypes.bfloat16 if dname == "bfloat16" else np.float16
    ll = C.cheapest_llir(head_pick, _inputs(n, k, d, "random")[:3])
    before, after = _plan(ll, fold=False), _plan(ll)
    assert _labels(after)[-2:] == [FOLDED, KEY]
    lib = emu.build_with_hand([before, after], ("rms_norm.cu", "gemv.cu", "argmax.cu"), str(tmp_path))
    for seed, case in enumerate(CASES):
        h, g, w, want = _inputs(n, k, d, case, seed)
        (got,) = emu.run(lib, after, [h, g, w], {})
        (ref,) = emu.run(lib, before, [h, g, w], {})
        np.testing.assert_array_equal(got, ref, err_msg=case)
        if want is not None:
            assert got.tolist() == [want], case
    h, g, w, _ = _inputs(n, k, d, "random", 9)
    x = h.astype(np.float64) / np.sqrt(np.mean(h.astype(np.float64) ** 2) + 1e-5) * g
    logits = (x.astype(d).astype(np.float64) @ w.astype(np.float64).T).astype(d)
    (got,) = emu.run(lib, after, [h, g, w], {})
    assert logits[0, got[0]] == logits.max()  # the largest logit as stored (rounding may tie others)


def test_the_module_compiles():
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    ll = C.cheapest_llir(head_pick, _inputs(300, 64, ml_dtypes.bfloat16, "random")[:3])
    kernels = _plan(ll).kernels()
    assert any(k.kind.endswith("_argmax") for k in kernels) and any(k.kind == "argmax_key" for k in kernels)
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plan was made, the module not compiled")
    nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,dname", [(128256, 256, "bfloat16"), (5000, 2048, "bfloat16"), (777, 256, "float16")])
def test_the_folded_pick_on_the_gpu(n, k, dname):
    """The cheapest plan on the GPU with the fold on and off (a vocabulary's 128256 rows: 16032
    blocks meet in the key): the same index on every case, the constructed one where the case
    decides it, and again on two replays (the key is back at zero each time)."""
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    d = ml_dtypes.bfloat16 if dname == "bfloat16" else np.float16
    ll = C.cheapest_llir(head_pick, _inputs(n, k, d, "random")[:3])
    exes = {}
    for fold in (True, False):
        with pytest.MonkeyPatch.context() as env:  # (a bucket is planned at its first run)
            env.setenv(SWITCH, "1" if fold else "0")
            exes[fold] = be.compile(ll)
            exes[fold].run([be.from_numpy(a) for a in _inputs(n, k, d, "random")[:3]], {})
    assert "+ argmax" in exes[True].describe() and "+ argmax" not in exes[False].describe()
    for seed, case in enumerate(CASES):
        h, g, w, want = _inputs(n, k, d, case, seed)
        got = {fold: [be.to_numpy(exe.run([be.from_numpy(a) for a in (h, g, w)], {})[0]).tolist()
                      for _ in range(3)] for fold, exe in exes.items()}
        assert got[True] == got[False] == [got[True][0]] * 3, case
        if want is not None:
            assert got[True][0] == [want], case

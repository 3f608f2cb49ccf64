"""The decode GEMV with an elementwise epilogue (backends/cuda/epilogue.py): a projection and the
fused kernel that reads its row once (a residual add) run as one launch.

CPU: the plan has one step where it applies and keeps two where it must not; the module compiles
with nvcc where installed; the kernel runs on the CPU emulation of CUDA (g++) against float64.
GPU (marked ``gpu``, skipped without one): jitted functions against float64 NumPy.
"""
from __future__ import annotations

import re
import shutil

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

import cuda_cases as C

R = np.random.default_rng(23)


def residual(x, h, w):
    """A Llama layer's ``x + o_proj(h)``: the product in w's dtype, widened, added."""
    return x + lnp.astype(lnp.matmul(h, lnp.transpose(w)), lnp.float32)


def _inputs(n, k, wdtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, n)).astype(np.float32)
    h = (rng.standard_normal((1, k)) / np.sqrt(k)).astype(wdtype)
    w = rng.standard_normal((n, k)).astype(wdtype)
    return x, h, w


def _want(x, h, w, wdtype):
    prod = h.astype(np.float64) @ w.astype(np.float64).T
    return x.astype(np.float64) + prod.astype(wdtype).astype(np.float64)  # rounded as stored


def gated(h, wg, wu):
    """A gated MLP's middle: silu(h @ wg.T) * (h @ wu.T), as the Llama example writes it."""
    return lf.nn.silu(lnp.matmul(h, lnp.transpose(wg))) * lnp.matmul(h, lnp.transpose(wu))


def _gated_inputs(n, k, d, seed=0, n_up=None):
    rng = np.random.default_rng(seed)
    h = (rng.standard_normal((1, k)) / np.sqrt(k)).astype(d)
    return h, rng.standard_normal((n, k)).astype(d), rng.standard_normal((n_up or n, k)).astype(d)


def _gated_want(h, wg, wu, d):
    g = (h.astype(np.float64) @ wg.astype(np.float64).T).astype(d).astype(np.float64)
    u = (h.astype(np.float64) @ wu.astype(np.float64).T).astype(d).astype(np.float64)
    return g / (1 + np.exp(-g)) * u


def _labels(bp):
    return [s.label for s in bp.steps]


def test_a_residual_add_after_a_gemv_is_one_launch():
    ll = C.cheapest_llir(residual, _inputs(64, 128, ml_dtypes.bfloat16))
    bp = plan_graph(ll, {})
    assert _labels(bp) == ["matmul (gemv nk) + epilogue"]
    (step,) = bp.steps
    assert step.source.buffers == ["in0", "in1", "e0", "out"]  # x, W, the residual, the sum
    assert "lf_gemv_nk_to<__nv_bfloat16" in step.source.text
    assert "lf_ld(lf_st<__nv_bfloat16>(acc0))" in step.source.text  # rounded as the GEMV stores it


def test_no_epilogue_when_the_product_is_also_returned():
    def both(x, h, w):
        p = lnp.matmul(h, lnp.transpose(w))
        return p, x + lnp.astype(p, lnp.float32)

    bp = plan_graph(C.cheapest_llir(both, _inputs(64, 128, ml_dtypes.bfloat16)), {})
    assert "matmul (gemv nk) + epilogue" not in _labels(bp)
    assert "matmul (gemv nk)" in _labels(bp)


def test_no_epilogue_when_the_consumer_reads_the_row_reversed():
    def reversed_add(x, h, w):
        p = lnp.matmul(h, lnp.transpose(w))
        return x + lnp.astype(p[:, ::-1], lnp.float32)

    bp = plan_graph(C.cheapest_llir(reversed_add, _inputs(64, 128, ml_dtypes.bfloat16)), {})
    assert _labels(bp) == ["matmul (gemv nk)", "fused"]


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
def test_epilogue_modules_compile_with_nvcc():
    kernels = []
    for d in (np.float32, np.float16, ml_dtypes.bfloat16):
        kernels += plan_graph(C.cheapest_llir(residual, _inputs(64, 2048, d)), {}).kernels()
    nvcc_check(module_source(kernels))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("n,k,d", [(64, 128, np.float32), (48, 2048, np.float32), (64, 128, np.float16)])
def test_epilogue_on_the_cpu_emulation_matches_float64(tmp_path, n, k, d):
    import cuda_model_emulation as emu

    ins = _inputs(n, k, d, seed=1)
    bp = plan_graph(C.cheapest_llir(residual, ins), {})
    assert _labels(bp) == ["matmul (gemv nk) + epilogue"]
    (got,) = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, list(ins), {})
    tol = 2e-3 if d is np.float16 else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), _want(*ins, d), rtol=tol, atol=tol * 4)


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,dname", [(64, 128, "float32"), (2048, 2048, "bfloat16"), (256, 8192, "bfloat16")])
def test_jitted_residual_on_gpu_matches_float64(n, k, dname):
    d = np.float32 if dname == "float32" else ml_dtypes.bfloat16
    ins = _inputs(n, k, d, seed=2)
    _jitted_on_gpu_matches(residual, ins, _want(*ins, d), 1e-4 if dname == "float32" else 2e-2)


def _jitted_on_gpu_matches(fn, ins, want, tol):
    """``fn`` jitted on the CUDA backend agrees with ``want`` and a replay gives the same values."""
    f = lf.jit(fn, backend="cuda")
    got = np.asarray(f(*ins))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(np.asarray(f(*ins)), got)  # replayed: the same values


def test_gate_and_up_with_their_product_are_one_pair_launch():
    bp = plan_graph(C.cheapest_llir(gated, _gated_inputs(128, 64, ml_dtypes.bfloat16)), {})
    assert _labels(bp) == ["matmul (gemv nk pair) + epilogue"]
    (step,) = bp.steps
    assert step.source.buffers == ["in0", "in1", "in2", "out"]
    assert "lf_gemv_nk_pair_to<__nv_bfloat16, 0>" in step.source.text


def test_siblings_of_different_lengths_are_not_a_pair():
    def two(h, wg, wu):
        return lnp.sum(lnp.matmul(h, lnp.transpose(wg))) + lnp.sum(lnp.matmul(h, lnp.transpose(wu)))

    bp = plan_graph(C.cheapest_llir(two, _gated_inputs(128, 64, ml_dtypes.bfloat16, n_up=64)), {})
    assert not any("pair" in lab for lab in _labels(bp))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("unroll", ["0", "1"], ids=["loop", "unrolled"])
@pytest.mark.parametrize("n,k", [(128, 64), (40, 2048), (64, 256)])
def test_pair_epilogue_on_the_cpu_emulation_matches_float64(tmp_path, n, k, unroll, monkeypatch):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.epilogue import PAIR_UNROLL_SWITCH

    monkeypatch.setenv(PAIR_UNROLL_SWITCH, unroll)
    ins = _gated_inputs(n, k, np.float32, seed=3)
    bp = plan_graph(C.cheapest_llir(gated, ins), {})
    assert _labels(bp) == ["matmul (gemv nk pair) + epilogue"]
    iters = int(re.search(r"lf_gemv_nk_pair_to<float, (\d+)", bp.steps[0].source.text).group(1))
    seg = bp.steps[0].source.meta["_weights"][0][1]
    assert iters == (seg.iters if unroll == "1" else 0)
    # (k = 64 is less than one 16-byte load a lane of a warp: no unrolled form)
    assert (iters > 0) == (unroll == "1" and k > 64)
    (got,) = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, list(ins), {})
    np.testing.assert_allclose(got.astype(np.float64), _gated_want(*ins, np.float32), rtol=2e-5, atol=1e-4)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("unroll", ["0", "1"], ids=["loop", "unrolled"])
@pytest.mark.parametrize("wpr", ["2", "4", "8"])
def test_pair_with_more_warps_a_row_matches_float64(tmp_path, wpr, unroll, monkeypatch):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.epilogue import PAIR_UNROLL_SWITCH, PAIR_WPR_SWITCH

    monkeypatch.setenv(PAIR_WPR_SWITCH, wpr)
    monkeypatch.setenv(PAIR_UNROLL_SWITCH, unroll)
    ins = _gated_inputs(40, 2048, np.float32, seed=5)
    bp = plan_graph(C.cheapest_llir(gated, ins), {})
    (step,) = bp.steps
    iters = 2048 // (int(wpr) * 32 * 4) if unroll == "1" else 0
    assert f"lf_gemv_nk_pair_to<float, {iters}>(" in step.source.text and f", {wpr}, blockIdx.x" in step.source.text
    assert step.source.meta["grid3"] == (-(-40 // (8 // int(wpr))), 1, 1)
    (got,) = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, list(ins), {})
    np.testing.assert_allclose(got.astype(np.float64), _gated_want(*ins, np.float32), rtol=2e-5, atol=1e-4)
    monkeypatch.setenv(PAIR_WPR_SWITCH, "8")  # K = 768 has 16-byte loads for 6 warps: 4, a power of two
    short = _gated_inputs(16, 768, np.float32, seed=6)
    assert ", 4, blockIdx.x" in plan_graph(C.cheapest_llir(gated, short), {}).steps[0].source.text
    monkeypatch.setenv(PAIR_WPR_SWITCH, "3")
    with pytest.raises(ValueError, match=PAIR_WPR_SWITCH):
        plan_graph(C.cheapest_llir(gated, ins), {})


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
def test_pair_blocks_can_be_capped_and_loop_over_the_rows(tmp_path, monkeypatch):
    """LUMINAL_CUDA_GEMV_PAIR_BLOCKS caps a pair launch's blocks (for sweeps): each then covers
    the same number of row groups, looping over them, and the result does not change."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.epilogue import PAIR_BLOCKS_SWITCH

    ins = _gated_inputs(200, 256, np.float32, seed=7)  # 25 groups of 8 rows
    monkeypatch.setenv(PAIR_BLOCKS_SWITCH, "4")
    bp = plan_graph(C.cheapest_llir(gated, ins), {})
    (step,) = bp.steps
    assert step.source.meta["grid3"] == (4, 1, 1)  # 7 groups a block (the last block 4)
    (got,) = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, list(ins), {})
    np.testing.assert_allclose(got.astype(np.float64), _gated_want(*ins, np.float32), rtol=2e-5, atol=1e-4)
    monkeypatch.setenv(PAIR_BLOCKS_SWITCH, "none")
    with pytest.raises(ValueError, match=PAIR_BLOCKS_SWITCH):
        plan_graph(C.cheapest_llir(gated, ins), {})


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,dname", [(128, 64, "float32"), (8192, 2048, "bfloat16")])
def test_jitted_gated_mlp_on_gpu_matches_float64(n, k, dname):
    d = np.float32 if dname == "float32" else ml_dtypes.bfloat16
    ins = _gated_inputs(n, k, d, seed=4)
    _jitted_on_gpu_matches(gated, ins, _gated_want(*ins, d), 1e-4 if dname == "float32" else 3e-2)


# ---- an elementwise kernel read through a reshape by the next one (fuse_reshaped_elementwise) ----
def heads_merged(a):
    """The attention output's pattern: (H, S, D) -> (S, H, D) scaled, read as (S, H*D), narrowed."""
    t = lnp.transpose(a, (1, 0, 2)) * 2.0
    return lnp.reshape(t, (a.shape[1], a.shape[0] * a.shape[2])).astype(lnp.bfloat16)


def _unfolded(monkeypatch, ll):
    from luminal_fn.backends.cuda import plan as plan_module

    with monkeypatch.context() as m:
        m.setattr(plan_module, "fuse_reshaped_elementwise", lambda pl: None)
        return plan_graph(ll, {})


def test_a_transposed_copy_and_its_reshaped_cast_are_one_kernel(monkeypatch):
    a = R.standard_normal((4, 3, 16)).astype(np.float32)
    ll = C.cheapest_llir(heads_merged, (a,))
    assert _labels(_unfolded(monkeypatch, ll)) == ["fused", "fused"]  # what extraction leaves
    bp = plan_graph(ll, {})
    assert _labels(bp) == ["fused"], _labels(bp)
    (step,) = bp.steps
    assert step.source.buffers == ["in0", "out"]


def test_no_fold_when_the_first_result_is_read_again():
    def twice(a):
        t = lnp.transpose(a, (1, 0, 2)) * 2.0
        return lnp.reshape(t, (3, 64)).astype(lnp.bfloat16), lnp.sum(t)

    a = R.standard_normal((4, 3, 16)).astype(np.float32)
    labels = _labels(plan_graph(C.cheapest_llir(twice, (a,)), {}))
    assert labels.count("fused") + labels.count("fused_reduce") >= 2, labels


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
def test_folded_chain_on_the_cpu_emulation_matches_float64(tmp_path, monkeypatch):
    import cuda_model_emulation as emu

    a = R.standard_normal((4, 3, 16)).astype(np.float32)

    def f32_out(a):
        return lnp.reshape(lnp.transpose(a, (1, 0, 2)) * 2.0, (3, 64)) + 1.0

    ll = C.cheapest_llir(f32_out, (a,))
    assert len(_unfolded(monkeypatch, ll).steps) == 2
    bp = plan_graph(ll, {})
    assert _labels(bp) == ["fused"], _labels(bp)
    (got,) = emu.run(emu.build([bp], str(tmp_path)), bp, [a], {})
    want = (np.transpose(a.astype(np.float64), (1, 0, 2)) * 2.0).reshape(3, 64) + 1.0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

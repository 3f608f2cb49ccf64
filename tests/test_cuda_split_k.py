"""Split-K for GEMMs of few rows (backends/cuda/split_k.py, on unless LUMINAL_CUDA_SPLIT_K=0):
one strided-batched cuBLAS call over K's chunks into float32 partials, then the kernel adding
them (lf_split_k_sum_to), with a residual add folded in as its epilogue.

On the CPU: the split count; the batched call lists executed by test_cuda_cublas.py's NumPy model
of cuBLAS (half operands, float32 partials) add up to A @ B; the plans, with and without the
switch, with the epilogue, and the module compiled by nvcc where installed. On the GPU (marked
``gpu``): lf.jit against float64 NumPy with the switch on, static and symbolic rows.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda.cublas import gemm_plan
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check
from luminal_fn.backends.cuda.split_k import SUM_WIDTH_SWITCH, SWITCH, chunked, split_count, sum_width
from luminal_fn.ir.view import View

import cuda_cases as C
from test_cuda_cublas import _emulate


def test_split_count_fills_the_device_for_few_rows():
    assert split_count(32, 2048, 2048, 132) == 8  # q, o: 16 tiles of 128 columns
    assert split_count(32, 8192, 2048, 132) == 2  # gate, up: 64 tiles
    assert split_count(32, 2048, 8192, 132) == 8  # down
    assert split_count(64, 512, 2048, 132) == 8  # k, v: capped
    assert split_count(65, 512, 2048, 132) == 1  # rows enough for cuBLAS
    assert split_count(32, 2048, 384, 132) == 1  # K too short to halve into 256-row chunks
    assert split_count(32, 2048, 1040, 132) == 1  # 1040 / 2 is not a multiple of 16


def test_sum_width_keeps_blocks_enough_for_the_device(monkeypatch):
    assert sum_width(32 * 2048, 132) == 2  # four a thread would be 64 blocks on 132 SMs
    assert sum_width(32 * 512, 132) == 2
    assert sum_width(64 * 8192, 132) == 2  # split-K's largest: 512 blocks at four a thread
    assert sum_width(1024 * 8192, 132) == 4
    monkeypatch.setenv(SUM_WIDTH_SWITCH, "4")
    assert sum_width(32 * 2048, 132) == 4
    monkeypatch.setenv(SUM_WIDTH_SWITCH, "3")
    with pytest.raises(ValueError, match=SUM_WIDTH_SWITCH):
        sum_width(32 * 2048, 132)


@pytest.mark.parametrize("w_t", [False, True], ids=["x@W", "x@W.T"])
def test_chunked_calls_add_up_to_the_product(w_t):
    rng = np.random.default_rng(1)
    M, K, N, S = 5, 64, 24, 4
    a = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((N, K) if w_t else (K, N)).astype(np.float32)
    va = View.contiguous((M, K))
    vb = View.contiguous((N, K)).permute([1, 0]) if w_t else View.contiguous((K, N))
    a3, b3 = chunked(va, vb, S, K)
    calls = gemm_plan(a3, b3, (S, M, N), "bfloat16", "float32")
    assert calls is not None and len(calls) == 1 and calls[0][-1] == S  # one call, S batches
    assert calls[0][14] == 0  # C float32 (cuBLAS's CUDA_R_32F) while A and B are bf16 (14)
    parts = np.full(S * M * N, np.nan)
    _emulate(calls, a.reshape(-1).astype(np.float64), w.reshape(-1).astype(np.float64), parts, 2, 4)
    want = a.astype(np.float64) @ (w.T if w_t else w).astype(np.float64)
    np.testing.assert_allclose(parts.reshape(S, M, N).sum(0), want, rtol=1e-12, atol=1e-12)


def project(h, w):
    return lnp.matmul(h, lnp.transpose(w))


def residual(x, h, w):
    """A Llama layer's ``x + o_proj(h)`` over a prompt's rows."""
    return x + lnp.astype(lnp.matmul(h, lnp.transpose(w)), lnp.float32)


def _inputs(m, k, n, d, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, n)).astype(np.float32),
            (rng.standard_normal((m, k)) / np.sqrt(k)).astype(d),
            rng.standard_normal((n, k)).astype(d))


def test_the_plans_with_and_without_the_switch(monkeypatch):
    x, h, w = _inputs(32, 2048, 512, ml_dtypes.bfloat16)
    monkeypatch.setenv(SWITCH, "0")
    assert [s.label for s in plan_graph(C.cheapest_llir(project, (h, w)), {}).steps] == ["matmul (cuBLAS)", "output copy"]
    monkeypatch.setenv(SWITCH, "4")  # a cap on the split
    assert "lf_split_k_sum_to<4, " in plan_graph(C.cheapest_llir(project, (h, w)), {}).steps[1].source.text
    monkeypatch.setenv(SWITCH, "lots")
    with pytest.raises(ValueError, match=SWITCH):
        plan_graph(C.cheapest_llir(project, (h, w)), {})
    monkeypatch.delenv(SWITCH)  # on by default
    bp = plan_graph(C.cheapest_llir(project, (h, w)), {})
    assert [s.label for s in bp.steps] == ["matmul (cuBLAS split-K)", "matmul (split-K sum)"]
    assert "lf_split_k_sum_to<8, 2>(b0, 16384, LfGemvStore<__nv_bfloat16>{out});" in bp.steps[1].source.text
    assert bp.steps[0].dims == frozenset()  # static rows: the host call reads no dim
    bp = plan_graph(C.cheapest_llir(residual, (x, h, w)), {})
    assert [s.label for s in bp.steps] == ["matmul (cuBLAS split-K)", "matmul (split-K sum) + epilogue"]
    assert "lf_ld(lf_st<__nv_bfloat16>(acc0))" in bp.steps[1].source.text  # rounded as C is stored
    _, h1, w1 = _inputs(128, 2048, 512, ml_dtypes.bfloat16)  # rows enough: no split
    assert [s.label for s in plan_graph(C.cheapest_llir(project, (h1, w1)), {}).steps] == ["matmul (cuBLAS)", "output copy"]
    # symbolic rows (a prompt bucket up to 64): the sum covers the call's s * N elements
    ll = C.cheapest_llir(project, (h, w), dynamic_axes={"h": {0: "s"}}, buckets={"s": [(1, 1), (2, 64)]})
    bp = plan_graph(ll, {"s": 64})
    assert [s.label for s in bp.steps] == ["matmul (cuBLAS split-K)", "matmul (split-K sum)"]
    assert "d_s" in bp.steps[1].source.text and bp.steps[1].source.dims == ["s"]
    assert bp.steps[0].dims == {"s"}  # the batched call's rows: part of a captured graph's key


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed here")
def test_split_k_modules_compile_with_nvcc(monkeypatch):
    monkeypatch.setenv(SWITCH, "1")
    kernels = []
    for d in (np.float16, ml_dtypes.bfloat16):
        kernels += plan_graph(C.cheapest_llir(residual, _inputs(32, 2048, 512, d)), {}).kernels()
        kernels += plan_graph(C.cheapest_llir(project, _inputs(32, 2048, 512, d)[1:]), {}).kernels()
    nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("d", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("m", [32, 7])
def test_split_k_on_gpu_matches_float64(monkeypatch, d, m):
    monkeypatch.setenv(SWITCH, "1")
    check_on_gpu(m, 2048, 512, d)


def check_on_gpu(m, k, n, d):
    """The projection and its residual add, jitted on the GPU, against float64 twice (the second
    call replays the captured graph); returns the jitted projection."""
    x, h, w = _inputs(m, k, n, d, seed=m)
    prod = h.astype(np.float64) @ w.astype(np.float64).T
    f = lf.jit(project, backend="cuda")
    g = lf.jit(residual, backend="cuda")
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f(h, w)).astype(np.float64), prod, rtol=2e-2, atol=2e-2)
        want = x.astype(np.float64) + prod.astype(d).astype(np.float64)
        np.testing.assert_allclose(np.asarray(g(x, h, w)).astype(np.float64), want, rtol=1e-2, atol=2e-2)
    return f


@pytest.mark.gpu
def test_split_k_with_symbolic_rows_on_gpu(monkeypatch):
    """One plan for prompts of 2..64 rows: the batched call and the sum read the call's rows."""
    monkeypatch.setenv(SWITCH, "1")
    f = lf.jit(residual, backend="cuda", dynamic_axes={"x": {0: "s"}, "h": {0: "s"}},
               buckets={"s": [(1, 1), (2, 64)]})
    for m in (32, 5, 64, 17):
        x, h, w = _inputs(m, 2048, 512, ml_dtypes.bfloat16, seed=m)
        prod = (h.astype(np.float64) @ w.astype(np.float64).T).astype(ml_dtypes.bfloat16).astype(np.float64)
        np.testing.assert_allclose(np.asarray(f(x, h, w)).astype(np.float64), x + prod, rtol=1e-2, atol=2e-2)

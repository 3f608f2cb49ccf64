"""Row kernels read a half-precision input directly where the graph widens it to float32 first
(backends/cuda/widening.py): the copy's kernel and buffer disappear from the plan, the kernel
loads the narrow dtype, and the results are the reference's (CPU emulation of the CUDA kernels,
float16 and bfloat16)."""
from __future__ import annotations

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
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

sys.path.insert(0, os.path.dirname(__file__))
from test_row_kernels import _emulation_library, ref_attention, ref_softmax  # noqa: E402

R = np.random.default_rng(7)


def _plan(fn, args, kind):
    graph = lf.jit(fn).trace(*args).hlir
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=KERNEL_KINDS)
    for genome in [None] + list(ex.kernel_genomes()):
        ll = ex.extract(genome)
        if any(n.op == "CustomOp" and n.attrs.get("name") == kind for n in ll.live_nodes()):
            for n in ll.live_nodes():  # cuBLAS is not emulated: the products rendered
                if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
                    n.attrs["strategy"] = "rendered"
            return plan_graph(ll, {})
    raise AssertionError(f"no genome takes {kind}")


def _softmax(x):
    return lf.nn.softmax(x, axis=-1)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_a_half_softmax_is_one_kernel_reading_the_half_input(dtype):
    x = (R.standard_normal((6, 64)) * 3).astype(dtype)
    plan = _plan(_softmax, (x,), "softmax_rows")
    (step,) = [s for s in plan.steps if s.label != "output copy"]
    assert step.label == "softmax_rows" and plan.bufs[step.bufs[0]].kind == "input"
    t = "__half" if dtype is np.float16 else "__nv_bfloat16"
    assert f"lf_softmax_rows<{t}, " in step.source.text


def test_a_widened_copy_read_by_another_kernel_too_stays():
    """The float32 copy is also an output: it is computed once, and the kernel reads it."""
    x = R.standard_normal((4, 32)).astype(np.float16)

    def fn(a):
        f = a.astype(lnp.float32)
        return lf.nn.softmax(f, axis=-1), f

    plan = _plan(fn, (x,), "softmax_rows")
    soft = next(s for s in plan.steps if s.label == "softmax_rows")
    assert "lf_softmax_rows<float, " in soft.source.text
    assert plan.bufs[soft.bufs[0]].kind != "input"


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
HALVES = pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
TOL = {np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2}


def _ctype(dtype):
    return "__half" if dtype is np.float16 else "__nv_bfloat16"


@needs_gxx
@HALVES
@pytest.mark.parametrize("shape", [(5, 64), (3, 1000), (2, 9)], ids=["held", "held_wide", "unaligned"])
def test_a_half_softmax_on_the_cpu_emulation(shape, dtype, tmp_path):
    import cuda_model_emulation as emu

    x = (R.standard_normal(shape) * 4).astype(dtype)
    plan = _plan(_softmax, (x,), "softmax_rows")
    text = next(s for s in plan.steps if s.label == "softmax_rows").source.text
    assert f"lf_softmax_rows<{_ctype(dtype)}, " in text
    got = emu.run(_emulation_library(plan, str(tmp_path)), plan, [x], {})[0]
    np.testing.assert_allclose(got.astype(np.float64), ref_softmax(x), rtol=TOL[dtype], atol=TOL[dtype])


@needs_gxx
@HALVES
def test_a_half_attention_on_the_cpu_emulation(dtype, tmp_path):
    import cuda_model_emulation as emu

    q, k, v = (R.standard_normal(s).astype(dtype) for s in ((2, 5, 16), (2, 8, 16), (2, 8, 16)))
    mask = np.where(R.random((5, 8)) < 0.3, -1e4, 0.0).astype(dtype)
    mask[:, 0] = 0.0

    def fn(q, k, v, m):
        return lf.nn.scaled_dot_product_attention(q, k, v, mask=m)

    plan = _plan(fn, (q, k, v, mask), "softmax_rows")
    labels = [s.label for s in plan.steps]
    assert "softmax_rows" in labels
    got = emu.run(_emulation_library(plan, str(tmp_path)), plan, [q, k, v, mask], {})[0]
    tol = 5e-3 if dtype is np.float16 else 3e-2
    np.testing.assert_allclose(got.astype(np.float64), ref_attention(q, k, v, mask), rtol=tol, atol=tol)


@needs_gxx
@HALVES
@pytest.mark.parametrize("shape", [(5, 64), (3, 1000), (2, 3, 40), (2, 4096)],
                         ids=["held", "held_wide", "3d", "llama_row"])
def test_a_half_rms_norm_on_the_cpu_emulation(shape, dtype, tmp_path):
    """Hugging Face's half-precision RMS norm: one rms_norm_rows kernel reading the half x,
    rounding x * r to x's dtype before the weight multiply (CAST 3 / 2), storing with vector
    stores where aligned; the same bits as the model."""
    import cuda_model_emulation as emu
    from test_row_kernels import ref_rms_half

    x = (R.standard_normal(shape) * 2).astype(dtype)
    w = R.standard_normal(shape[-1:]).astype(dtype)
    plan = _plan(lambda a, b: lf.nn.rms_norm(a, b, eps=1e-6), (x, w), "rms_norm_rows")
    (step,) = [s for s in plan.steps if s.label != "output copy"]
    assert step.label == "rms_norm_rows" and plan.bufs[step.bufs[0]].kind == "input"
    t = _ctype(dtype)
    assert f"lf_rms_rows<{t}, {t}, {t}, " in step.source.text and f", {t}>(" in step.source.text
    got = emu.run(_emulation_library(plan, str(tmp_path)), plan, [x, w], {})[0]
    want = ref_rms_half(x, w, 1e-6)
    assert (got == want).mean() >= 0.99
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=TOL[dtype], atol=TOL[dtype])

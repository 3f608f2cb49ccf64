"""A cast to float16 / bfloat16 inside a fused tree rounds, on every backend.

Half-precision intermediates are computed in float32 and rounded when stored; an explicit cast
to a half type (``x.astype(bf16)``, as Hugging Face's LlamaRMSNorm does before its weight
multiply) must round where it stands even when extraction fuses it between float32 operations.
The references are NumPy op by op with ml_dtypes. A kernel that skips the rounding differs in
most elements (the half types keep 11 and 8 significant bits).
"""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.backends import get_backend
from luminal_fn.ir import dtypes as dt

import cuda_cases as C

HALVES = {"f16": dt.float16, "bf16": dt.bfloat16}
CASES = [(h, r) for h in sorted(HALVES) for r in (False, True)]


def _check(got, hd, x, reduce):
    want = C.fused_half_cast_reference(hd, x, reduce)
    got = np.asarray(got)
    assert got.dtype == np.float32 and got.shape == want.shape
    if reduce:  # a row sum: the order of the float32 additions may differ, the roundings not
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("half,reduce", CASES)
@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_a_fused_cast_to_half_precision_rounds(backend, half, reduce):
    if backend == "mlx":
        pytest.importorskip("mlx.core", reason="mlx is not installed: the MLX backend cannot run")
    hd = HALVES[half]
    g, ins, dims = C.fused_half_cast(hd, reduce)
    be = get_backend(backend)  # MLX through its array ops (the rendered Metal path needs a Mac)
    exe = be.compile(g, {"metal": False} if backend == "mlx" else None)
    (got,) = exe.run([be.from_numpy(np.array(x, copy=True)) for x in ins], dims)
    _check(be.to_numpy(got), hd, ins[0], reduce)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
@pytest.mark.parametrize("half,reduce", CASES)
def test_the_rendered_cuda_kernel_rounds_at_the_cast(half, reduce, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    hd = HALVES[half]
    g, ins, dims = C.fused_half_cast(hd, reduce)
    bp = plan_graph(g, dims)
    assert emu.why_not_emulable(bp) is None
    (got,) = emu.run(emu.build([bp], str(tmp_path)), bp, ins, dims)
    _check(got, hd, ins[0], reduce)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_a_traced_round_trip_through_half_precision_rounds_under_every_extraction(half):
    """x.astype(half).astype(float32) between float32 operations: every extraction the search
    may pick (fused or not, random genomes and the cheapest) rounds, and so does the jitted call."""
    import random

    from luminal_fn.backends.numpy import NumpyBackend
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    h = ml_dtypes.bfloat16 if half == "bfloat16" else np.float16
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)

    def fn(a):
        return (a * 1.7).astype(h).astype(np.float32) * 3.1

    want = (x * np.float32(1.7)).astype(h).astype(np.float32) * np.float32(3.1)
    traced = lf.jit(fn).trace(x)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    rng = random.Random(5)
    genomes = [None, ex.generic_genome()] + [tuple(rng.randrange(g.n_options) for g in ex.genes)
                                             for _ in range(12)]
    for genome in genomes:
        (got,) = NumpyBackend().compile(ex.extract(genome)).run([x], {})
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"genome {genome}")
    np.testing.assert_array_equal(np.asarray(lf.jit(fn)(x)), want)

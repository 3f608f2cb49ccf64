"""Programmatic dependent launch (backends/cuda/pdl.py): on sm_90+ every kernel is launched with
the programmatic stream serialization attribute, so it may start before the kernel before it has
finished. That is only correct if every kernel waits (lf_pdl_wait) before it reads what a kernel
wrote: at its start, or - the GEMVs - after prefetching their read-only weight rows to L2.

CPU: the launch structs match the driver's C layout; every kernel of the tiny Llama decode step
(with and without its RMS norms folded into the GEMVs) waits before its body, or calls a GEMV
that waits before its loop; the switch. GPU (marked ``gpu``, skipped without one): the step run with and without the
attribute, from captured graphs and launch by launch, agrees bit for bit and with NumPy.
"""
from __future__ import annotations

import ctypes
import os
import re

import numpy as np
import pytest

from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.pdl import _LaunchAttribute, _LaunchConfig, pdl_supported
from luminal_fn.backends.cuda.plan import KernelStep
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.backends.render.files import kernel_file
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor
from test_cuda_gemv_prologue import _plan, _tiny_llama

# the functions a GEMV hands its values to: an epilogue (epilogue.py), RoPE or a cache store
# (gemv_stores.py)
STORE_LAMBDA = re.compile(r"auto (epilogue|lf_store\d+) = \[&\]")
GEMV_CALL = re.compile(r"\blf_gemv_nk(_to|_pair_to|_rope_to)?<")


def test_launch_structs_have_the_drivers_layout():
    """CUlaunchAttribute: id, padding to 8, a 64-byte union; CUlaunchConfig: seven unsigned
    ints, then the stream, the attribute pointer and their count (cuda.h, CUDA 12 and 13)."""
    assert ctypes.sizeof(_LaunchAttribute) == 72
    assert _LaunchAttribute.value.offset == 8
    assert _LaunchConfig.shared_bytes.offset == 24
    assert _LaunchConfig.stream.offset == 32
    assert _LaunchConfig.attrs.offset == 40
    assert _LaunchConfig.num_attrs.offset == 48
    assert ctypes.sizeof(_LaunchConfig) == 56


def test_the_switch_and_the_architecture(monkeypatch):
    monkeypatch.setenv("LUMINAL_CUDA_PDL", "0")
    assert not pdl_supported(90)
    monkeypatch.delenv("LUMINAL_CUDA_PDL")
    assert not pdl_supported(80)  # griddepcontrol is sm_90+


def _body_lines(text: str) -> list:
    """The kernel's statements after its signature, its block-timing mark (empty unless
    LF_TRACE) and its reads of the parameter table."""
    lines = [ln.strip() for ln in text.split("\n")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith('extern "C" __global__')) + 1
    lines = lines[start:]
    while lines and ("P[" in lines[0] or lines[0] == "LF_TRACE_IN();"):
        lines.pop(0)
    return lines


@pytest.mark.parametrize("prologue", [False, True], ids=["plain", "rms-prologue"])
def test_every_kernel_waits_before_it_reads(prologue):
    traced, flat = _tiny_llama(2)
    g = traced.hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    bp = _plan(ll, {"s": 1, "c": 64}, fold=prologue, donated=flat(39)[1].donated)
    kernels = [s for s in bp.steps if isinstance(s, KernelStep)]
    assert len(kernels) >= 18  # (two layers; RoPE and the cache stores inside the q/k/v GEMVs)
    inside = guards = 0
    for s in kernels:
        body = _body_lines(s.source.text)
        assert body[0] == "lf_pdl_launch();", (s.label, body[:3])
        if s.source.meta.get("waits_inside"):
            inside += 1
            # only guards on dims, a folded norm's row (its shared memory, LfRmsRow: pointers)
            # and the epilogue's definition before the GEMV call that waits
            call = next(i for i, ln in enumerate(body) if GEMV_CALL.search(ln))
            before, depth = [], 0
            for ln in body[1:call]:  # the store lambdas' reads run when the GEMV stores
                if ln == "auto lf_main = [&]() {":
                    continue  # the body as a function, for the weight prefetch after it (l2_prefetch.py)
                if depth == 0 and STORE_LAMBDA.match(ln):
                    depth = 1
                elif depth:  # (a store lambda may hold lambdas of its own: gemv_stores.py)
                    depth += ln.count("{") - ln.count("}")
                else:
                    before.append(ln)
            assert not any("[" in ln for ln in before if not ln.startswith("__shared__ ")), (s.label, before)
            # a launch that ends early still waits: else it could complete before the kernel
            # it follows, and the kernel after it would not be ordered behind that one
            assert all("lf_pdl_wait();" in ln for ln in before if "return" in ln), (s.label, before)
            guards += sum("return" in ln for ln in before)
        else:
            assert body[1] == "lf_pdl_wait();", (s.label, body[:3])
    # q/k/v, o, gate/up and down of each layer and the LM head wait inside (a folded norm's row
    # too is read after that wait)
    assert inside == 4 * 2 + 1, inside
    assert sum(s.label.startswith("rms_norm_rows +") for s in kernels) == (2 * 2 + 1 if prologue else 0)
    # each layer's GEMVs skip a call with no rows (s symbolic); the LM head reads one static row
    assert guards == 4 * 2, guards


def test_the_gemv_functions_wait_before_their_loops():
    text = kernel_file("gemv.cu")
    for fn in ("lf_gemv_nk_rows_to", "lf_gemv_nk_pair_to"):
        body = text[text.index(f"__device__ void {fn}("):]
        body = body[:body.index("\n}\n")]
        assert body.index("lf_gemv_prefetch(") < body.index("lf_pdl_wait();") < body.index("for (int base")


# ---- on the GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("weights", ["float32", "bfloat16"])
def test_the_decode_step_with_and_without_pdl(weights):
    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    traced, flat = _tiny_llama(2, weights, cache_rows=64)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS)
    ll = ex.extract(None)
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    import cupy as cp

    cc = int(cp.cuda.Device().compute_capability)
    exes = {(pdl, graphs): be.compile(ll, {"cuda_pdl": pdl, "cuda_graphs": graphs})
            for pdl in (True, False) for graphs in (True, False)}
    assert exes[(True, True)].pdl == (cc >= 90 and os.environ.get("LUMINAL_CUDA_PDL", "1") != "0")
    assert not exes[(False, True)].pdl
    tol = 1e-4 if weights == "float32" else 3e-2
    for c in (1, 23, 64, 23):
        args, _ = flat(c - 1)
        dims = {"s": 1, "c": c}
        want = want_plan.run([a.copy() for a in args], dims)
        results = {}
        for key, exe in exes.items():
            runs = []
            for _ in range(3):  # the first run captures, the others replay
                outs = exe.run([be.from_numpy(a.copy()) for a in args], dims)
                runs.append([np.asarray(be.to_numpy(o)).copy() for o in outs])
            for again in runs[1:]:
                for a, b in zip(runs[0], again):
                    np.testing.assert_array_equal(a, b)
            results[key] = runs[0]
        on = exes[(True, True)]._last_bucket
        assert on.pdl == exes[(True, True)].pdl  # the module was compiled for sm_90+ where it is on
        assert {it[0] for it in on.launches} <= ({"p", "h"} if on.pdl else {"k", "h"})
        ref = results[(False, False)]
        for key, got in results.items():
            for k, (a, b) in enumerate(zip(got, ref)):
                np.testing.assert_array_equal(a, b, err_msg=f"{key} c={c} output {k}")
        for k, (a, w) in enumerate(zip(ref, want)):
            np.testing.assert_allclose(a.astype(np.float64), np.asarray(w).astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=f"c={c} output {k}")


# (switch, a value, the macro it defines, a value it refuses): the GEMV row prefetch's bytes, and
# which folded GEMVs load their first rows before the prologue (gemv.cu's LF_GEMV_EARLY)
GEMV_MACRO_SWITCHES = [("LUMINAL_CUDA_GEMV_PREFETCH", "4096", "LF_GEMV_PREFETCH", "lots"),
                       ("LUMINAL_CUDA_GEMV_EARLY", "1", "LF_GEMV_EARLY", "yes")]


@pytest.mark.parametrize("switch,value,macro,bad", GEMV_MACRO_SWITCHES, ids=[s[2] for s in GEMV_MACRO_SWITCHES])
def test_gemv_compile_time_settings_can_be_swept(monkeypatch, switch, value, macro, bad):
    from luminal_fn.backends.cuda.source import module_source

    traced, flat = _tiny_llama(1)
    g = traced.hlir
    ll = Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)
    kernels = _plan(ll, {"s": 1, "c": 64}, fold=False, donated=flat(39)[1].donated).kernels()
    assert f"#define {macro} {value}" not in module_source(kernels)
    monkeypatch.setenv(switch, value)
    text = module_source(kernels)
    assert text.index(f"#define {macro} {value}") < text.index(f"#ifndef {macro}")
    monkeypatch.setenv(switch, bad)
    with pytest.raises(ValueError, match=switch):
        module_source(kernels)


def test_a_plain_launch_is_called_like_a_programmatic_one():
    """Both launch kinds of a bucket take the stream's pointer; the plain one hands CuPy its
    fixed grid, block, arguments and shared memory (on the current stream)."""
    from luminal_fn.backends.cuda.launch import PlainLaunch

    calls = []
    launch = PlainLaunch(lambda *a, **k: calls.append((a, k)), "lf_x", [3, 1, 1], (256, 1, 1), ("P", 7), 128)
    launch(12345)
    assert calls == [(((3, 1, 1), (256, 1, 1), ("P", 7)), {"shared_mem": 128})]
    assert (launch.name, launch.grid, launch.block) == ("lf_x", (3, 1, 1), (256, 1, 1))

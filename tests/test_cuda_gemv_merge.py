"""Sibling GEMVs in one launch (backends/cuda/siblings.py): a decode step's q, k, v (and gate, up)
products read the same activation row, and the CUDA planner schedules them next to each other and
merges their lf_gemv_nk steps into one kernel that splits its blocks into one range per GEMV.

On the CPU: the plans (which steps merge, which do not, their buffers, the ordering and the
lifetimes), the rendered source (each segment's call, N, K, leading dim, block range), a model of
which rows each block computes, the merged kernel run on the CPU emulation of CUDA
(tests/cuda_model_emulation.py plus kernels/gemv.cu, float32 and float16) against float64 NumPy,
and the module compiled by nvcc where it is installed. On the GPU (marked ``gpu``): the results of
lf.jit and of the planned LLIR against float64 NumPy, called twice.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil

import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.backends.cuda import plan as plan_module
from luminal_fn.backends.cuda.executable import launch_shape, plan_graph
from luminal_fn.backends.cuda.siblings import NkSegment, render_gemv_nk
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check
from luminal_fn.backends.render import CUDA
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.expr import var
from luminal_fn.ir.view import View

import cuda_cases as C

S = var("s")


# ---- graphs ------------------------------------------------------------------------------------
def _siblings_graph(d, ns, k, rows=1, w_cols=None, w_offsets=None):
    """LLIR: x (rows, k) and weights W_i stored (n_i, w_cols) (a Linear layout), y_i = x @ W_i[:,
    off_i:off_i + k].T, each an output. Returns the graph and random inputs (rows as an int)."""
    b = C.B("siblings")
    x = b.input((rows, k), d)
    w_cols = w_cols or k
    offs = w_offsets or [0] * len(ns)
    ws = [b.input((n, w_cols), d) for n in ns]
    for w, n, off in zip(ws, ns, offs):
        vb = View((k, n), (1, w_cols), off, None)  # (K, N) logical, k contiguous: gemv nk
        y = b.custom("matmul", [b.c(x), (w, vb)], (rows, n), d, m=rows, n=n, k=k)
        b.output(y)
    r = 1 if not isinstance(rows, int) else rows
    ins = [C.rand((r, k), d, -1, 1)] + [C.rand((n, w_cols), d, -1, 1) for n in ns]
    return b.g, ins


_extract = C.cheapest_llir  # (test_cuda_l2_prefetch.py imports it from here)


def _bf16(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float32).astype(lf.bfloat16.np)


def _unmerged(monkeypatch, g, dims):
    """The plan as it was before siblings.py: the graph's order, one launch per GEMV (and no
    epilogues folded into them: epilogue.py's own tests cover those)."""
    with monkeypatch.context() as m:
        m.setattr(plan_module, "sibling_order", lambda nodes, keys, ready: nodes)
        m.setattr(plan_module, "merge_gemv_steps", lambda pl: None)
        m.setattr(plan_module, "fuse_gemv_epilogues", lambda pl: None)
        return plan_graph(g, dims)


def _labels(bp):
    return [s.label for s in bp.steps]


def _check_arena(bp):
    """Arena/scratch buffers alive at the same step never share bytes."""
    live = [b for b in bp.bufs if b.kind in ("arena", "scratch") and b.first >= 0]
    for a in live:
        for b in live:
            if a.id < b.id and not (a.last < b.first or b.last < a.first):
                assert a.offset + a.nbytes_max <= b.offset or b.offset + b.nbytes_max <= a.offset


# ---- plans -------------------------------------------------------------------------------------
def test_q_k_v_of_one_row_plan_to_one_merged_gemv(monkeypatch):
    rng = np.random.default_rng(0)
    x, wq, wk, wv = _bf16(rng, 1, 64), _bf16(rng, 64, 64), _bf16(rng, 16, 64), _bf16(rng, 16, 64)
    g = _extract(lambda x, wq, wk, wv: (x @ wq.T, x @ wk.T, x @ wv.T), (x, wq, wk, wv))
    before = _unmerged(monkeypatch, g, {})
    assert _labels(before) == ["matmul (gemv nk)"] * 3
    bp = plan_graph(g, {})
    assert _labels(bp) == ["matmul (gemv nk x3)"]
    (step,) = bp.steps
    assert len(bp.steps) < len(before.steps)
    # x, the three weights, the three outputs (written in place: no copies)
    assert step.bufs == bp.inputs + bp.outputs
    assert [bp.bufs[b].kind for b in step.bufs] == ["input"] * 4 + ["output"] * 3
    assert step.node == before.steps[0].node
    assert step.source.meta["nodes"] == tuple(s.node for s in before.steps)
    assert step.source.meta["grid3"] == (8 + 2 + 2, 1, 1)  # 64/8 + 16/8 + 16/8 blocks
    assert "gemv nk x3" in bp.describe() and "NkSegment" not in bp.describe()


def test_siblings_separated_by_other_work_are_scheduled_together(monkeypatch):
    """q's epilogue sits between q and k in the graph: the planner moves k and v up to q, and
    the lifetimes follow the order planned."""
    monkeypatch.setenv("LUMINAL_CUDA_MERGE_INDEPENDENT", "0")  # count the GEMV launches alone
    rng = np.random.default_rng(1)
    args = (_bf16(rng, 1, 64), _bf16(rng, 64, 64), _bf16(rng, 16, 64), _bf16(rng, 16, 64))

    def f(x, wq, wk, wv):
        q = lf.numpy.exp(x @ wq.T)
        k = (x @ wk.T) * 3.0
        return q, k, x @ wv.T

    g = _extract(f, args)
    before = _unmerged(monkeypatch, g, {})
    assert [lab for lab in _labels(before) if "gemv" in lab] == ["matmul (gemv nk)"] * 3
    assert "gemv" not in _labels(before)[1]  # not adjacent in the graph's order
    bp = plan_graph(g, {})
    labels = _labels(bp)
    assert labels[0] == "matmul (gemv nk x3)" and sum("gemv" in lab for lab in labels) == 1, labels
    assert len(bp.steps) == len(before.steps) - 2
    _check_arena(bp)
    # every buffer a step reads was written by an earlier step (or is an input)
    written = {b.id for b in bp.bufs if b.kind in ("input", "const")}
    for s in bp.steps:
        outs = set(s.bufs[-3:]) if s.label.startswith("matmul (gemv nk x3") else {s.bufs[-1]}
        assert set(s.bufs) - outs <= written, s.label
        written |= outs


def test_a_sibling_whose_weight_comes_later_is_not_moved_before_it(monkeypatch):
    rng = np.random.default_rng(2)
    args = (_bf16(rng, 1, 64), _bf16(rng, 64, 64), _bf16(rng, 16, 64))
    g = _extract(lambda x, wq, wk: (x @ wq.T, x @ (wk * 2.0).T), args)
    # the scaled weight, made from an input alone, is planned first (Planner._tables_first) and
    # the two GEMVs then share a launch; without that, graph order puts it between them
    assert _labels(plan_graph(g, {})) == ["fused", "matmul (gemv nk x2)"]
    monkeypatch.setattr(plan_module, "TABLE_ELEMENTS", 0)
    labels = _labels(plan_graph(g, {}))
    gemv = [i for i, lab in enumerate(labels) if "gemv" in lab]
    assert [labels[i] for i in gemv] == ["matmul (gemv nk)"] * 2, labels
    assert gemv[1] - gemv[0] > 1, labels  # the scaled weight is computed between them


def test_gemvs_reading_different_rows_are_not_merged():
    rng = np.random.default_rng(3)
    args = (_bf16(rng, 1, 64), _bf16(rng, 1, 64), _bf16(rng, 64, 64), _bf16(rng, 16, 64))
    g = _extract(lambda x1, x2, wq, wk: (x1 @ wq.T, x2 @ wk.T), args)
    assert _labels(plan_graph(g, {})) == ["matmul (gemv nk)"] * 2
    # the same input at two offsets (two halves of one row) is two different x as well
    x = _bf16(rng, 1, 128)
    g = _extract(lambda x, wq, wk: (x[:, :64] @ wq.T, x[:, 64:] @ wk.T), (x, args[2], args[3]))
    bp = plan_graph(g, {})
    assert _labels(bp) == ["matmul (gemv nk)"] * 2
    assert {s.bufs[0] for s in bp.steps} == {bp.inputs[0]}


def test_different_dtypes_and_more_than_four_siblings():
    g, _ = _siblings_graph(dt.float32, [8] * 6, 64)
    bp = plan_graph(g, {})
    assert _labels(bp) == ["matmul (gemv nk x4)", "matmul (gemv nk x2)"]
    b = C.B()
    x = b.input((1, 64), dt.float32)
    x16 = b.input((1, 64), dt.float16)
    for xi, d in ((x, dt.float32), (x16, dt.float16)):
        w = b.input((8, 64), d)
        b.output(b.custom("matmul", [b.c(xi), (w, View((64, 8), (1, 64), 0, None))], (1, 8), d,
                          m=1, n=8, k=64))
    assert _labels(plan_graph(b.g, {})) == ["matmul (gemv nk)"] * 2


def test_a_llama_decode_step_runs_q_k_v_and_gate_up_as_one_launch_each(monkeypatch):
    """benchmarks/plan_counts.py's Llama (small dims): 3 launches fewer per layer."""
    import sys

    monkeypatch.setenv("LUMINAL_CUDA_MERGE_INDEPENDENT", "0")  # count the GEMV merges alone
    monkeypatch.setenv("LUMINAL_CUDA_GEMV_STORES", "0")  # (RoPE and cache stores: test_cuda_gemv_stores.py)

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step, new_cache, step_inputs
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    layers = 2
    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=layers, hidden_size=64,
                              intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=256)
    args = (random_weights(cfg, "bfloat16"), *step_inputs([5], 39), new_cache(cfg, 64))
    traced = make_step(cfg).trace(*args)
    n_leaves = len(lf.tree_leaves(args))
    cache = tuple(range(n_leaves - 2 * layers, n_leaves))
    g = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS).extract(None)
    dims = {"s": 1, "c": 64}
    # (the norms stay their own launches here: test_cuda_gemv_prologue.py folds them)
    monkeypatch.setattr(plan_module, "fold_rms_prologues", lambda pl: 0)
    with monkeypatch.context() as m:
        m.setattr(plan_module, "sibling_order", lambda nodes, keys, ready: nodes)
        m.setattr(plan_module, "merge_gemv_steps", lambda pl: None)
        m.setattr(plan_module, "fuse_gemv_epilogues", lambda pl: None)
        before = plan_graph(g, dims, donated=cache)
    with monkeypatch.context() as m:
        m.setattr(plan_module, "fuse_gemv_epilogues", lambda pl: None)
        bp = plan_graph(g, dims, donated=cache)
    labels = _labels(bp)
    assert labels.count("matmul (gemv nk x3)") == layers  # q, k, v
    assert labels.count("matmul (gemv nk x2)") == layers  # gate, up
    assert labels.count("matmul (gemv nk)") == 2 * layers + 1  # o, down; the LM head
    assert _labels(before).count("matmul (gemv nk)") == 7 * layers + 1
    assert len(bp.steps) == len(before.steps) - 3 * layers
    # with the epilogues: o and down take the residual add, the LM head its widening to float32,
    # gate and up (one pair kernel) their silu(gate) * up
    full = _labels(plan_graph(g, dims, donated=cache))
    assert full.count("matmul (gemv nk) + epilogue") == 2 * layers + 1
    assert full.count("matmul (gemv nk pair) + epilogue") == layers
    assert len(full) == len(bp.steps) - (3 * layers + 1)
    _check_arena(bp)


def test_symbolic_rows_guard_the_whole_launch():
    g, _ = _siblings_graph(dt.bfloat16, [64, 16], 64, rows=S)
    bp = plan_graph(g, {"s": 1})
    (step,) = bp.steps
    text = step.source.text
    assert text.count("if ((d_s) == 0) { lf_pdl_wait(); return; }") == 1
    assert text.index("if ((d_s) == 0) { lf_pdl_wait(); return; }") < text.index("const int blk")
    assert step.source.dims == ["s"]
    assert not any("gemv" in lab for lab in _labels(plan_graph(g, {"s": 4})))  # prefill: no GEMV


# ---- the rendered source -------------------------------------------------------------------------
CALL = re.compile(r"if \(blk < (\d+)\) \{ lf_gemv_nk<([\w ]+), (\d+)>\((w\d) \+ \(([^)]*)\), "
                  r"\(long long\)\(([^)]*)\), b0 \+ \(([^)]*)\), (y\d), (\d+), (\d+), (\d+), "
                  r"blk - (\d+), (\d+)\); \}")


def _segments(text):
    return [dict(end=int(m[1]), T=m[2], iters=int(m[3]), w=m[4], w_off=m[5], ldw=m[6], x_off=m[7],
                 y=m[8], n=int(m[9]), k=int(m[10]), wpr=int(m[11]), start=int(m[12]),
                 blocks=int(m[13])) for m in CALL.finditer(text)]


def test_merged_source_calls_each_segment_with_its_own_shape():
    """Weights with different leading dims and offsets (column slices of wider matrices)."""
    g, _ = _siblings_graph(dt.bfloat16, [64, 16, 16], 64, w_cols=128, w_offsets=[0, 64, 8])
    bp = plan_graph(g, {})
    (step,) = bp.steps
    segs = _segments(step.source.text)
    assert [(s["w"], s["y"], s["n"], s["k"], s["ldw"], s["w_off"], s["x_off"]) for s in segs] == [
        ("w0", "y0", 64, 64, "128", "0", "0"), ("w1", "y1", 16, 64, "128", "64", "0"),
        ("w2", "y2", 16, 64, "128", "8", "0")]
    assert all(s["T"] == "__nv_bfloat16" for s in segs)
    starts = [0] + [s["end"] for s in segs[:-1]]
    assert [s["start"] for s in segs] == starts
    assert [s["end"] - s["start"] for s in segs] == [s["blocks"] for s in segs]
    assert step.source.meta["grid3"] == (segs[-1]["end"], 1, 1)
    assert launch_shape(step.source, {}, 132) == ((segs[-1]["end"], 1, 1), (256, 1, 1))
    # role order of the kernel's buffers: x, each weight, each output
    assert step.source.buffers == ["in0", "w0", "w1", "w2", "out0", "out1", "out2"]
    assert step.bufs == bp.inputs + bp.outputs


def test_gate_and_up_of_a_wide_row_unroll_per_segment():
    g, _ = _siblings_graph(dt.bfloat16, [128, 128], 2048)
    (step,) = plan_graph(g, {}).steps
    segs = _segments(step.source.text)
    assert [(s["n"], s["k"], s["ldw"]) for s in segs] == [(128, 2048, "2048")] * 2
    for s in segs:  # K == ITERS * WPR * 32 * V (V = 8 bf16 per 16 bytes) when unrolled
        assert s["iters"] == 0 or s["iters"] * s["wpr"] * 32 * 8 == 2048
        assert s["blocks"] == -(-128 // (8 // s["wpr"]))


def _covered(segs):
    """How often each (segment, row, warp part) is computed: a model of the merged kernel's
    branch chain (a block runs the first segment whose end it is below) and of lf_gemv_nk's
    loop (rows base + row_in for base = block * rpb, then + blocks * rpb while below N; WPR
    warps share a row), vectorised over the blocks."""
    blk = np.arange(segs[-1]["end"])
    taken = blk[:, None] < np.array([s["end"] for s in segs])[None, :]
    assert taken.any(axis=1).all()
    first = taken.argmax(axis=1)
    counts = [np.zeros((s["n"], s["wpr"]), np.int64) for s in segs]
    for i, s in enumerate(segs):
        block = blk[first == i] - s["start"]
        assert (block >= 0).all()
        n, wpr = s["n"], s["wpr"]
        rpb = 8 // wpr
        for warp in range(8):
            row_in, part = warp // wpr, warp % wpr
            base = block * rpb
            while (base < n).any():
                rows = base[base < n] + row_in
                np.add.at(counts[i], (rows[rows < n], part), 1)
                base = base + s["blocks"] * rpb
    return counts


@pytest.mark.parametrize("ns,k,d", [([64, 16, 16], 64, dt.bfloat16), ([128, 128], 2048, dt.bfloat16),
                                    ([5, 3, 1000, 7], 64, dt.float32), ([2048, 512, 512], 2048, dt.bfloat16)])
def test_every_row_of_every_segment_is_computed_once(ns, k, d):
    g, _ = _siblings_graph(d, ns, k)
    (step,) = plan_graph(g, {}).steps
    segs = _segments(step.source.text)
    assert [s["n"] for s in segs] == ns
    for c in _covered(segs):
        assert (c == 1).all()


def test_a_segment_of_more_rows_than_its_capped_grid_loops_over_them():
    """A segment's blocks are capped at 65535 (as a single GEMV's grid): its blocks loop."""
    big = NkSegment(dt.float32, "float", 0, 1, 600_000, 64, "0", "64", "0", 65535)
    small = NkSegment(dt.float32, "float", 0, 2, 100, 64, "0", "64", "0", 25)
    src = render_gemv_nk(CUDA, [small, big])
    segs = _segments(src.text)
    assert [(s["n"], s["blocks"], s["start"]) for s in segs] == [(100, 25, 0), (600_000, 65535, 25)]
    assert src.meta["grid3"] == (25 + 65535, 1, 1)
    for c in _covered(segs):
        assert (c == 1).all()


def test_a_single_gemv_keeps_its_kernel():
    g, _, _ = C.CASES["gemv_nk_bf16"]()
    (step,) = plan_graph(g, {}).steps
    assert step.label == "matmul (gemv nk)" and step.source.buffers == ["in0", "in1", "out"]
    assert "blockIdx.x, gridDim.x);" in step.source.text and "blk" not in step.source.text


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
def test_merged_modules_compile_with_nvcc():
    kernels = []
    for d in (dt.float32, dt.float16, dt.bfloat16):
        for ns, k in (([64, 16, 16], 64), ([128, 128], 2048), ([8] * 5, 64)):
            kernels += plan_graph(_siblings_graph(d, ns, k)[0], {}).kernels()
    kernels += plan_graph(_siblings_graph(dt.bfloat16, [64, 16], 64, rows=S)[0], {"s": 1}).kernels()
    nvcc_check(module_source(kernels))


# ---- the merged kernel on the CPU emulation of CUDA -----------------------------------------------
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("d,ns,k", [(dt.float32, [64, 16, 16], 64), (dt.float16, [64, 16, 16], 64),
                                    (dt.float32, [128, 128], 2048), (dt.float32, [24, 40], 64)])
def test_merged_kernel_on_the_cpu_emulation_matches_float64(tmp_path, d, ns, k):
    import cuda_model_emulation as emu

    g, ins = _siblings_graph(d, ns, k, w_cols=k + 64, w_offsets=[64 if i % 2 else 0 for i in range(len(ns))])
    bp = plan_graph(g, {})
    assert _labels(bp) == [f"matmul (gemv nk x{len(ns)})"]
    outs = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, ins, {})
    x = ins[0].astype(np.float64)
    tol = 2e-3 if d is dt.float16 else 2e-5
    for i, (o, w) in enumerate(zip(outs, ins[1:])):
        off = 64 if i % 2 else 0
        want = x @ w.astype(np.float64)[:, off:off + k].T
        np.testing.assert_allclose(o.astype(np.float64), want, rtol=tol, atol=tol * np.sqrt(k))


# ---- on the GPU ------------------------------------------------------------------------------------
GPU_CASES = [(ns, k, d) for ns, k in (((64, 16, 16), 64), ((128, 128), 2048))
             for d in ("float32", "bfloat16")]
GPU_TOL = {"float32": (1e-5, 1e-4), "bfloat16": (1e-2, 1e-2)}


def _gpu_inputs(ns, k, dname, seed):
    npd = dt.to_numpy(getattr(dt, dname))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32).astype(npd)
    ws = [rng.uniform(-1, 1, (n, k)).astype(np.float32).astype(npd) for n in ns]
    return x, ws


def _check_against_float64(outs, x, ws, dname):
    rtol, atol = GPU_TOL[dname]
    assert len(outs) == len(ws)
    for o, w in zip(outs, ws):
        want = x.astype(np.float64) @ w.astype(np.float64).T
        got = np.asarray(o)
        assert got.shape == want.shape and got.dtype == x.dtype, (got.shape, got.dtype)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize("ns,k,dname", GPU_CASES)
def test_sibling_gemvs_jitted_on_gpu_match_float64(ns, k, dname):
    x, ws = _gpu_inputs(ns, k, dname, 7)
    f = lf.jit(lambda x, ws: [x @ w.T for w in ws], backend="cuda")
    first = [np.asarray(o) for o in f(x, ws)]
    _check_against_float64(first, x, ws, dname)
    again = [np.asarray(o) for o in f(x, ws)]  # replayed: the same values
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.astype(np.float64), b.astype(np.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("ns,k,dname", GPU_CASES)
def test_merged_gemv_step_on_gpu_matches_float64(ns, k, dname):
    """The planned LLIR itself (no search): the merged kernel is what runs."""
    from luminal_fn.backends import get_backend

    cuda = get_backend("cuda")
    d = getattr(dt, dname)
    g, _ = _siblings_graph(d, list(ns), k)
    x, ws = _gpu_inputs(ns, k, dname, 8)
    exe = cuda.compile(g)
    args = [cuda.from_numpy(a) for a in [x] + ws]
    first = [cuda.to_numpy(o) for o in exe.run(args, {})]
    assert f"matmul (gemv nk x{len(ns)})" in exe.describe(), exe.describe()
    _check_against_float64(first, x, ws, dname)
    again = [cuda.to_numpy(o) for o in exe.run(args, {})]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.astype(np.float64), b.astype(np.float64))


def test_gemv_launch_shape_follows_the_decode_step():
    """Warps per row chosen for ~3 blocks per SM on 132 SMs: the launches that ended soonest
    inside the Llama-1B bf16 decode step (runs CC-CE, docs/benchmarks.md)."""
    from luminal_fn.backends.cuda.matmul import _warps_per_row

    bf16 = 8  # elements per 16-byte load
    assert _warps_per_row(2048, 2048, bf16, 132) == 2  # q, o: 512 blocks
    assert _warps_per_row(512, 2048, bf16, 132) == 8  # k, v: every warp on a row
    assert _warps_per_row(8192, 2048, bf16, 132) == 1  # gate, up: 1024 blocks
    assert _warps_per_row(2048, 8192, bf16, 132) == 2  # down: 16 loads a lane, 512 blocks
    assert _warps_per_row(128256, 2048, bf16, 132) == 1  # the LM head
    assert _warps_per_row(16384, 8192, bf16, 132) == 2  # 32 loads a lane with one warp: two warps


def test_warps_a_row_can_be_set_for_sweeps(monkeypatch):
    """LUMINAL_CUDA_GEMV_WPR sets every Linear GEMV's warps a row (capped by what K's 16-byte
    loads allow), so a sweep can time launch shapes the heuristic would not pick."""
    g, _ = _siblings_graph(dt.bfloat16, [2048, 512, 512], 2048)
    default = plan_graph(g, {}).steps[0].source.meta["wpr"]
    monkeypatch.setenv("LUMINAL_CUDA_GEMV_WPR", "1")
    (step,) = plan_graph(g, {}).steps
    assert step.source.meta["wpr"] == (1, 1, 1) != default
    assert sum(s["blocks"] for s in _segments(step.source.text)) == (2048 + 512 + 512) // 8
    g64, _ = _siblings_graph(dt.bfloat16, [64], 256)  # K = 256: two 16-byte loads a lane at most
    monkeypatch.setenv("LUMINAL_CUDA_GEMV_WPR", "8")
    assert plan_graph(g64, {}).steps[0].source.meta["wpr"] == 1
    monkeypatch.setenv("LUMINAL_CUDA_GEMV_WPR", "3")
    with pytest.raises(ValueError, match="LUMINAL_CUDA_GEMV_WPR='3'"):
        plan_graph(g, {})

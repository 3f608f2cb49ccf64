"""The decode GEMV over a weight stored (K, N) (``x @ W``, luminal_fn.nn.linear's layout):
lf_gemv_kn_to in kernels/gemv.cu, planned by backends/cuda/matmul.py, with lf_gemv_partials_to adding
the float partials of a K split; siblings that read the same x share launches (siblings.py).

On the CPU: the launch shape, the plan (its steps and scratch), the kernels run on the CPU
emulation of CUDA (tests/cuda_model_emulation.py plus kernels/gemv.cu) against float64 NumPy for
float32, float16 and bfloat16, split and unsplit, narrow and ragged shapes and a strided weight;
the module compiled by nvcc where it is installed. On the GPU (marked ``gpu``): the planned LLIR
and lf.jit against float64 NumPy, replayed.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.matmul import KN_MAX_SPLIT, KN_ROWS, kn_launch
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.expr import var
from luminal_fn.ir.view import View

import cuda_cases as C


def _kn_graph(d, k, n, ldw=None, col_offset=0):
    """LLIR: y = x (1, k) @ W[:, off:off + n], W stored (k, ldw) row-major."""
    ldw = ldw or n
    b = C.B("gemv_kn")
    x = b.input((1, k), d)
    w = b.input((k, ldw), d)
    vb = View((k, n), (ldw, 1), col_offset, None)
    b.output(b.custom("matmul", [b.c(x), (w, vb)], (1, n), d, m=1, n=n, k=k))
    ins = [C.rand((1, k), d, -1, 1), C.rand((k, ldw), d, -1, 1)]
    return b.g, ins


def test_launch_shape_fills_the_device_and_caps_the_split(monkeypatch):
    from luminal_fn.backends.cuda import matmul

    monkeypatch.setattr(matmul, "KN_ROWS", 8)  # chunks of 8 * 256 / LC rows
    monkeypatch.setattr(matmul, "KN_BLOCKS_PER_SM", 2)  # 264 blocks on 132 SMs
    monkeypatch.setattr(matmul, "KN_MIN_LANES", 32)  # 256-column stripes only (V = 8, bf16)
    assert kn_launch(8192, 2048, 8, 132) == (32, 8, 32)  # 264 blocks at most: 8 of 32 chunks, 4 each
    assert kn_launch(2048, 8192, 8, 132) == (8, 32, 32)  # narrow: 33 fit, 128 chunks shared 4 each
    assert kn_launch(8192, 64, 8, 132) == (32, 1, 32)  # one chunk of K: no split
    assert kn_launch(128256, 2048, 8, 132) == (501, 1, 32)  # the LM head fills the device unsplit
    monkeypatch.setattr(matmul, "KN_MIN_LANES", 4)  # stripes down to 4 lanes (64 bytes) a row
    assert kn_launch(8192, 2048, 8, 132) == (256, 1, 4)  # 256 stripes of 32 columns: no split
    assert kn_launch(2048, 8192, 8, 132) == (64, 4, 4)  # the fewest partials: 4 (not 32)
    assert kn_launch(128256, 2048, 8, 132) == (501, 1, 32)  # unsplit already: the widest stripe
    assert kn_launch(512, 256, 4, 132) == (16, 1, 8)  # float32: 8 lanes, one chunk of 256 rows
    monkeypatch.setattr(matmul, "KN_MIN_LANES", 8)  # the default: 128 bytes of a row at least
    assert kn_launch(8192, 2048, 4, 132) == (256, 1, 8)  # float32 2048x8192: no split
    assert kn_launch(8192, 2048, 8, 132) == (128, 2, 8)  # bf16: 2 partials (not 8)
    monkeypatch.setattr(matmul, "KN_BLOCKS_PER_SM", 32)
    monkeypatch.setattr(matmul, "KN_MIN_LANES", 32)
    assert kn_launch(256, 65536, 8, 132) == (1, KN_MAX_SPLIT, 32)  # the cap
    for floor in (32, 4):
        monkeypatch.setattr(matmul, "KN_MIN_LANES", floor)
        for n, k, v in ((512, 256, 4), (96, 200, 4), (4, 8, 4), (2048, 8192, 8), (8192, 2048, 8)):
            bx, s, lc = kn_launch(n, k, v, 132)
            chunks = -(-k // (8 * (32 // lc) * 8))
            assert lc >= floor and bx * lc * v >= n > (bx - 1) * lc * v
            assert 1 <= s <= min(KN_MAX_SPLIT, chunks)
            assert -(-chunks // s) * (s - 1) < chunks  # every block has rows to read


def test_a_split_gemv_plans_its_partials_and_their_sum():
    g, _ = _kn_graph(dt.bfloat16, 2048, 1024)
    bp = plan_graph(g, {})
    assert [s.label for s in bp.steps] == ["matmul (gemv kn)", "matmul (gemv partials)"]
    src = bp.steps[0].source
    S = src.meta["split"]
    assert src.meta["grid3"][:2] == (16, 8) and src.meta["lanes"] == 8  # 64-column stripes, 8 partials
    assert f"lf_gemv_kn_to<__nv_bfloat16, {KN_ROWS}, 8>" in src.text and f"part, 1024, 2048, {S}, " in src.text
    (scratch,) = [b for b in bp.steps[0].bufs if bp.bufs[b].kind == "scratch"]
    assert bp.bufs[scratch].dtype is dt.float32 and scratch in bp.steps[1].bufs
    # one chunk of K: no split, no scratch, one step
    g1, _ = _kn_graph(dt.float16, 8 * KN_ROWS, 8192)
    bp1 = plan_graph(g1, {})
    assert [s.label for s in bp1.steps] == ["matmul (gemv kn)"] and bp1.steps[0].source.meta["split"] == 1
    assert {bp1.bufs[b].kind for b in bp1.steps[0].bufs} <= {"input", "output", "arena"}


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed here")
def test_kn_modules_compile_with_nvcc():
    kernels = []
    for d in (dt.float32, dt.float16, dt.bfloat16):
        for k, n in ((2048, 1024), (64, 8192), (200, 96)):
            kernels += plan_graph(_kn_graph(d, k, n)[0], {}).kernels()
        for k in (2048, 8 * KN_ROWS):  # with the bias-and-relu epilogue, split and unsplit
            kernels += plan_graph(C.cheapest_llir(dense_relu, _dense_inputs(k, 1024, d)), {}).kernels()
        kernels += plan_graph(_kn_siblings_graph(d, 2048, [2048, 512, 64])[0], {}).kernels()  # merged
    nvcc_check(module_source(kernels))


# ---- on the CPU emulation of CUDA -----------------------------------------------------------------
EMU_CASES = [  # (dtype, K, N, ldw, column offset, KN_MIN_LANES, the lanes a row planned)
    (dt.float32, 256, 512, None, 0, 32, 32),  # split, 4 stripes
    (dt.float32, 256, 512, None, 0, 4, 8),  # 16 narrower stripes, no split
    (dt.bfloat16, 2048, 1024, None, 0, 32, 32),  # split, each block over several chunks (4 SMs emulated)
    (dt.bfloat16, 2048, 1024, None, 0, 16, 16),
    (dt.bfloat16, 2048, 1024, None, 0, 4, 4),  # 64-byte stripes, split in 4
    (dt.float16, 8 * KN_ROWS, 8192, None, 0, 4, 32),  # one chunk: no split
    (dt.float32, 200, 96, None, 0, 32, 32),  # K not a whole number of chunks, N not of a stripe
    (dt.float32, 200, 100, None, 0, 4, 8),  # the same with 32-column stripes, the last one ragged
    (dt.float32, 8192, 8, None, 0, 32, 32),  # the split at its cap, blocks looping over chunks
    (dt.float32, 8192, 8, None, 0, 4, 4),
    (dt.bfloat16, 520, 64, 128, 32, 4, 4),  # a strided weight read from column 32
    (dt.bfloat16, 520, 64, 128, 32, 32, 32),
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("d,k,n,ldw,off,floor,lanes", EMU_CASES)
def test_kn_gemv_on_the_cpu_emulation_matches_float64(tmp_path, monkeypatch, d, k, n, ldw, off, floor, lanes):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import matmul

    monkeypatch.setattr(matmul, "KN_MIN_LANES", floor)
    g, ins = _kn_graph(d, k, n, ldw, off)
    bp = plan_graph(g, {})
    assert bp.steps[0].label == "matmul (gemv kn)" and bp.steps[0].source.meta["lanes"] == lanes
    out = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, ins, {})[0]
    want = ins[0].astype(np.float64) @ ins[1].astype(np.float64)[:, off:off + n]
    got = out.astype(np.float64)
    if d is dt.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    else:  # the float sum rounded once to the storage type
        eps = 2.0 ** -8 if d is dt.bfloat16 else 2.0 ** -11
        assert np.all(np.abs(got - want) <= eps * np.abs(want) + 1e-5 * np.sqrt(k)), np.abs(got - want).max()


# ---- siblings: x @ W GEMVs that read the same x share launches (siblings.py) ---------------------
def _kn_siblings_graph(d, k, ns, rows=1):
    """LLIR: x (rows, k) times weights W_i stored (k, n_i) (a JAX-layout q/k/v), each y_i an output."""
    b = C.B("kn_siblings")
    x = b.input((rows, k), d)
    for n in ns:
        w = b.input((k, n), d)
        b.output(b.custom("matmul", [b.c(x), (w, View.contiguous((k, n)))], (rows, n), d, m=rows, n=n, k=k))
    r = 1 if not isinstance(rows, int) else rows
    return b.g, [C.rand((r, k), d, -1, 1)] + [C.rand((k, n), d, -1, 1) for n in ns]


KN_SIBLING_CASES = [  # (dtype, K, the N_i, the planned steps)
    (dt.bfloat16, 2048, [2048, 512, 512], ["matmul (gemv kn x3)", "matmul (gemv partials x3)"]),
    (dt.float32, 2048, [8192, 64], ["matmul (gemv kn x2)", "matmul (gemv partials)"]),  # 8192: no split
    (dt.float16, 64, [256, 128, 64, 32, 16], ["matmul (gemv kn x4)", "matmul (gemv kn)"]),  # 4 a launch at most
]


@pytest.mark.parametrize("d,k,ns,labels", KN_SIBLING_CASES)
def test_kn_siblings_share_launches(d, k, ns, labels):
    bp = plan_graph(_kn_siblings_graph(d, k, ns)[0], {})
    assert [s.label for s in bp.steps] == labels
    main = bp.steps[0].source
    splits = [kn_launch(n, k, 16 // d.itemsize, 132)[1] for n in ns[:4]]
    assert main.meta["split"] == tuple(splits)
    blocks = [kn_launch(n, k, 16 // d.itemsize, 132)[0] * S for n, S in zip(ns, splits)]
    assert main.meta["grid3"] == (sum(blocks), 1, 1)
    assert main.text.count("lf_gemv_kn_to<") == len(splits) and "blk % " not in main.text


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("d,k,ns,labels", KN_SIBLING_CASES[:2] + [(dt.bfloat16, 520, [64, 96], None)])
def test_kn_siblings_on_the_cpu_emulation_match_float64(tmp_path, d, k, ns, labels):
    import cuda_model_emulation as emu

    g, ins = _kn_siblings_graph(d, k, ns, rows=var("s"))  # a symbolic row count: the guard skips on 0
    bp = plan_graph(g, {"s": 1})
    assert bp.steps[0].label == f"matmul (gemv kn x{len(ns)})"
    outs = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, ins, {"s": 1})
    for out, w in zip(outs, ins[1:]):
        want = ins[0].astype(np.float64) @ w.astype(np.float64)
        got = out.astype(np.float64)
        eps = 1e-5 if d is dt.float32 else 2.0 ** -8
        assert np.all(np.abs(got - want) <= eps * np.abs(want) + 1e-5 * np.sqrt(k)), np.abs(got - want).max()


# ---- an elementwise epilogue (backends/cuda/epilogue.py) -----------------------------------------
def dense_relu(h, w, b):
    """A layer as a user writes it with luminal_fn.nn.linear: relu(h @ W + b), W stored (K, N)."""
    return lf.nn.relu(lf.nn.linear(h, w, b))


def _dense_inputs(k, n, d, seed=5):
    rng = np.random.default_rng(seed)
    npd = dt.to_numpy(d)
    return (rng.uniform(-1, 1, (1, k)).astype(np.float32).astype(npd),
            (rng.uniform(-1, 1, (k, n)) / np.sqrt(k)).astype(np.float32).astype(npd),
            rng.uniform(-0.5, 0.5, (n,)).astype(np.float32).astype(npd))


def _dense_want(h, w, b):
    npd = h.dtype
    p = (h.astype(np.float64) @ w.astype(np.float64)).astype(npd).astype(np.float64)  # stored as y
    return np.maximum(p + b.astype(np.float64), 0.0)


@pytest.mark.parametrize("k,labels", [
    (2048, ["matmul (gemv kn)", "matmul (gemv partials) + epilogue"]),
    (8 * KN_ROWS, ["matmul (gemv kn) + epilogue"])])
def test_bias_and_relu_are_computed_where_the_product_is_stored(k, labels):
    bp = plan_graph(C.cheapest_llir(dense_relu, _dense_inputs(k, 1024, dt.bfloat16)), {})
    assert [s.label for s in bp.steps] == labels
    last = bp.steps[-1].source
    assert "auto epilogue = [&](int n, float acc0)" in last.text and ", epilogue);" in last.text
    assert "lf_ld(lf_st<__nv_bfloat16>(acc0))" in last.text  # the product rounded as y is stored
    assert last.buffers[-2:] == ["e1", "out"]  # the bias (the fused node's input 1), then y


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("d,k,n", [(dt.float32, 2048, 1024), (dt.bfloat16, 2048, 512), (dt.float16, 32, 4096),
                                   (dt.float32, 200, 96)])
def test_bias_and_relu_epilogue_on_the_cpu_emulation_matches_float64(tmp_path, d, k, n):
    import cuda_model_emulation as emu

    args = _dense_inputs(k, n, d)
    bp = plan_graph(C.cheapest_llir(dense_relu, args), {})
    assert bp.steps[-1].label.endswith("+ epilogue")
    got = emu.run(emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path)), bp, list(args), {})[0]
    want = _dense_want(*args)
    assert got.shape == want.shape == (1, n)
    got = got.astype(np.float64)
    if d is dt.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:  # the product and the sum each rounded once to the storage type
        eps = 2.0 ** -8 if d is dt.bfloat16 else 2.0 ** -11
        assert np.all(np.abs(got - want) <= 2 * eps * (np.abs(want) + 0.5) + 1e-6), np.abs(got - want).max()
    assert (got >= 0).all() and (want == 0).any()  # the relu cut something


# ---- on the GPU ------------------------------------------------------------------------------------
GPU_SHAPES = [(2048, 8192), (8192, 2048), (200, 96), (64, 8192)]


@pytest.mark.gpu
@pytest.mark.parametrize("dname", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("k,n", GPU_SHAPES)
def test_kn_gemv_step_on_gpu_matches_float64(dname, k, n):
    """The planned LLIR itself (no search), then replayed: the same values."""
    from luminal_fn.backends import get_backend

    cuda = get_backend("cuda")
    d = getattr(dt, dname)
    g, ins = _kn_graph(d, k, n)
    exe = cuda.compile(g)
    args = [cuda.from_numpy(a) for a in ins]
    first = cuda.to_numpy(exe.run(args, {})[0]).astype(np.float64)
    assert "matmul (gemv kn)" in exe.describe(), exe.describe()
    want = ins[0].astype(np.float64) @ ins[1].astype(np.float64)
    tol = 1e-5 if d is dt.float32 else 1e-2
    np.testing.assert_allclose(first, want, rtol=tol, atol=tol * np.sqrt(k))
    for _ in range(2):
        np.testing.assert_array_equal(cuda.to_numpy(exe.run(args, {})[0]).astype(np.float64), first)


@pytest.mark.gpu
@pytest.mark.parametrize("dname", ["float32", "bfloat16"])
@pytest.mark.parametrize("k", [2048, 32])
def test_dense_relu_jitted_on_gpu_matches_float64(dname, k):
    args = _dense_inputs(k, 4096, getattr(dt, dname))
    f = lf.jit(dense_relu, backend="cuda")
    want = _dense_want(*args)
    tol = 1e-5 if dname == "float32" else 2e-2
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f(*args)).astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dname", ["float32", "bfloat16"])
def test_kn_gemv_jitted_on_gpu_matches_float64(dname):
    npd = dt.to_numpy(getattr(dt, dname))
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 2048)).astype(np.float32).astype(npd)
    w = rng.uniform(-1, 1, (2048, 8192)).astype(np.float32).astype(npd)
    f = lf.jit(lambda a, b: a @ b, backend="cuda")
    want = x.astype(np.float64) @ w.astype(np.float64)
    tol = 1e-5 if dname == "float32" else 1e-2
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f(x, w)).astype(np.float64), want, rtol=tol, atol=tol * np.sqrt(2048))


@pytest.mark.gpu
@pytest.mark.parametrize("d,k,ns,labels", KN_SIBLING_CASES)
def test_kn_siblings_step_on_gpu_match_float64(d, k, ns, labels):
    """Merged x @ W GEMVs (one launch for their blocks, one for their partials), then replayed."""
    from luminal_fn.backends import get_backend

    cuda = get_backend("cuda")
    g, ins = _kn_siblings_graph(d, k, ns)
    exe = cuda.compile(g)
    args = [cuda.from_numpy(a) for a in ins]
    firsts = [cuda.to_numpy(o).astype(np.float64) for o in exe.run(args, {})]
    assert labels[0] in exe.describe(), exe.describe()
    tol = 1e-5 if d is dt.float32 else 1e-2
    for got, w in zip(firsts, ins[1:]):
        want = ins[0].astype(np.float64) @ w.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(k))
    for _ in range(2):
        for got, out in zip(firsts, exe.run(args, {})):
            np.testing.assert_array_equal(cuda.to_numpy(out).astype(np.float64), got)

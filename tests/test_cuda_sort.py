"""The CUDA sort_rows / argsort_rows kernel (kernels/sort.cu, backends/cuda/sortkernels.py): a
bitonic network over unique (value word, position) keys for a row in shared memory up to 4096
keys, an LSD radix sort of those keys (a pass a byte of the word) beyond. Checked against
np.argsort(kind="stable") and JAX's descending order (tests/test_sort_kernels.py's references) on
the CPU emulation of CUDA (g++), compiled with nvcc where there is one, and on the GPU where
there is one.
"""
import shutil

import ml_dtypes
import numpy as np
import pytest
from test_sort_kernels import _both, _edge_rows, _kinds, _reference, _same

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor


def _llir(fn, x, axes=None):
    from luminal_fn.backends.cuda import KERNEL_KINDS

    traced = lf.jit(fn, dynamic_axes=axes).trace(x)
    return Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS).extract()


def _rows(dtype, shape, seed=0):
    """Edge rows (NaN, both zeros, ties, infinities, subnormals) in the first nine columns of a
    wider random row, so that long rows keep the hard cases."""
    rng = np.random.default_rng(seed)
    if dtype in (np.int32, np.bool_):
        x = _edge_rows(dtype, (shape[0], shape[1]))
        if dtype == np.int32:  # the extremes (INT32_MIN's descending key once overflowed on NumPy)
            x[0, :4] = [-2 ** 31, 2 ** 31 - 1, -2 ** 31, 0]
        return x
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., ::7] = 0.5  # ties across the whole row
    x[: min(6, shape[0]), :9] = _edge_rows(np.float32)[: min(6, shape[0])]
    if shape[1] > 100:
        x[:, 50::101] = -0.0
        x[0, 77::203] = np.nan
    if shape[1] > 4100:  # NaN of both signs, both zeros and ties on either side of the first tile's end
        x[:, 4090:4102] = [np.nan, -0.0, 0.0, 0.5, -np.nan, 0.0, -0.0, 0.5, np.nan, -0.0, 0.5, 0.0]
    return x.astype(dtype)


# (rows, N, dtype): in shared memory (N <= 4096, and one row of exactly a tile), and the radix
# sort (N > 4096): 4 passes (float32, int32 with its extremes), 2 (float16, bfloat16), 1 (bool);
# several rows, a last tile of one key, ten tiles
CASES = [(6, 9, np.float32), (6, 9, ml_dtypes.bfloat16), (6, 9, np.int32), (6, 9, np.bool_),
         (3, 1000, np.float32), (2, 4096, np.float32), (2, 5000, np.float32), (1, 9000, np.float16),
         (2, 8193, ml_dtypes.bfloat16), (3, 5000, np.int32), (2, 9000, np.bool_), (1, 40000, np.float32)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("rows,n,dtype", CASES)
def test_the_cuda_kernel_on_the_cpu_emulation(rows, n, dtype, descending, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    x = _rows(dtype, (rows, n))
    llir = _llir(_both(descending), x)
    assert sorted(k for k in _kinds(llir) if "sort" in k) == ["argsort_rows", "sort_rows"], llir.as_text()
    bp = plan_graph(llir, {})
    scratch = [b for b in bp.bufs if getattr(b, "kind", None) == "scratch"]
    lib = emu.build_with_hand(bp, ("sort.cu",), str(tmp_path))
    vals, idx = emu.run(lib, bp, [x], {})
    ref_vals, ref_idx = _reference(x, descending)
    assert _same(idx, ref_idx), f"{rows}x{n} {np.dtype(dtype).name}, scratch {scratch}"
    assert _same(vals, ref_vals)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
def test_dynamic_rows_and_length_on_the_cpu_emulation(tmp_path):
    """One plan at the bucket's largest dims (rows 4, length 6000: the scratch sized for 8192)
    runs a smaller call (3 rows of 700: the shared-memory path) and the largest."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    x = _rows(np.float32, (4, 6000), seed=4)
    llir = _llir(_both(False), x, {"a": {0: "r", 1: "n"}})
    bp = plan_graph(llir, {"r": 4, "n": 6000})
    lib = emu.build_with_hand(bp, ("sort.cu",), str(tmp_path))
    for r, n in ((3, 700), (4, 6000)):
        part = np.ascontiguousarray(x[:r, :n])
        vals, idx = emu.run(lib, bp, [part], {"r": r, "n": n})
        ref_vals, ref_idx = _reference(part, False)
        assert _same(idx, ref_idx) and _same(vals, ref_vals), (r, n)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
def test_dynamic_long_rows_on_the_cpu_emulation(tmp_path):
    """The radix sort planned for 3 rows of 9000 (three tiles) and run at fewer rows and shorter
    lengths (one tile and a key, one partial tile, a length the shared-memory path would take),
    descending."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    x = _rows(np.float32, (3, 9000), seed=5)
    llir = _llir(_both(True), x, {"a": {0: "r", 1: "n"}})
    bp = plan_graph(llir, {"r": 3, "n": 9000})
    lib = emu.build_with_hand(bp, ("sort.cu",), str(tmp_path))
    for r, n in ((2, 4097), (1, 3000), (3, 6001)):
        part = np.ascontiguousarray(x[:r, :n])
        vals, idx = emu.run(lib, bp, [part], {"r": r, "n": n})
        ref_vals, ref_idx = _reference(part, True)
        assert _same(idx, ref_idx) and _same(vals, ref_vals), (r, n)


def test_the_cuda_module_compiles():
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    kernels = []
    for rows, n, dtype in CASES:
        kernels += plan_graph(_llir(_both(True), _rows(dtype, (rows, n))), {}).kernels()
    # a launch an output up to 4096 keys; longer rows three (counts, places, scatter) a byte of
    # the element
    want = sum(2 * (1 if n <= 4096 else 3 * np.dtype(dtype).itemsize) for _, n, dtype in CASES)
    assert sum(k.kind.startswith(("sort_rows", "argsort_rows")) for k in kernels) == want
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plans were made, the module not compiled")
    nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("rows,n,dtype", CASES + [(1, 128256, np.float32), (64, 2048, ml_dtypes.bfloat16),
                                                  (1, 1_000_000, np.float32), (8, 70000, ml_dtypes.bfloat16)])
def test_the_cuda_kernel_on_the_gpu(rows, n, dtype, descending):
    cuda = get_backend("cuda")
    x = _rows(dtype, (rows, n), seed=n)
    exe = cuda.compile(_llir(_both(descending), x))
    ref_vals, ref_idx = _reference(x, descending)
    for _ in range(2):  # the second call replays the captured graph
        vals, idx = exe.run([cuda.from_numpy(x)], {})
        assert _same(cuda.to_numpy(idx), ref_idx)
        assert _same(cuda.to_numpy(vals), ref_vals)


# (rows, N, k): a row in one tile (the whole sort, its first k out), longer rows (each tile's k
# best, then a block a row over those: in one batch, and in several for 40 tiles x 200), and a k
# past TOP_K_MAX (the whole long sort, its first k out: one row and several)
TOP_K_CASES = [(6, 9, 4), (3, 1000, 1), (2, 5000, 50), (1, 9000, 1), (2, 160000, 200), (1, 12000, 2500),
               (3, 9000, 4097)]


def _top_k_plan(x, k, axes=None, dims=None):
    from luminal_fn.backends.cuda.executable import plan_graph

    llir = _llir(lambda a: lnp.top_k(a, k), x, axes)
    assert [kd for kd in _kinds(llir) if "sort" in kd or "top_k" in kd] == ["top_k_rows"], llir.as_text()
    return plan_graph(llir, dims or {})


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
@pytest.mark.parametrize("rows,n,k", TOP_K_CASES)
def test_top_k_on_the_cpu_emulation(rows, n, k, tmp_path):
    """top_k on CUDA: the top_k_rows kernel's positions and a gather of x by them; the values bit
    for bit x's own, in JAX's order (NaN first, ties by index)."""
    import cuda_model_emulation as emu

    x = _rows(np.float32, (rows, n), seed=n)
    bp = _top_k_plan(x, k)
    vals, idx = emu.run(emu.build(bp, str(tmp_path)), bp, [x], {})
    ref_vals, ref_idx = _reference(x, True)
    assert _same(idx, ref_idx[:, :k]) and _same(vals, np.ascontiguousarray(ref_vals[:, :k]))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
def test_top_k_of_dynamic_rows_on_the_cpu_emulation(tmp_path):
    """Planned for 3 rows of 20000 (five tiles each; top_k's axis itself is static), run at 3, 1
    and 2 rows."""
    import cuda_model_emulation as emu

    x = _rows(np.float32, (3, 20000), seed=3)
    bp = _top_k_plan(x, 30, {"a": {0: "r"}}, {"r": 3})
    lib = emu.build(bp, str(tmp_path))
    for r in (3, 1, 2):
        part = np.ascontiguousarray(x[:r])
        vals, idx = emu.run(lib, bp, [part], {"r": r})
        ref_vals, ref_idx = _reference(part, True)
        assert _same(idx, ref_idx[:, :30]) and _same(vals, np.ascontiguousarray(ref_vals[:, :30])), r


def test_the_top_k_module_compiles():
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    kernels = [kd for r, n, k in TOP_K_CASES for kd in _top_k_plan(_rows(np.float32, (r, n)), k).kernels()]
    assert {kd.kind for kd in kernels} >= {"top_k_rows", "top_k_rows_tiles", "top_k_rows_count", "top_k_rows_scan",
                                           "top_k_rows_scatter"}
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plans were made, the module not compiled")
    nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n,k", TOP_K_CASES + [(1, 128256, 50), (64, 32000, 40), (1, 1_000_000, 64)])
def test_top_k_on_the_gpu(rows, n, k):
    x = _rows(np.float32, (rows, n), seed=n)
    vals, idx = lf.jit(lambda a: lnp.top_k(a, k), backend="cuda")(x)
    ref_vals, ref_idx = _reference(x, True)
    assert _same(np.asarray(idx), ref_idx[:, :k]) and _same(np.asarray(vals), np.ascontiguousarray(ref_vals[:, :k]))

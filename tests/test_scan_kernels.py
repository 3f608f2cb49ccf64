"""cumsum / cumprod through the front end's named scan_rows kernel (ir/composites.py): the front
end's primitives (Hillis-Steele steps along a static axis, a masked n^2 triangle or 31 steps
along a dynamic one) are named the inclusive scan of the rows of x with the axis moved last.
Along a static axis the search times the kernel beside the primitives; along a dynamic one a
backend with the kernel runs nothing else. Kernels: NumPy's accumulate, mx.cumsum / cumprod,
kernels/scan.cu (CPU emulation here, the GPU where there is one).

References: np.cumsum / np.cumprod (float64 for float inputs: the kernels' orders of additions
differ from NumPy's sequential one), exact for int32 (which wraps).
"""
import importlib.util
import shutil

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

NUMPY = get_backend("numpy")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")


def _kinds(llir) -> list:
    return [n.attrs.get("name", n.op) for n in llir.live_nodes() if n.op not in ("Input", "Output", "Constant")]


def _data(dtype, shape, seed=0, op="sum"):
    rng = np.random.default_rng(seed)
    if dtype == np.int32:  # large enough that long sums wrap
        return rng.integers(-2 ** 30, 2 ** 30, shape).astype(np.int32)
    x = rng.uniform(0.5, 1.5, shape).astype(np.float32) * rng.choice([-1, 1], shape).astype(np.float32)
    if op in ("max", "min"):  # a trend (the extreme keeps changing), both zeros, a NaN in some rows
        x = x + np.linspace(0, 4 if op == "max" else -4, shape[-1], dtype=np.float32)
        x.reshape(-1, shape[-1])[:, ::7] = rng.choice([0.0, -0.0], x.reshape(-1, shape[-1])[:, ::7].shape)
        x.reshape(-1, shape[-1])[::3, shape[-1] * 2 // 3] = np.nan
    return x


def _check(got, x, op, axis):
    got = np.asarray(got)
    if op in ("max", "min"):  # exact: NumPy's maximum / minimum, NaN from the first NaN on
        ref = (np.maximum if op == "max" else np.minimum).accumulate(x, axis=axis)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, ref)
    elif x.dtype == np.int32:
        with np.errstate(over="ignore"):
            ref = (np.cumsum if op == "sum" else np.cumprod)(x, axis=axis, dtype=np.int32)
        assert got.dtype == np.int32 and np.array_equal(got, ref)
    else:
        ref = (np.cumsum if op == "sum" else np.cumprod)(x.astype(np.float64), axis=axis)
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.sqrt(x.shape[axis]))


FNS = {"sum": lambda axis: (lambda a: lnp.cumsum(a, axis=axis)),
       "prod": lambda axis: (lambda a: lnp.cumprod(a, axis=axis)),
       "max": lambda axis: (lambda a: lnp.cummax(a, axis=axis)),
       "min": lambda axis: (lambda a: lnp.cummin(a, axis=axis))}


def _kernel_llir(op, axis, x, axes=None, kinds=NUMPY.kernel_kinds):
    traced = lf.jit(FNS[op](axis), dynamic_axes=axes).trace(x)
    return Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=kinds).extract()


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_the_kernel_and_the_primitives_give_numpys_scan(op, dtype, axis):
    x = _data(dtype, (5, 6, 40), op=op)
    traced = lf.jit(FNS[op](axis)).trace(x)
    eg = build_egraph(traced.hlir)
    kernel = Extractor(eg, traced.hlir, kernel_kinds=NUMPY.kernel_kinds).extract()  # (the cheapest)
    prims = Extractor(eg, traced.hlir, kernel_kinds=frozenset()).extract()
    assert "scan_rows" in _kinds(kernel) and "scan_rows" not in _kinds(prims)
    for llir in (kernel, prims):
        _check(NUMPY.compile(llir).run([x], {})[0], x, op, axis)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_a_dynamic_axis_runs_only_the_kernel(op):
    """Along a dynamic axis the primitives are n^2 work (cumsum, cummax) or 31 steps (cumprod):
    the plan is the kernel alone, for every length of the bucket, and a long row is cheap."""
    x = _data(np.float32, (3, 50_000), seed=1, op=op)
    f = lf.jit(FNS[op](-1), dynamic_axes={"a": {1: "n"}}, backend="numpy")
    compiled = f.lower(x[:, :10]).compile()
    for n in (10, 3, 50_000):
        _check(compiled(x[:, :n]), x[:, :n], op, -1)
    text = compiled.as_text()
    assert "scan_rows" in text and "fused_reduce" not in text, text
    kinds = _kinds(_kernel_llir(op, -1, x[:, :10], {"a": {1: "n"}}))
    assert kinds.count("scan_rows") == 1 and "fused_reduce" not in kinds


@pytest.mark.parametrize("backend, bound", [("numpy", 5e-7), ("mlx", 5e-6),
                                            pytest.param("cuda", 2e-6, marks=pytest.mark.gpu)])
def test_a_vocabulary_row_sums_without_losing_its_small_terms(backend, bound):
    """The Llama sampler's scan: a 128256 row of probabilities relative to the largest (one of
    them 1, most far below a float32 ulp of the running total). Added in float32 one by one, the
    small terms round away: NumPy's own float32 cumsum (and mx.cumsum on the CPU) ends 3e-4 low.
    Both kernels add a long row in blocks, each block's prefixes plus the blocks before it (as
    CUDA's does across a block's threads and a row's parts)."""
    if backend == "mlx" and importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx is not installed: the MLX backend cannot run")
    rng = np.random.default_rng(4)
    row = np.sort(2 * rng.standard_normal(128256).astype(np.float32))[::-1]
    p = np.exp((row - row[0]) / np.float32(0.8)).astype(np.float32)[None]
    ref = np.cumsum(p.astype(np.float64), axis=-1)
    assert abs(np.cumsum(p, axis=-1)[0, -1] / ref[0, -1] - 1) > 1e-4  # (the float32 loop's loss)
    f = lf.jit(FNS["sum"](-1), dynamic_axes={"a": {1: "n"}}, backend=backend)
    compiled = f.lower(p).compile()
    for n in (128256, 1000, 300):  # (past one block, not a whole number of them, one block)
        got = np.asarray(compiled(p[:, :n]))
        assert np.max(np.abs(got / ref[:, :n] - 1)) < bound, n
    assert "scan_rows" in compiled.as_text()


def _genome_graphs(ex, n=24, seed=0):
    rng = np.random.default_rng(seed)
    genomes = [tuple(int(rng.integers(g.n_options)) for g in ex.genes) for _ in range(n)]
    return [ex.extract(g) for g in genomes]


def test_a_long_static_axis_runs_only_the_kernel():
    """Past SCAN_STEPS_SEARCHED_UP_TO (1024) the doubling steps are not offered: every genome
    extracts the scan_rows kernel, and the steps' e-classes carry no genes (a reader of the scan
    may not compute its last steps either). At 1024 the search still has both."""
    from luminal_fn.frontend.numpy._reduce import SCAN_STEPS_SEARCHED_UP_TO as UP_TO

    fn = lambda a: lnp.cumsum(a[-1]) * 2.0  # noqa: E731  (a reader that could fuse the scan's steps)
    x = _data(np.float32, (2, UP_TO + 1), seed=3)
    traced = lf.jit(fn).trace(x)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=NUMPY.kernel_kinds)
    assert len(ex.genes) <= 3, ex.genes
    for llir in _genome_graphs(ex):
        assert _kinds(llir).count("scan_rows") == 1 and len(_kinds(llir)) <= 3, _kinds(llir)
        got = NUMPY.compile(llir).run([x], {})[0]
        np.testing.assert_allclose(got, 2 * np.cumsum(x[-1].astype(np.float64)), rtol=1e-5, atol=1e-4)
    short = x[:, :UP_TO]
    traced = lf.jit(fn).trace(short)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=NUMPY.kernel_kinds)
    assert any("scan_rows" not in _kinds(g) for g in _genome_graphs(ex, 40))


def test_the_steps_extract_without_exploring_every_tree():
    """Without the kernel, 14 shifted adds (a static axis of 2^14) read through padded views:
    computing each level through the views above it doubles the trees a level, so a kernel tree
    stops view-inlining past fused_tree.MAX_VISITS nodes visited. Counted, not timed: the whole
    extraction visits a bounded number of tree nodes, and its result is still the scan."""
    from luminal_fn.optimize import fused_tree

    x = _data(np.float32, (1, 2 ** 14), seed=4)
    traced = lf.jit(lambda a: lnp.cumsum(a, axis=-1)).trace(x)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=frozenset())
    visits = [0]
    inner = fused_tree.FusedTreeBuilder._tree_node

    def counted(self, *a):
        visits[0] += 1
        return inner(self, *a)

    fused_tree.FusedTreeBuilder._tree_node = counted
    try:
        llir = ex.extract()
    finally:
        fused_tree.FusedTreeBuilder._tree_node = inner
    assert visits[0] <= 20_000, visits[0]  # (8004 with MAX_VISITS 1024; 85954, 6.6 s, without it)
    _check(NUMPY.compile(llir).run([x], {})[0], x, "sum", -1)


def test_prod_along_a_dynamic_axis_scans_once():
    x = _data(np.float32, (4, 30), seed=2)
    f = lf.jit(lambda a: lnp.prod(a, axis=1), dynamic_axes={"a": {1: "n"}})
    kinds = _kinds(_kernel_llir("prod", 1, x, {"a": {1: "n"}}))
    assert kinds.count("scan_rows") == 1
    for n in (30, 7, 1):
        np.testing.assert_allclose(np.asarray(f(x[:, :n])), np.prod(x[:, :n].astype(np.float64), axis=1), rtol=1e-5)


def test_eager_and_other_dtypes():
    x = _data(np.float32, (60_000,), seed=3)
    _check(lnp.cumsum(x), x, "sum", 0)  # (eager: the kernel, not 31 steps over constants)
    b = np.random.default_rng(4).random((3, 7)) < 0.5
    assert np.array_equal(np.asarray(lnp.cumsum(b, axis=1)), np.cumsum(b, axis=1))
    h = _data(np.float32, (3, 7)).astype(np.float16)
    got = lf.jit(lambda a: lnp.cumsum(a, axis=1))(h)
    assert np.asarray(got).dtype == np.cumsum(h, axis=1).dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), np.cumsum(h.astype(np.float32), axis=1), rtol=2e-3)


@pytest.mark.skipif(importlib.util.find_spec("mlx") is None, reason="mlx is not installed: the MLX backend cannot run")
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_mlx_scan_kernel(op, dtype):
    mlx = get_backend("mlx")
    x = _data(dtype, (4, 300), op=op)
    llir = _kernel_llir(op, -1, x, {"a": {1: "n"}}, mlx.kernel_kinds)
    assert "scan_rows" in _kinds(llir)
    _check(mlx.to_numpy(mlx.compile(llir).run([mlx.from_numpy(x)], {"n": 300})[0]), x, op, -1)


# (rows, N, dtype, op): within one chunk, several chunks (4 * 256 elements each), a row of
# exactly one chunk, and few rows long enough to split into parts (two launches)
CUDA_CASES = [(3, 9, np.float32, "sum"), (3, 9, np.int32, "prod"), (2, 5000, np.float32, "sum"),
              (2, 5000, np.int32, "sum"), (4, 1024, np.float32, "prod"), (1, 3000, np.int32, "prod"),
              (2, 40000, np.float32, "sum"), (1, 20000, np.int32, "prod"), (3, 17000, np.int32, "sum"),
              (3, 9, np.float32, "max"), (4, 5000, np.int32, "max"), (2, 40000, np.float32, "max"),
              (3, 9, np.int32, "min"), (2, 40000, np.float32, "min")]


def _scan_labels(rows, n):
    from luminal_fn.backends.cuda.rowkernels import scan_parts

    split = scan_parts(rows, n, 132) > 1
    return ["scan_rows (part totals)", "scan_rows"] if split else ["scan_rows"]


@needs_gxx
@pytest.mark.parametrize("rows,n,dtype,op", CUDA_CASES)
def test_the_cuda_kernel_on_the_cpu_emulation(rows, n, dtype, op, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    x = _data(dtype, (rows, n), seed=n, op=op)
    bp = plan_graph(_kernel_llir(op, -1, x, {"a": {1: "n"}}, KERNEL_KINDS), {"n": n})
    assert [s.label for s in bp.steps if "scan" in s.label] == _scan_labels(rows, n)
    lib = emu.build(bp, str(tmp_path))
    for m in sorted({1, 2, n // 3, n - 1, n}):  # (a split row's parts at the bucket's n: some empty at m)
        part = np.ascontiguousarray(x[:, :m])
        (got,) = emu.run(lib, bp, [part], {"n": m})
        _check(got, part, op, -1)


def test_the_cuda_module_compiles():
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    kernels = []
    for rows, n, dtype, op in CUDA_CASES:
        kernels += plan_graph(_kernel_llir(op, -1, _data(dtype, (rows, n)), {"a": {1: "n"}}, KERNEL_KINDS),
                              {"n": n}).kernels()
    assert sum(k.kind == "scan_rows" for k in kernels) == len(CUDA_CASES)
    assert sum(k.kind == "scan_rows_totals" for k in kernels) == sum(len(_scan_labels(r, n)) - 1 for r, n, _, _ in CUDA_CASES)
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plans were made, the module not compiled")
    nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n,dtype,op", CUDA_CASES + [(1, 128256, np.float32, "sum"), (512, 1024, np.float32, "sum")])
def test_the_cuda_kernel_on_the_gpu(rows, n, dtype, op):
    from luminal_fn.backends.cuda import KERNEL_KINDS

    cuda = get_backend("cuda")
    x = _data(dtype, (rows, n), seed=n, op=op)
    exe = cuda.compile(_kernel_llir(op, -1, x, {"a": {1: "n"}}, KERNEL_KINDS))
    for _ in range(2):  # the second call replays the captured graph
        (got,) = exe.run([cuda.from_numpy(x)], {"n": n})
        _check(cuda.to_numpy(got), x, op, -1)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_scans_of_short_axes(n):
    """A scan of one element computes nothing (its result is its input): no kernel is named for
    it, eagerly or under jit; zero and two elements still scan."""
    x = _data(np.float32, (3, n), seed=n)
    for fn, ref in ((lnp.cumsum, np.cumsum), (lnp.cumprod, np.cumprod)):
        np.testing.assert_allclose(np.asarray(fn(x, axis=1)), ref(x, axis=1), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(lf.jit(lambda a: fn(a, axis=1))(x)), ref(x, axis=1), rtol=1e-6)
    g = lf.jit(lambda a: lnp.cumsum(a, axis=1)).trace(x).hlir
    assert all(c.node not in [i for i, _ in c.inputs] for c in g.composites)
    assert np.asarray(lnp.vander(np.arange(1.0, 4.0, dtype=np.float32), 1)).tolist() == [[1.0], [1.0], [1.0]]

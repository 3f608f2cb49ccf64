"""Argmax in one kernel (optimize/rules/specialize_argmax.egg, "argmax_rows"): the rule fires on
exactly what luminal_fn.numpy's argmax traces over the last axis of 1-D and 2-D float arrays (and
argmin, which is argmax of the negation), and on nothing else; the NumPy semantics and the CUDA
kernel (kernels/argmax.cu, on the CPU emulation and, where there is one, on the GPU) give
np.argmax's answer: the first maximum, a NaN before everything, +0 and -0 equal.
"""
import shutil

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

NUMPY = get_backend("numpy")


def _kinds(llir) -> list:
    return [n.attrs.get("name", n.op) for n in llir.live_nodes()
            if n.op not in ("Input", "Output", "Constant")]


def _extractor(fn, x, axes=None, kinds=NUMPY.kernel_kinds):
    traced = lf.jit(fn, dynamic_axes=axes).trace(x)
    return Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=kinds)


def _rows(rng, shape, case: str) -> np.ndarray:
    """Float32 data whose argmax each case makes hard in its own way (along the last axis)."""
    x = rng.standard_normal(shape).astype(np.float32)
    last = x.reshape(-1, shape[-1])
    n = shape[-1]
    if case == "nan":  # two NaNs: the first wins, wherever the maximum is
        last[:, [n // 2, n // 5]] = np.nan
    elif case == "ties":
        last[...] = 0.5
    elif case == "inf":
        last[:, [n // 3, n - 1]] = np.inf
    elif case == "all_ninf":
        last[...] = -np.inf
    elif case == "zeros":  # -0 and +0 compare equal: the first zero
        last[...] = -1.0
        last[:, n // 2:] = 0.0
        last[:, n // 4] = -0.0
    return x


CASES_DATA = ("random", "nan", "ties", "inf", "all_ninf", "zeros")

# (fn, example shape, dynamic axes, NumPy reference)
FIRES = {
    "1d": (lambda a: lnp.argmax(a), (40,), None, lambda a: np.argmax(a)),
    "last_row": (lambda a: lnp.argmax(a[-1]).astype(lnp.int32).reshape(1), (3, 50), {"a": {0: "s"}},
                 lambda a: np.argmax(a[-1]).reshape(1)),
    "rows": (lambda a: lnp.argmax(a, axis=-1), (3, 100), None, lambda a: np.argmax(a, axis=-1)),
    "rows_dynamic": (lambda a: lnp.argmax(a, axis=1), (4, 30), {"a": {0: "r"}}, lambda a: np.argmax(a, axis=1)),
    "argmin_rows": (lambda a: lnp.argmin(a, axis=-1), (4, 30), None, lambda a: np.argmin(a, axis=-1)),
    "bf16_rows": (lambda a: lnp.argmax(a.astype(lnp.bfloat16), axis=-1), (3, 70), None,
                  lambda a: np.argmax(a.astype(ml_dtypes.bfloat16).astype(np.float32), axis=-1)),
}


def _dims(axes, x) -> dict:
    return {} if axes is None else {next(iter(axes["a"].values())): x.shape[next(iter(axes["a"]))]}


@pytest.mark.parametrize("name", sorted(FIRES))
def test_the_cheapest_graph_is_one_argmax_kernel(name):
    fn, shape, axes, ref = FIRES[name]
    rng = np.random.default_rng(len(name))
    ex = _extractor(fn, np.zeros(shape, np.float32), axes)
    llir = ex.extract()
    assert _kinds(llir).count("argmax_rows") == 1 and "fused_reduce" not in _kinds(llir), llir.as_text()
    exe = NUMPY.compile(llir)
    for case in CASES_DATA:
        rows = shape[0] + 3 if axes else shape[0]  # (a new value of the dynamic dim)
        x = _rows(rng, (rows,) + shape[1:], case)
        (got,) = exe.run([x], _dims(axes, x))
        want = ref(x)
        assert got.shape == np.shape(want) and got.dtype == np.int32, (got.shape, got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=case)


NEAR_MISSES = {
    "axis0": (lambda a: lnp.argmax(a, axis=0), np.zeros((5, 6), np.float32)),
    "3d_rows": (lambda a: lnp.argmax(a, axis=-1), np.zeros((2, 3, 8), np.float32)),
    "ints": (lambda a: lnp.argmax(a), np.zeros(12, np.int32)),
    # the first maximum without the NaN rule: another function, kept as written
    "no_nan_rule": (lambda a: lnp.min(lnp.where(a == lnp.max(a), lnp.arange(10), 10)), np.zeros(10, np.float32)),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_misses_keep_their_reductions(name):
    fn, x = NEAR_MISSES[name]
    ex = _extractor(fn, x)
    assert all("argmax_rows" not in _kinds(ex.extract(ex.space().genome_at(i)))
               for i in range(min(ex.space().count(), 16)))


@pytest.mark.parametrize("name", ["last_row", "rows"])
def test_random_genomes_compute_numpy_argmax(name):
    fn, shape, axes, ref = FIRES[name]
    rng = np.random.default_rng(3)
    ex = _extractor(fn, np.zeros(shape, np.float32), axes)
    space = ex.space()
    for i in rng.choice(space.count(), size=min(space.count(), 12), replace=False):
        exe = NUMPY.compile(ex.extract(space.genome_at(int(i))))
        for case in ("random", "nan", "ties"):
            x = _rows(rng, shape, case)
            np.testing.assert_array_equal(exe.run([x], _dims(axes, x))[0], ref(x), err_msg=case)


def test_blocks_a_row():
    from luminal_fn.backends.cuda.rowkernels import argmax_parts

    assert argmax_parts(1, 128256, 132) == 126  # Llama's vocabulary: one pass of 4 a thread
    assert argmax_parts(1, 1000, 132) == 1
    assert argmax_parts(3, 40000, 132) == 40
    assert argmax_parts(1, 10 ** 7, 132) == 264  # two blocks an SM at most
    assert argmax_parts(200, 10 ** 6, 132) == 1  # the rows fill the device


# (fn, example shape, dynamic axes and the bucket's largest dims, reference) on the CUDA plan
EMULATED = {
    "last_row_vocab": (FIRES["last_row"][0], (2, 128256), {"a": {0: "s"}}, {"s": 4}, FIRES["last_row"][3]),
    "last_row_small": (FIRES["last_row"][0], (2, 7), {"a": {0: "s"}}, {"s": 4}, FIRES["last_row"][3]),
    "rows_split": (FIRES["rows"][0], (3, 5000), {"a": {0: "r"}}, {"r": 5}, FIRES["rows"][3]),
    "rows_many": (FIRES["rows"][0], (160, 33), None, {}, FIRES["rows"][3]),
    "bf16_rows": FIRES["bf16_rows"][:3] + ({},) + FIRES["bf16_rows"][3:],
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
@pytest.mark.parametrize("name", sorted(EMULATED))
def test_the_cuda_kernel_on_the_cpu_emulation(name, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    fn, shape, axes, bucket, ref = EMULATED[name]
    ex = _extractor(fn, np.zeros(shape, np.float32), axes, KERNEL_KINDS)
    bp = plan_graph(ex.extract(), bucket)
    (step,) = [s for s in bp.steps if s.label == "argmax_rows"]
    lib = emu.build_with_hand(bp, ("argmax.cu",), str(tmp_path))
    rng = np.random.default_rng(shape[-1])
    for case in CASES_DATA:
        for lead in sorted({1, *bucket.values()}) if bucket else (shape[0],):
            x = _rows(rng, (lead,) + shape[1:], case)
            (got,) = emu.run(lib, bp, [x], _dims(axes, x))
            np.testing.assert_array_equal(got, ref(x), err_msg=f"{case}, {lead} rows, "
                                          f"{step.source.meta['parts']} blocks a row")


def test_the_cuda_module_compiles():
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    kernels = []
    for name in ("last_row_vocab", "rows_many", "bf16_rows"):
        fn, shape, axes, bucket, _ = EMULATED[name]
        kernels += plan_graph(_extractor(fn, np.zeros(shape, np.float32), axes, KERNEL_KINDS).extract(),
                              bucket).kernels()
    assert sum(k.kind == "argmax_rows" for k in kernels) == 3
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plans were made, the module not compiled")
    nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 128256), (3, 40000), (64, 1000), (5, 20), (200, 33)])
def test_the_cuda_kernel_on_the_gpu(shape):
    """The argmax_rows kernel itself (the cheapest genome, not whatever the search keeps), on
    every hard case, for rows and for the last row read through a view."""
    cuda = get_backend("cuda")
    rng = np.random.default_rng(shape[1])
    for fn, ref in (FIRES["rows"][::3], FIRES["last_row"][::3]):
        llir = _extractor(fn, np.zeros(shape, np.float32), None, cuda.kernel_kinds).extract()
        assert "argmax_rows" in _kinds(llir)
        exe = cuda.compile(llir)
        for case in CASES_DATA:
            for _ in range(2):  # the second call replays the captured graph
                x = _rows(rng, shape, case)
                (got,) = exe.run([cuda.from_numpy(x)], {})
                np.testing.assert_array_equal(cuda.to_numpy(got), ref(x), err_msg=case)

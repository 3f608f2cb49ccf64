"""arctan2 / arcsin / arccos on CUDA as the kernels the front end names (ir/composites.py;
backends/cuda/mathkernels.py): one rendered elementwise kernel calling atan2f / asinf / acosf
over its operands' views, offered beside the ~40 primitives. Planned and checked on the CPU
emulation of CUDA (g++, glibc's functions: the views, broadcasts, masks, half operands and
dynamic dims are what it checks), compiled with nvcc where there is one, and run on the GPU
where there is one (CUDA's documented bounds: atan2f 3 ulp, asinf and acosf 2).
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

from math_kernel_checks import F32, UNIT, _pairs, check, kernel_names as _kernels, truth

FNS = {"arctan2": lnp.arctan2, "arcsin": lnp.arcsin, "arccos": lnp.arccos}
DEVICE_ULP = {"arctan2": 3, "arcsin": 2, "arccos": 2}  # the CUDA Math API's maximum errors
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
YS, XS = _pairs(25)


def _llir(fn, args, axes=None, drop=()):
    from luminal_fn.backends.cuda import KERNEL_KINDS

    traced = lf.jit(fn, dynamic_axes=axes).trace(*args)
    return Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS - set(drop)).extract()


def _inputs(llir, args) -> list:
    """The arguments in the graph's input order (Python scalars are inputs too, as float32)."""
    arrays = [a if isinstance(a, np.ndarray) and a.dtype != np.float64 else np.asarray(a, F32) for a in args]
    return [np.ascontiguousarray(arrays[llir.nodes[i].attrs["index"]]) for i in llir.inputs]


# name -> (function, arguments, the arguments the check reads (float32), the kernel it names)
CASES = {
    "pairs": (lnp.arctan2, (YS, XS), (YS, XS), "arctan2"),
    "column_by_row": (lnp.arctan2, (YS[:, :1], XS[:1, :]), (YS[:, :1], XS[:1, :]), "arctan2"),
    "0d_x": (lnp.arctan2, (YS, F32(-0.0)), (YS, F32(-0.0)), "arctan2"),
    "0d_y": (lnp.arctan2, (F32(np.nan), XS), (F32(np.nan), XS), "arctan2"),
    "python_float": (lnp.arctan2, (YS, 2.5), (YS, F32(2.5)), "arctan2"),
    "row": (lnp.arctan2, (YS[0], XS), (YS[0], XS), "arctan2"),
    "views": (lambda a, b: lnp.arctan2(a.T[::2], b[::-1, 1::2].T), (YS[:24, :24], XS[:24, :24]),
              (YS[:24, :24].T[::2], XS[:24, :24][::-1, 1::2].T), "arctan2"),
    "padded": (lambda a, b: lnp.arctan2(lnp.pad(a, ((1, 1), (0, 0))), b), (YS[:23], XS),
               (np.pad(YS[:23], ((1, 1), (0, 0))), XS), "arctan2"),
    "odd_length": (lnp.arctan2, (YS.reshape(-1)[:623], XS.reshape(-1)[:623]),
                   (YS.reshape(-1)[:623], XS.reshape(-1)[:623]), "arctan2"),
    "arcsin": (lnp.arcsin, (UNIT,), (UNIT,), "arcsin"),
    "arccos": (lnp.arccos, (UNIT,), (UNIT,), "arccos"),
    "arccos_strided": (lambda a: lnp.arccos(a[::3]), (UNIT,), (UNIT[::3],), "arccos"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_plan_runs_one_kernel_calling_the_function(name):
    from luminal_fn.backends.cuda.executable import plan_graph

    fn, args, _, kind = CASES[name]
    llir = _llir(fn, args)
    assert _kernels(llir).count(kind) == 1 and not set(FNS) - {kind} & set(_kernels(llir)), llir.as_text()
    assert kind not in _kernels(_llir(fn, args, drop=FNS))  # the primitives, the search's other option
    steps = [s for s in plan_graph(llir, {}).steps if s.label == kind]
    assert len(steps) == 1
    call = {"arctan2": "atan2f(", "arcsin": "asinf(", "arccos": "acosf("}[kind]
    assert call in steps[0].source.text and steps[0].source.kind == "ew"


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_on_the_cpu_emulation(name, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    fn, args, ref_args, kind = CASES[name]
    llir = _llir(fn, args)
    bp = plan_graph(llir, {})
    (got,) = emu.run(emu.build(bp, str(tmp_path)), bp, _inputs(llir, args), {})
    check(got, kind, *ref_args, ulp=1)


@needs_gxx
def test_dynamic_dims_on_the_cpu_emulation(tmp_path):
    """One plan at the bucket's largest rows (25) runs a smaller call."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    llir = _llir(lnp.arctan2, (YS, XS), {"y": {0: "r"}, "x": {0: "r"}})
    assert "arctan2" in _kernels(llir)
    bp = plan_graph(llir, {"r": 25})
    lib = emu.build(bp, str(tmp_path))
    for r in (25, 7, 1):
        y, x = np.ascontiguousarray(YS[:r]), np.ascontiguousarray(XS[:r])
        (got,) = emu.run(lib, bp, _inputs(llir, (y, x)), {"r": r})
        check(got, "arctan2", y, x, ulp=1)


@needs_gxx
def test_half_operands_and_neighbours_on_the_cpu_emulation(tmp_path):
    """bfloat16 and float16 operands read as they lie (the kernel loads them to float), and the
    kernel between two fused kernels (its operand scaled, its result shifted)."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    rng = np.random.default_rng(4)
    y = rng.standard_normal((6, 16)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal(16).astype(np.float16)
    y[0, :4], x[:4] = [0.0, -0.0, np.inf, -1.0], [-0.0, 1.0, np.inf, 0.0]
    llir = _llir(lnp.arctan2, (y, x))
    bp = plan_graph(llir, {})
    (got,) = emu.run(emu.build(bp, str(tmp_path)), bp, _inputs(llir, (y, x)), {})
    check(got, "arctan2", y.astype(F32), x.astype(F32), ulp=1)
    # lnp.arcsin of bfloat16 widens it first: the kernel reads the bfloat16 input itself (widening.py)
    llir = _llir(lnp.arcsin, (y,))
    bp = plan_graph(llir, {})
    assert [s.label for s in bp.steps] == ["arcsin", "fused"], bp.describe()  # (the result rounded)
    (got,) = emu.run(emu.build(bp, str(tmp_path)), bp, _inputs(llir, (y,)), {})
    with np.errstate(all="ignore"):
        want = np.arcsin(y.astype(F32)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])

    fn = lambda a, b: lnp.arctan2(a * 2.0, b) + 1.0  # noqa: E731
    llir = _llir(fn, (YS, XS))
    assert _kernels(llir).count("arctan2") == 1
    bp = plan_graph(llir, {})
    (got,) = emu.run(emu.build(bp, str(tmp_path)), bp, _inputs(llir, (YS, XS)), {})
    with np.errstate(all="ignore"):
        want = truth("arctan2", YS * F32(2), XS) + F32(1)
    np.testing.assert_allclose(got, want, rtol=0, atol=4.8e-7)  # (an ulp of |atan2| + 1 <= 4.15)


def test_the_cuda_module_compiles():
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    kernels = [k for fn, args, _, _ in CASES.values() for k in plan_graph(_llir(fn, args), {}).kernels()]
    h = np.ones((4, 8), ml_dtypes.bfloat16), np.ones(8, np.float16)
    kernels += plan_graph(_llir(lnp.arctan2, h), {}).kernels()
    kernels += plan_graph(_llir(lnp.arcsin, h[:1]), {}).kernels()
    assert sum("atan2f(" in k.text for k in kernels) >= 10
    if not nvcc_available():
        pytest.skip("nvcc is not installed: the plans were made, the module not compiled")
    nvcc_check(module_source(kernels))


# ---- on the GPU --------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_on_the_gpu(name):
    cuda = get_backend("cuda")
    fn, args, ref_args, kind = CASES[name]
    llir = _llir(fn, args)
    exe = cuda.compile(llir)
    ins = [cuda.from_numpy(a) for a in _inputs(llir, args)]
    for _ in range(2):  # the second call replays the captured graph
        (got,) = exe.run(ins, {})
        check(cuda.to_numpy(got), kind, *ref_args, ulp=DEVICE_ULP[kind], numpy_ulp=DEVICE_ULP[kind] + 3)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", sorted(FNS))
def test_random_operands_on_the_gpu(kind):
    rng = np.random.default_rng(8)
    if kind == "arctan2":
        args = tuple((rng.standard_normal(1 << 16) * np.exp(rng.uniform(-40, 40, 1 << 16))).astype(F32)
                     for _ in range(2))
    else:
        args = (rng.uniform(-1, 1, 1 << 16).astype(F32),)
    cuda = get_backend("cuda")
    llir = _llir(FNS[kind], args)
    (got,) = cuda.compile(llir).run([cuda.from_numpy(a) for a in _inputs(llir, args)], {})
    check(cuda.to_numpy(got), kind, *args, ulp=DEVICE_ULP[kind], numpy_ulp=DEVICE_ULP[kind] + 3)


@pytest.mark.gpu
def test_the_search_picks_the_kernel_on_the_gpu():
    """Timed against the primitives (~40 launches, or fewer fused ones), the one kernel wins."""
    y, x = _pairs(512)
    f = lf.jit(lnp.arctan2, backend="cuda", search={"progress": False})
    text = f.trace(y, x).lower().compile().as_text()
    assert "CustomOp[name=arctan2" in text, text
    check(np.asarray(f(y, x)), "arctan2", y, x, ulp=DEVICE_ULP["arctan2"], numpy_ulp=DEVICE_ULP["arctan2"] + 3)

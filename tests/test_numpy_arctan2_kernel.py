"""lnp.arctan2 names the arctan2 kernel (ir/composites.py) beside its ~40 primitives; the NumPy
backend's is one np.arctan2 (backends/numpy/math_kernels.py) with NumPy's bits, at any size and
through broadcasting. lnp.arcsin / lnp.arccos (arctan2 of a computed square root) name their
own kernels (np.arcsin / np.arccos). Backends without them keep the primitives, which agree to
float32 rounding.
"""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

NUMPY = get_backend("numpy")
F32 = np.float32
EDGES = F32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 1e-45, -1e-45, 1e-40, -3e-39,
             1.1754944e-38, 1e-20, -1e-25, 2.0 ** -61, 2.0 ** -60, -2.0 ** -59, 1e30, -3e38, 3.4028235e38, 7.0])
VALUES = np.concatenate([EDGES, np.int32([0x7FC00001, -4194303]).view(F32)])  # NaN payloads, signed


def _pairs(n):
    """Every (y, x) pairing of the values, repeated to fill n x n."""
    y, x = np.meshgrid(VALUES, VALUES, indexing="ij")
    return np.resize(y.reshape(-1), n * n).reshape(n, n), np.resize(x.reshape(-1), n * n).reshape(n, n)


def _plans(fn, *args):
    """(the cheapest LLIR with the NumPy kernels, the same without arctan2)."""
    traced = lf.jit(fn).trace(*args)
    eg = build_egraph(traced.hlir)
    return (Extractor(eg, traced.hlir, kernel_kinds=NUMPY.kernel_kinds).extract(),
            Extractor(eg, traced.hlir, kernel_kinds=NUMPY.kernel_kinds - {"arctan2"}).extract())


def _kernels(llir) -> list:
    return [n.attrs.get("name") for n in llir.live_nodes() if n.op == "CustomOp"]


def _bits(a):
    a = np.asarray(a)
    return a.view(np.int32 if a.dtype == F32 else np.int64)


@pytest.mark.parametrize("n", [4, 25, 200])
def test_arctan2_is_np_arctan2_bit_for_bit(n):
    y, x = _pairs(n)
    with_kernel, prims = _plans(lnp.arctan2, y, x)
    assert _kernels(with_kernel) == ["arctan2"], with_kernel.as_text()
    assert "arctan2" not in _kernels(prims)
    with np.errstate(all="ignore"):
        want = np.arctan2(y, x)
        got = NUMPY.compile(with_kernel).run([y, x], {})[0]
        assert np.array_equal(_bits(got), _bits(want))
        by_prims = NUMPY.compile(prims).run([y, x], {})[0]  # (the definition, as CUDA runs it)
    np.testing.assert_allclose(by_prims, want, rtol=3e-7, atol=0)
    assert np.array_equal(np.signbit(by_prims[want == 0]), np.signbit(want[want == 0]))


@pytest.mark.parametrize("y, x", [
    (_pairs(25)[0][:, :1], _pairs(25)[1][:1, :]),  # (n, 1) against (1, n)
    (_pairs(25)[0], F32(-0.0)), (F32(np.nan), _pairs(25)[1]), (_pairs(25)[0], 2.5),
])
def test_broadcast_and_0d_sides(y, x):
    """NumPy's bits, but for which NaN's payload comes out of two NaNs: np.arctan2's own loops
    differ there between broadcast and whole operands."""
    llir = _plans(lnp.arctan2, y, x)[0]
    assert "arctan2" in _kernels(llir)
    args = [np.ascontiguousarray(a, F32) for a in (y, x)]  # (run takes backend buffers: C order)
    inputs = [args[n.attrs["index"]] for n in sorted((llir.nodes[i] for i in llir.inputs), key=lambda n: n.attrs["index"])]
    with np.errstate(all="ignore"):
        got = NUMPY.compile(llir).run(inputs, {})[0]
        want = np.arctan2(*args)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(_bits(got)[~nan], _bits(want)[~nan])


def test_arcsin_and_arccos_are_numpys():
    """Each names its own kernel (np.arcsin / np.arccos: NumPy's bits, edges included), not the
    arctan2 inside it; the primitives agree to 5e-7."""
    s = np.concatenate([np.sin(np.linspace(-4, 4, 300, dtype=F32)), VALUES])
    for fn, ref, name in ((lnp.arcsin, np.arcsin, "arcsin"), (lnp.arccos, np.arccos, "arccos")):
        traced = lf.jit(fn).trace(s)
        eg = build_egraph(traced.hlir)
        plans = [Extractor(eg, traced.hlir, kernel_kinds=NUMPY.kernel_kinds - set(drop)).extract()
                 for drop in ((), (name,))]
        assert _kernels(plans[0]) == [name] and not {"arctan2", name} & set(_kernels(plans[1]))
        with np.errstate(all="ignore"):
            want = ref(s)
            got = [NUMPY.compile(p).run([s], {})[0] for p in plans]
        jitted = np.asarray(lf.jit(fn, backend="numpy")(s))
        assert np.array_equal(_bits(got[0]), _bits(want)) and np.array_equal(_bits(jitted), _bits(want))
        for g in got[1:]:
            np.testing.assert_allclose(g, want, rtol=0, atol=5e-7)


def test_other_backends_keep_the_primitives():
    y, x = _pairs(6)
    traced = lf.jit(lnp.arctan2).trace(y, x)
    cuda_kinds = frozenset({"argmax_rows", "sort_rows", "scan_rows"})  # (the kernel is not among them)
    llir = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=cuda_kinds).extract()
    assert "arctan2" not in _kernels(llir)

"""arctan2 / arcsin / arccos on MLX as the kernels the front end names (ir/composites.py;
backends/mlx/math_kernels.py: mx.arctan2 / mx.arcsin / mx.arccos): offered beside the ~40
primitives and picked by the search, within an ulp of the correctly rounded value (NumPy's
float32 loops: within three), C's values at the edges, through broadcasts, views and half dtypes.
Run on MLX's CPU build; Metal's own functions are not checked here."""
import ml_dtypes
import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")

import luminal_fn as lf  # noqa: E402
import luminal_fn.numpy as lnp  # noqa: E402
from luminal_fn.backends import get_backend  # noqa: E402
from luminal_fn.ir import dtypes as dt  # noqa: E402
from luminal_fn.ir.view import View  # noqa: E402
from luminal_fn.optimize.egraph import build_egraph  # noqa: E402
from luminal_fn.optimize.extract import Extractor  # noqa: E402

from cuda_cases import B  # noqa: E402
from math_kernel_checks import F32, UNIT, _pairs, check, kernel_names as _kernels, ulps  # noqa: E402

MLX = get_backend("mlx")
FNS = {"arctan2": lnp.arctan2, "arcsin": lnp.arcsin, "arccos": lnp.arccos}


def _plans(fn, *args):
    """(the cheapest LLIR with MLX's kernels, the same without the math kernels: the primitives)."""
    traced = lf.jit(fn).trace(*args)
    eg = build_egraph(traced.hlir)
    kinds = MLX.kernel_kinds
    return (Extractor(eg, traced.hlir, kernel_kinds=kinds).extract(),
            Extractor(eg, traced.hlir, kernel_kinds=kinds - set(FNS)).extract())


def _run(llir, args):
    """The LLIR on MLX, its inputs taken from ``args`` by their index."""
    arrays = [np.asarray(a, F32) for a in args]
    ins = [MLX.from_numpy(np.ascontiguousarray(arrays[llir.nodes[i].attrs["index"]])) for i in llir.inputs]
    return MLX.to_numpy(MLX.compile(llir, {"metal": False}).run(ins, {})[0])


def test_mlx_lists_and_registers_the_math_kinds():
    from luminal_fn.backends.mlx.math_kernels import MATH_KINDS
    from luminal_fn.backends.mlx.ops import OPS

    assert set(MATH_KINDS) == set(FNS) <= MLX.kernel_kinds
    assert all(k in OPS for k in MATH_KINDS)


@pytest.mark.parametrize("n", [4, 25, 200])
def test_arctan2_kernel_every_edge_pair(n):
    y, x = _pairs(n)
    with_kernel, prims = _plans(lnp.arctan2, y, x)
    assert _kernels(with_kernel) == ["arctan2"], with_kernel.as_text()
    assert "arctan2" not in _kernels(prims)
    got = _run(with_kernel, [y, x])
    check(got, "arctan2", y, x, ulp=1)
    if n == 25:  # the primitives, the other option of the search, agree on MLX too
        by_prims = _run(prims, [y, x])
        want = np.arctan2(y, x)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(by_prims), nan)
        np.testing.assert_allclose(by_prims[~nan], want[~nan], rtol=3e-7, atol=0)


@pytest.mark.parametrize("name", ["arcsin", "arccos"])
def test_arcsin_and_arccos_kernels(name):
    """Each names its own kernel, not the arctan2 inside it (ir/composites.py)."""
    with_kernel, prims = _plans(FNS[name], UNIT)
    assert _kernels(with_kernel) == [name] and not set(FNS) & set(_kernels(prims))
    check(_run(with_kernel, [UNIT]), name, UNIT, ulp=1)
    np.testing.assert_allclose(_run(prims, [UNIT]), np.asarray(FNS[name](UNIT), F32), rtol=0, atol=5e-7,
                               equal_nan=True)


def test_random_operands_within_an_ulp():
    rng = np.random.default_rng(3)
    y = (rng.standard_normal(4096) * np.exp(rng.uniform(-40, 40, 4096))).astype(F32)
    x = (rng.standard_normal(4096) * np.exp(rng.uniform(-40, 40, 4096))).astype(F32)
    check(_run(_plans(lnp.arctan2, y, x)[0], [y, x]), "arctan2", y, x, ulp=1)
    s = rng.uniform(-1, 1, 4096).astype(F32)
    for name in ("arcsin", "arccos"):
        check(_run(_plans(FNS[name], s)[0], [s]), name, s, ulp=1)


YS, XS = _pairs(25)


@pytest.mark.parametrize("y, x", [
    (YS[:, :1], XS[:1, :]),  # (n, 1) against (1, n)
    (YS, F32(-0.0)), (F32(np.nan), XS), (YS, 2.5), (YS[0], XS),  # 0-d sides, a Python float, a row
])
def test_broadcast_and_0d_sides(y, x):
    llir = _plans(lnp.arctan2, y, x)[0]
    assert "arctan2" in _kernels(llir), llir.as_text()
    check(_run(llir, [y, x]), "arctan2", F32(y), F32(x), ulp=1)


def test_views_the_kernel_reads():
    """Transposed and strided reads of the operands (the kernel's inputs are views)."""
    y, x = _pairs(24)
    fn = lambda a, b: lnp.arctan2(a.T[::2], b[::-1, 1::2].T)  # noqa: E731
    llir = _plans(fn, y, x)[0]
    assert "arctan2" in _kernels(llir)
    check(_run(llir, [y, x]), "arctan2", y.T[::2], x[::-1, 1::2].T, ulp=1)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("name", ["arctan2", "arcsin"])
def test_half_operands_compute_in_float32(dtype, name):
    """lnp computes half operands in float32 and rounds the result once (the kernel's node is
    float32): the result is NumPy's float32 value rounded to the half type, within one unit."""
    rng = np.random.default_rng(5)
    args = [rng.uniform(-1, 1, (6, 16)).astype(dtype) for _ in range(2 if name == "arctan2" else 1)]
    args[0][0, :4] = [0.0, -0.0, 1.0, -1.0]
    got = np.asarray(lf.jit(FNS[name], backend="mlx")(*args))
    assert got.dtype == dtype
    want = {"arctan2": np.arctan2, "arcsin": np.arcsin}[name](*(a.astype(F32) for a in args))
    assert (ulps(got.astype(F32), want.astype(dtype).astype(F32)) <= 1 << (23 - np.finfo(dtype).nmant)).all()
    assert np.array_equal(np.signbit(got[0, :2]), np.signbit(want[0, :2]))


def test_a_half_node_is_computed_in_float32_and_rounded_once():
    """A kernel node of float16 reading float16 and bfloat16 views (a graph built directly: the
    front end's own nodes are float32)."""
    rng = np.random.default_rng(6)
    b = B()
    y, x = b.input((8, 6), dt.float16), b.input((6,), dt.bfloat16)
    node = b.custom("arctan2", [(y, View((6, 8), (1, 6), 0, None)), (x, View((6, 8), (1, 0), 0, None))],
                    (6, 8), dt.float16, params=())
    b.output(node)
    yv = rng.standard_normal((8, 6)).astype(np.float16)
    xv = rng.standard_normal(6).astype(ml_dtypes.bfloat16)
    got = MLX.to_numpy(MLX.compile(b.g, {"metal": False}).run([MLX.from_numpy(yv), MLX.from_numpy(xv)], {})[0])
    assert got.dtype == np.float16
    want = np.arctan2(yv.T.astype(F32), xv.astype(F32)[:, None]).astype(np.float16)
    assert (np.abs(got.astype(F32) - want.astype(F32)) <= np.spacing(np.abs(want)).astype(F32)).all()


def test_the_search_picks_the_kernel():
    """Timed against the primitives on MLX, the kernel (one call where they are ~40 passes) wins;
    the compiled function runs it."""
    y, x = _pairs(200)
    f = lf.jit(lnp.arctan2, backend="mlx", search={"progress": False})
    compiled = f.trace(y, x).lower().compile()
    assert "CustomOp[name=arctan2" in compiled.as_text() and "arctan2:mlx" in compiled.as_text(), compiled.as_text()
    check(np.asarray(f(y, x)), "arctan2", y, x, ulp=1)
    s = np.resize(UNIT, (200, 200))
    g = lf.jit(lnp.arcsin, backend="mlx", search={"progress": False})
    assert "arcsin:mlx" in g.trace(s).lower().compile().as_text()

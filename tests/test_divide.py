"""Division bit for bit against NumPy's divide, on every backend and every extraction.

HLIR has no division: ``a / b`` is traced ``a * recip(b)``, and ``a / 3.0`` folds to a product
with the float32 literal 1/3. Either evaluated as written rounds twice (``41 * (1 / 41)`` is
0.99999994). Backends evaluate a product with a reciprocal as one division (ir.llir.quotient),
the extraction never stores a reciprocal for a later product (optimize/extract.py), and a
folded 1/c keeps its divisor (ir/passes.py). Each case here differs from NumPy in about a
quarter of its elements when any of those is missing.
"""
from __future__ import annotations

import importlib.util
import random
import shutil

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

R = np.random.default_rng(23)
X = (R.standard_normal((48, 96)) * 100).astype(np.float32)
Y = R.standard_normal((48, 96)).astype(np.float32)
ROW = R.standard_normal(48).astype(np.float32)
COL = R.standard_normal(96).astype(np.float32)

# name -> (function of (x, y, row, col), the NumPy reference)
CASES = {
    "x / y": (lambda x, y, r, c: x / y, lambda x, y, r, c: x / y),
    "x / x": (lambda x, y, r, c: x / x, lambda x, y, r, c: x / x),
    "x / row broadcast": (lambda x, y, r, c: x / r[:, None], lambda x, y, r, c: x / r[:, None]),
    "x / col broadcast": (lambda x, y, r, c: x / c, lambda x, y, r, c: x / c),
    "x / 3": (lambda x, y, r, c: x / 3.0, lambda x, y, r, c: x / np.float32(3.0)),
    "7 / x": (lambda x, y, r, c: 7.0 / x, lambda x, y, r, c: np.float32(7.0) / x),
    "(x / y) + 1": (lambda x, y, r, c: x / y + 1.0, lambda x, y, r, c: x / y + np.float32(1.0)),
    "x / y, both kept": (lambda x, y, r, c: (x / y, (x / y) * y),
                         lambda x, y, r, c: (x / y, (x / y) * y)),
    "lnp.divide, true_divide": (lambda x, y, r, c: (lnp.divide(x, y), lnp.true_divide(y, x)),
                                lambda x, y, r, c: (np.divide(x, y), np.true_divide(y, x))),
    # (no y * y + 1 here: CUDA contracts it into one fused multiply-add, NumPy rounds twice)
    "x / (|y| + 1)": (lambda x, y, r, c: x / (lnp.abs(y) + 1.0), lambda x, y, r, c: x / (np.abs(y) + np.float32(1.0))),
}


def _mlx_or_skip():
    if importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx is not installed: the MLX backend cannot run here")


def _backends():
    return ["numpy", "mlx", pytest.param("cuda", marks=pytest.mark.gpu)]


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    bad = int(np.sum(got.view(np.uint8).reshape(got.size, -1) != want.view(np.uint8).reshape(want.size, -1)))
    assert bad == 0, f"{what}: {bad} bytes differ from NumPy's divide (first: " \
                     f"{got.reshape(-1)[np.argmax(got.reshape(-1) != want.reshape(-1))]!r})"


def _as_tuple(v):
    return v if isinstance(v, tuple) else (v,)


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", sorted(CASES))
def test_division_matches_numpy_bit_for_bit(backend, name):
    if backend == "mlx":
        _mlx_or_skip()
    fn, ref = CASES[name]
    got = lf.jit(fn, backend=backend)(X, Y, ROW, COL)
    for k, (g, w) in enumerate(zip(_as_tuple(got), _as_tuple(ref(X, Y, ROW, COL)))):
        _same(g, w, f"{name} on {backend}, output {k}")


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_division_rounds_once(backend, dtype):
    """NumPy and ml_dtypes divide half types in float32 and round once; so does a kernel."""
    if backend == "mlx":
        _mlx_or_skip()
    x, y = X.astype(dtype), (Y + 3).astype(dtype)
    _same(lf.jit(lambda a, b: a / b, backend=backend)(x, y), x / y, f"{np.dtype(dtype).name} x / y on {backend}")


@pytest.mark.parametrize("backend", _backends())
def test_a_subnormal_divisor_gives_numpys_finite_quotient(backend):
    """1 / 1e-39 overflows float32; NumPy's 1e-30 / 1e-39 is a finite 1e9, and so is ours."""
    if backend == "mlx":
        _mlx_or_skip()
    x = np.array([1e-30, -2e-31, 0.0, 5e-39], np.float32)
    d = np.array([1e-39, 3e-39, 1e-39, 1e-39], np.float32)
    got = lf.jit(lambda a, b: a / b, backend=backend)(x, d)
    _same(got, x / d, f"subnormal divisors on {backend}")


def test_integer_true_division_is_float32_division():
    a = R.integers(-1000, 1000, 500).astype(np.int32)
    b = R.integers(1, 97, 500).astype(np.int32)
    _same(lf.jit(lambda p, q: p / q)(a, b), a.astype(np.float32) / b.astype(np.float32), "int32 / int32")


@pytest.mark.parametrize("name", ["x / row broadcast", "x / 3", "7 / x", "(x / y) + 1", "x / y, both kept",
                                  "x / (|y| + 1)"])
def test_every_genome_divides_once(name):
    """No extraction of the e-graph multiplies by a stored reciprocal: every genome gives NumPy's
    quotient exactly (the search may pick any of them)."""
    fn, ref = CASES[name]
    traced = lf.jit(fn).trace(X, Y, ROW, COL)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    be = get_backend("numpy")
    want = _as_tuple(ref(X, Y, ROW, COL))
    rng = random.Random(5)
    genomes = {ex.generic_genome(), (0,) * len(ex.genes)}
    genomes |= {tuple(rng.randrange(g.n_options) for g in ex.genes) for _ in range(30)}
    for genome in sorted(genomes):
        outs = be.compile(ex.extract(genome)).run([X, Y, ROW, COL], {})
        for k, (g, w) in enumerate(zip(outs, want)):
            _same(g, w, f"{name} genome {genome}, output {k}")


@pytest.mark.skipif(shutil.which("g++") is None,
                    reason="g++ is not installed: the CUDA emulation compiles kernels with it")
def test_rendered_cuda_kernels_divide(tmp_path):
    """The CUDA renderer's kernels (compiled for the CPU by tests/cuda_model_emulation.py)
    write ``a / b``: bit for bit NumPy's, for random genomes too."""
    from test_cuda_emulated_plans import _emulate_all, _genomes

    cases = []
    for name in ("x / row broadcast", "x / 3", "(x / y) + 1", "7 / x"):
        fn, _ = CASES[name]
        traced = lf.jit(fn).trace(X, Y, ROW, COL)
        ex = Extractor(build_egraph(traced.hlir), traced.hlir)
        cases += [(f"{name} genome {g}", ex.extract(g), {}, [([X, Y, ROW, COL], {})], ())
                  for g in _genomes(ex, 4, 3)]
    plans = _emulate_all(cases, tmp_path, tol=0.0)
    assert any(" / " in s.source.text for bp in plans for s in bp.steps)

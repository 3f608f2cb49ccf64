"""Float32 sums over long axes, against float64 NumPy. Added one by one in float32, small terms
after large ones round away: mx.sum on MLX's CPU device, and NumPy along an axis that is not its
inner loop, summed the Llama sampler's 128256-long row of probabilities 3e-4 low. The NumPy
backend (backends/numpy/sums.py) and MLX's CPU device (backends/mlx/ops.py float_sum) sum such
an axis in blocks. Sums, means, softmax and RMS-norm rows."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

needs_mlx = pytest.mark.skipif(importlib.util.find_spec("mlx") is None,
                               reason="mlx is not installed: the MLX backend cannot run")
BACKENDS = ["numpy", pytest.param("mlx", marks=needs_mlx), pytest.param("cuda", marks=pytest.mark.gpu)]


def _probabilities(n=128256, seed=4):
    rng = np.random.default_rng(seed)
    row = np.sort(2 * rng.standard_normal(n).astype(np.float32))[::-1]
    return np.exp((row - row[0]) / np.float32(0.8)).astype(np.float32)


def _rel(got, want):
    return float(np.max(np.abs(np.asarray(got, np.float64) / want - 1)))


def test_numpy_alone_loses_the_small_terms_along_a_leading_axis():
    p = _probabilities()
    x = np.stack([p, p], axis=1)
    assert _rel(x.sum(axis=0), p.astype(np.float64).sum()) > 1e-4
    assert _rel(p.sum(), p.astype(np.float64).sum()) < 1e-6  # (the inner loop: pairwise)


@needs_mlx
def test_mx_sum_alone_loses_the_small_terms():
    import mlx.core as mx

    p = _probabilities()
    if mx.default_device().type != mx.cpu:
        pytest.skip("Metal's reductions add in a tree: the loss is the CPU device's")
    assert _rel(np.array(mx.sum(mx.array(p))), p.astype(np.float64).sum()) > 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [128256, 128256 - 77, 1025])  # (whole blocks, a partial one, just past the bound)
def test_sum_and_mean_of_a_long_row(backend, n):
    p = _probabilities()[:n]
    f = lf.jit(lambda a: (lnp.sum(a), lnp.mean(a)), backend=backend, search=lf.SearchOptions(limit=4))
    total, mean = f(p)
    want = p.astype(np.float64).sum()
    assert _rel(total, want) < 2e-6 and _rel(mean, want / n) < 2e-6


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [128256, 128256 - 77])
def test_sum_along_a_long_leading_axis(backend, n):
    p = _probabilities()[:n]
    x = np.stack([p, p[::-1], 2 * p], axis=1)  # (n, 3): the long axis first
    search = lf.SearchOptions(limit=8)
    got = lf.jit(lambda a: lnp.sum(a, axis=0), backend=backend, search=search)(x)
    assert _rel(got, x.astype(np.float64).sum(axis=0)) < 2e-6
    # a fused reduction (the product computed in the reduction's kernel), the mean of a middle axis
    got = lf.jit(lambda a: lnp.mean(a * 2.0, axis=0), backend=backend, search=search)(x)
    assert _rel(got, 2 * x.astype(np.float64).mean(axis=0)) < 2e-6
    y = np.ascontiguousarray(np.broadcast_to(x[None], (2,) + x.shape))
    got = lf.jit(lambda a: lnp.sum(a, axis=1), backend=backend, search=search)(y)
    assert _rel(got, y.astype(np.float64).sum(axis=1)) < 2e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_and_rms_norm_of_vocabulary_rows(backend):
    logits = np.log(np.stack([_probabilities(), _probabilities(seed=5)])) * np.float32(0.8)
    got = lf.jit(lambda a: lf.nn.softmax(a), backend=backend, search=lf.SearchOptions(limit=8))(logits)
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    big = want > 1e-6  # (relative error of the normalisation, where a probability is not tiny)
    assert np.max(np.abs(np.asarray(got)[big] / want[big] - 1)) < 5e-6
    w = np.ones(logits.shape[-1], np.float32)
    got = lf.jit(lambda a, w: lf.nn.rms_norm(a, w), backend=backend, search=lf.SearchOptions(limit=8))(logits, w)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    assert np.max(np.abs(np.asarray(got) - want)) < 5e-5

"""Float sums over long axes on MLX's CPU device (backends/mlx/ops.py float_sum): its loop adds
one by one in float32, so small terms after large ones round away (mx.sum of the Llama sampler's
128256-long row of probabilities came out 3e-4 low). Sums, means, softmax and RMS-norm rows over
long axes are checked against float64 NumPy."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mlx") is None,
                                reason="mlx is not installed: the MLX backend cannot run")


def _probabilities(n=128256, seed=4):
    rng = np.random.default_rng(seed)
    row = np.sort(2 * rng.standard_normal(n).astype(np.float32))[::-1]
    return np.exp((row - row[0]) / np.float32(0.8)).astype(np.float32)


def _rel(got, want):
    return float(np.max(np.abs(np.asarray(got, np.float64) / want - 1)))


def test_mx_sum_alone_loses_the_small_terms():
    import mlx.core as mx

    p = _probabilities()
    if mx.default_device().type != mx.cpu:
        pytest.skip("Metal's reductions add in a tree: the loss is the CPU device's")
    assert _rel(np.array(mx.sum(mx.array(p))), p.astype(np.float64).sum()) > 1e-4


@pytest.mark.parametrize("n", [128256, 128256 - 77, 1025])  # (whole blocks, a partial one, just past the bound)
def test_sum_and_mean_of_a_long_row(n):
    p = _probabilities()[:n]
    f = lf.jit(lambda a: (lnp.sum(a), lnp.mean(a)), backend="mlx", search=lf.SearchOptions(limit=4))
    total, mean = f(p)
    want = p.astype(np.float64).sum()
    assert _rel(total, want) < 2e-6 and _rel(mean, want / n) < 2e-6


def test_sum_along_a_long_leading_axis():
    p = _probabilities()
    x = np.stack([p, p[::-1], 2 * p], axis=1)  # (128256, 3): the long axis first
    got = lf.jit(lambda a: lnp.sum(a, axis=0), backend="mlx", search=lf.SearchOptions(limit=4))(x)
    assert _rel(got, x.astype(np.float64).sum(axis=0)) < 2e-6


def test_softmax_and_rms_norm_of_vocabulary_rows():
    logits = np.log(np.stack([_probabilities(), _probabilities(seed=5)])) * np.float32(0.8)
    got = lf.jit(lambda a: lf.nn.softmax(a), backend="mlx", search=lf.SearchOptions(limit=8))(logits)
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    big = want > 1e-6  # (relative error of the normalisation, where a probability is not tiny)
    assert np.max(np.abs(np.asarray(got)[big] / want[big] - 1)) < 5e-6
    w = np.ones(logits.shape[-1], np.float32)
    got = lf.jit(lambda a, w: lf.nn.rms_norm(a, w), backend="mlx", search=lf.SearchOptions(limit=8))(logits, w)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    assert np.max(np.abs(np.asarray(got) - want)) < 5e-5

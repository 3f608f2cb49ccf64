"""jit surface (dynamic dims, static args, donation, stages) and nn helpers vs float64 NumPy."""
import math

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(3)


def f32(*s):
    return R.standard_normal(s).astype(np.float32)


def test_dynamic_dim_reuses_trace_and_compile():
    f = lf.jit(lambda x: lnp.mean(x, axis=0) + x.shape[0], dynamic_axes={"x": {0: "s"}})
    for n in (3, 5, 9):
        x = f32(n, 4)
        np.testing.assert_allclose(np.asarray(f(x)), x.mean(0) + n, rtol=1e-5)
    assert f.trace_count == 1 and f.compile_count == 1


def test_static_argnums_retrace_and_unhashable_error():
    f = lf.jit(lambda x, k: x * k, static_argnums=1)
    x = f32(3)
    np.testing.assert_allclose(np.asarray(f(x, 2)), x * 2)
    np.testing.assert_allclose(np.asarray(f(x, 3)), x * 3)
    assert f.trace_count == 2
    with pytest.raises(TypeError, match="not hashable"):
        f(x, [1])


def test_donated_array_cannot_be_read():
    f = lf.jit(lambda c, x: c.at[0].set(x), donate_argnums=0)
    c = lf.device_put(np.zeros((2, 3), np.float32))
    out = f(c, np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(out)[0], 1.0)
    with pytest.raises(lf.DonationError):
        np.asarray(c)


def test_numpy_inputs_are_not_mutated():
    x = f32(4, 2)
    keep = x.copy()
    lf.jit(lambda x: x.at[1].set(5.0))(x)
    np.testing.assert_array_equal(x, keep)


def test_stages_text():
    f = lf.jit(lambda x: lnp.exp(x).sum())
    x = f32(3)
    traced = f.trace(x)
    assert "Exp2" in traced.as_text() and "SumReduce" in traced.as_text()
    compiled = traced.lower().compile()
    np.testing.assert_allclose(np.asarray(compiled(x)), np.exp(x).sum(), rtol=1e-5)


def _ref_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_nn_activations_and_norms():
    x = f32(4, 6).astype(np.float64)
    w, b = f32(6), f32(6)
    cases = [
        (lambda x: lf.nn.relu(x), lambda x: np.maximum(x, 0)),
        (lambda x: lf.nn.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
        (lambda x: lf.nn.silu(x), lambda x: x / (1 + np.exp(-x))),
        (lambda x: lf.nn.softmax(x, axis=-1), _ref_softmax),
        (lambda x: lf.nn.log_softmax(x), lambda x: np.log(_ref_softmax(x))),
        (lambda x: lf.nn.layer_norm(x, w, b), lambda x: (x - x.mean(-1, keepdims=True))
         / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b),
        (lambda x: lf.nn.rms_norm(x, w, eps=1e-6), lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w),
        (lambda x: lf.nn.gelu(x), lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    ]
    for lf_fn, ref in cases:
        got = np.asarray(lf.jit(lf_fn)(x.astype(np.float32)))
        np.testing.assert_allclose(got, ref(x), rtol=1e-4, atol=1e-5)


def test_linear_embedding_rows():
    x, w, b = f32(3, 5), f32(5, 4), f32(4)
    np.testing.assert_allclose(np.asarray(lf.jit(lf.nn.linear)(x, w, b)), x @ w + b, rtol=1e-5, atol=1e-5)
    table = f32(10, 3)
    ids = np.array([3, 0, 9], np.int32)
    np.testing.assert_array_equal(np.asarray(lf.jit(lf.nn.embedding)(table, ids)), table[ids])
    rows = f32(2, 3)
    idx = np.array([1, 7], np.int32)
    want = table.copy()
    want[idx] = rows
    np.testing.assert_array_equal(np.asarray(lf.jit(lf.nn.scatter_rows)(table, idx, rows)), want)
    np.testing.assert_array_equal(np.asarray(lf.jit(lf.nn.gather_rows)(table, idx)), table[idx])


def test_conv2d_seed_case():
    # the seed's case: 2x3x3 input, 3x3 kernel, padding 1
    x = f32(1, 2, 3, 3)
    w = f32(4, 2, 3, 3)
    b = f32(4)
    got = np.asarray(lf.jit(lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1))(x, w, b))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 4, 3, 3))
    for o in range(4):
        for i in range(3):
            for j in range(3):
                want[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * w[o]).sum() + b[o]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_group_norm_and_upsample_seed_cases():
    x = f32(1, 4, 2, 3)
    got = np.asarray(lf.jit(lambda x: lf.nn.group_norm(x, 2, eps=1e-5))(x))
    g = x.astype(np.float64).reshape(1, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    u = f32(1, 2, 3, 4)
    got = np.asarray(lf.jit(lf.nn.nearest_upsample_2x)(u))
    np.testing.assert_array_equal(got, u.repeat(2, axis=2).repeat(2, axis=3))


def test_attention_causal_gqa():
    q, k, v = f32(1, 4, 5, 8), f32(1, 2, 5, 8), f32(1, 2, 5, 8)
    got = np.asarray(lf.jit(lambda q, k, v: lf.nn.scaled_dot_product_attention(q, k, v, is_causal=True))(q, k, v))
    kk, vv = np.repeat(k, 2, axis=1).astype(np.float64), np.repeat(v, 2, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ kk.transpose(0, 1, 3, 2) / math.sqrt(8)
    s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
    np.testing.assert_allclose(got, _ref_softmax(s) @ vv, rtol=1e-4, atol=1e-5)

"""luminal_fn.numpy outside jit: each call traces itself alone, runs on the NumPy backend and
returns luminal_fn.Array values (like jax.numpy outside jax.jit). Checked against NumPy on the
same inputs and against the same function under jit."""
import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(11)
A = R.uniform(-2, 2, (3, 4)).astype(np.float32)
B = R.uniform(0.5, 2, (4,)).astype(np.float32)


@pytest.mark.parametrize("call,ref", [
    (lambda m, a, b: m.exp(a), None),
    (lambda m, a, b: m.add(a, b), None),
    (lambda m, a, b: m.where(a > 0, a, b), None),
    (lambda m, a, b: m.sum(a, axis=-1), None),
    (lambda m, a, b: m.mean(a, axis=0, keepdims=True), None),
    (lambda m, a, b: m.argmax(a, axis=-1), None),
    (lambda m, a, b: m.max(a), None),
    (lambda m, a, b: m.cumsum(a, axis=1), None),
    (lambda m, a, b: m.matmul(a, b), None),
    (lambda m, a, b: m.einsum("ij,j->i", a, b), None),
    (lambda m, a, b: m.transpose(a), None),
    (lambda m, a, b: m.reshape(a, (2, -1)), None),
    (lambda m, a, b: m.concatenate([a, a * 2], axis=0), None),
    (lambda m, a, b: m.pad(a, ((1, 0), (0, 2))), None),
    (lambda m, a, b: m.take(b, np.array([3, 0, 0])), None),
    (lambda m, a, b: m.sort(a, axis=-1), None),
    (lambda m, a, b: m.clip(a, -1.0, 1.0), None),
    (lambda m, a, b: m.tril(a), None),
    (lambda m, a, b: m.floor_divide(a, b), None),
], ids=lambda c: "")
def test_eager_call_returns_an_array_that_matches_numpy_and_jit(call, ref):
    out = call(lnp, A, B)
    assert isinstance(out, lf.Array)
    want = call(np, A, B)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)
    assert out.shape == want.shape
    # jit may pick another kernel (a library matmul sums in another order): 1e-6, not bitwise
    jitted = lf.jit(lambda a, b: call(lnp, a, b))(A, B)
    np.testing.assert_allclose(np.asarray(out), np.asarray(jitted), rtol=1e-6, atol=1e-6)


def test_eager_inputs_of_every_kind():
    # NumPy arrays, lf.Arrays, Python scalars, nested lists, NumPy scalars
    a = lf.device_put(A)
    np.testing.assert_allclose(np.asarray(lnp.multiply(a, 2.0)), A * 2)
    np.testing.assert_allclose(np.asarray(lnp.add(a, B)), A + B)
    np.testing.assert_array_equal(np.asarray(lnp.asarray([[1, 2], [3, 4]])), [[1, 2], [3, 4]])
    np.testing.assert_allclose(np.asarray(lnp.maximum(np.float32(0.5), A)), np.maximum(0.5, A))
    out = lnp.sqrt(4.0)
    assert isinstance(out, lf.Array) and out.shape == () and float(out) == 2.0


def test_eager_results_chain_and_support_operators():
    x = lnp.exp(A)  # an lf.Array
    y = (x - 1.0) * 2 + x[1:, ::2].sum()
    np.testing.assert_allclose(np.asarray(y), (np.exp(A) - 1) * 2 + np.exp(A)[1:, ::2].sum(), rtol=1e-5)
    assert isinstance(y, lf.Array)
    np.testing.assert_allclose(np.asarray(x.T @ x), np.exp(A).T @ np.exp(A), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(x.reshape(4, 3)), np.asarray(x).reshape(4, 3))
    assert x.astype(np.float16).dtype == lf.float16
    # an eager result is a valid jit argument
    np.testing.assert_allclose(np.asarray(lf.jit(lambda v: v * 3)(x)), np.exp(A) * 3, rtol=1e-6)


def test_eager_dtypes_follow_the_narrowing_and_promotion_rules():
    x64 = A.astype(np.float64)
    out = lnp.sin(x64)
    assert out.dtype == lf.float32  # float64 is narrowed at the boundary, as in jit
    np.testing.assert_allclose(np.asarray(out), np.sin(A), rtol=1e-6, atol=1e-7)
    i64 = np.arange(6, dtype=np.int64)
    assert lnp.sum(i64).dtype == lf.int32 and int(lnp.sum(i64)) == 15
    assert lnp.multiply(np.arange(3, dtype=np.int32), 0.5).dtype == lf.float32  # weak scalar
    h = A.astype(np.float16)
    assert lnp.add(h, 1).dtype == lf.float16
    assert lnp.add(h, A).dtype == lf.float32
    with pytest.raises(OverflowError, match="int32 range"):
        lnp.add(np.array([2 ** 40]), 1)
    with pytest.raises(lf.DTypeError, match="complex64"):
        lnp.exp(A.astype(np.complex64))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_eager_half_precision_matches_jit_and_the_float64_reference(dtype):
    h = np.linspace(-6, 6, 49).astype(dtype)  # large |x|: where rounding exp's steps shows
    ref = np.exp(h.astype(np.float64))
    eps = float(ml_dtypes.finfo(dtype).eps)  # NumPy 2.5's finfo refuses bfloat16
    # a NumPy array and an lf.Array argument take the same float32 path as a traced one
    for out in (lnp.exp(h), lnp.exp(lf.device_put(h)), lf.jit(lnp.exp)(h)):
        assert np.dtype(out.dtype.np) == np.dtype(dtype)
        np.testing.assert_allclose(np.asarray(out).astype(np.float64), ref, rtol=eps)
    np.testing.assert_allclose(np.asarray(lnp.exp(h)).astype(np.float64),
                               np.asarray(lf.jit(lnp.exp)(h)).astype(np.float64), rtol=eps)


def test_eager_multiple_and_non_array_results():
    parts = lnp.split(np.arange(6, dtype=np.float32), 3)
    assert isinstance(parts, list | tuple) and len(parts) == 3
    assert all(isinstance(p, lf.Array) for p in parts)
    np.testing.assert_array_equal(np.asarray(parts[2]), [4, 5])
    q, r = lnp.divmod(np.array([7, -7], np.int32), 3)
    np.testing.assert_array_equal(np.asarray(q), [2, -3])
    np.testing.assert_array_equal(np.asarray(r), [1, 2])
    assert lnp.shape(A) == (3, 4) and lnp.ndim(A) == 2
    assert lnp.result_type(np.float16, np.int32) == lf.float16


def test_jitting_a_namespace_function_directly_keeps_its_defaults_python_values():
    # keepdims=False, axis=None must stay Python values, not traced scalars
    np.testing.assert_allclose(np.asarray(lf.jit(lnp.sum)(A)), A.sum(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(lf.jit(lnp.mean)(A)), A.mean(), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(lf.jit(lnp.argmax)(A)), np.argmax(A))

    @lf.jit
    def maybe_negate(x, negate=False):
        if negate:  # a Python flag with a default: fine, it is not traced when omitted
            return -x
        return x

    np.testing.assert_array_equal(np.asarray(maybe_negate(A)), A)


def test_eager_errors_name_the_function_and_the_callers_line():
    with pytest.raises(lf.ShapeError) as info:
        lnp.matmul(A, np.ones((3, 2), np.float32))
    msg = str(info.value)
    assert "matmul" in msg and "(3, 4)" in msg and "(3, 2)" in msg and "test_eager.py:" in msg
    with pytest.raises(lf.ShapeError, match="axis 5") as info:
        lnp.sum(A, axis=5)
    assert "test_eager.py:" in str(info.value)


def test_eager_does_not_cache_values():
    # each call runs on its own inputs: no stale result from an earlier call
    x = np.zeros(3, np.float32)
    first = np.asarray(lnp.add(x, 1))
    x[:] = 5
    np.testing.assert_array_equal(np.asarray(lnp.add(x, 1)), [6, 6, 6])
    np.testing.assert_array_equal(first, [1, 1, 1])

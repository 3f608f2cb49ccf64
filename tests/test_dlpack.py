"""DLPack in and out of luminal_fn: Arrays export through ``__dlpack__``; ``lf.from_dlpack``
shares a producer's memory, ``lf.device_put`` copies it, jitted functions read such arguments
directly. JAX (CPU) is the foreign library here; the GPU test uses CuPy."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

jax = pytest.importorskip("jax")
jnp = jax.numpy


class Producer:
    """Any object that speaks DLPack (over a NumPy array we can still write into)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, *args, **kwargs):
        return self.arr.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_from_dlpack_shares_memory_and_device_put_copies():
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    shared = lf.from_dlpack(Producer(src))
    copied = lf.device_put(Producer(src))
    assert shared.shape == (3, 4) and shared.dtype == lf.float32
    src[0, 0] = 100.0
    assert np.asarray(shared)[0, 0] == 100.0  # the same memory, as jax/torch from_dlpack
    assert np.asarray(copied)[0, 0] == 0.0  # device_put copied


def test_arrays_export_through_dlpack_to_numpy_and_jax():
    a = lf.device_put(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(np.from_dlpack(a), np.arange(6, dtype=np.float32))
    assert np.shares_memory(np.from_dlpack(a), np.asarray(a))  # no copy on the NumPy backend
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(a)), np.arange(6))
    y = lf.jit(lambda x: x * 2.0)(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(np.from_dlpack(y))), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_jitted_functions_take_jax_arrays(backend):
    if backend not in lf.available_backends():
        pytest.skip(f"{backend} is not installed here")
    x = jnp.arange(8.0, dtype=jnp.float32).reshape(2, 4)
    w = jnp.full((4, 3), 0.5, dtype=jnp.float32)
    f = lf.jit(lambda x, w: lnp.tanh(x @ w), backend=backend)
    want = np.tanh(np.asarray(x) @ np.asarray(w))
    np.testing.assert_allclose(np.asarray(f(x, w)), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(lf.from_dlpack(x, backend)), np.asarray(x))


def test_64_bit_imports_are_narrowed_and_checked():
    a = lf.from_dlpack(Producer(np.array([1, -2, 3], np.int64)))
    assert a.dtype == lf.int32
    np.testing.assert_array_equal(np.asarray(a), [1, -2, 3])
    with pytest.raises(OverflowError, match="int32"):
        lf.from_dlpack(Producer(np.array([2**40], np.int64)))


def test_unsupported_imports_say_what_to_do():
    with pytest.raises(TypeError, match="bfloat16"):
        lf.from_dlpack(jnp.ones(3, dtype=jnp.bfloat16))
    with pytest.raises(TypeError, match="device_put"):
        lf.from_dlpack([1, 2, 3])


@pytest.mark.gpu
def test_cupy_arrays_in_and_out_without_copies():
    import cupy as cp

    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    a = lf.from_dlpack(x, "cuda")
    assert a.buffer.data.ptr == x.data.ptr  # shared
    f = lf.jit(lambda v: v.sum(axis=1), backend="cuda")
    np.testing.assert_allclose(np.asarray(f(x)), cp.asnumpy(x).sum(1))
    back = cp.from_dlpack(f(a))
    np.testing.assert_allclose(cp.asnumpy(back), cp.asnumpy(x).sum(1))
    host = jnp.arange(4.0, dtype=jnp.float32)  # host memory bound for the GPU is copied over
    np.testing.assert_array_equal(np.asarray(lf.from_dlpack(host, "cuda")), np.arange(4.0))

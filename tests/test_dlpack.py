"""DLPack in and out of luminal_fn: Arrays export through ``__dlpack__`` (the array-API keywords
stream, max_version, dl_device, copy); ``lf.from_dlpack`` shares a producer's memory where the
backend's device holds it and copies it from another device; ``lf.device_put`` copies; jitted
functions read such arguments directly.

Tests that name no backend pin ``backend="numpy"``: on a GPU machine the default is CUDA. JAX,
where installed, puts arrays on its default device (the GPU there), so the JAX tests hold for
both host and device JAX arrays. Fake producers stand in for arrays on another device; the
``gpu`` tests use CuPy (and PyTorch/JAX where installed)."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import BackendUnavailable, get_backend
from luminal_fn.backends.dlpack import DLDeviceType

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax is not installed")


class Producer:
    """Any object that speaks DLPack (over a NumPy array we can still write into)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class OnGpu:
    """A producer on CUDA device 0 (the data really lives in ``arr``): it exports only what a
    GPU library can give a host consumer, a host copy on request (``dl_device=CPU``) when
    ``exports_to_host``, and ``__array__`` when ``has_array``."""

    def __init__(self, arr, exports_to_host=True, has_array=False, describes_itself=True):
        self.arr, self.exports_to_host = arr, exports_to_host
        if has_array:
            self.__array__ = lambda dtype=None, copy=None: np.array(self.arr, dtype=dtype)
        if describes_itself:
            self.shape, self.dtype = arr.shape, arr.dtype

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.exports_to_host and dl_device is not None and tuple(dl_device) == (1, 0) and copy is not False:
            return np.array(self.arr, copy=True).__dlpack__(max_version=max_version)
        raise BufferError("this fake GPU array exports no device memory")

    def __dlpack_device__(self):
        return (DLDeviceType.kDLCUDA, 0)


def backend_or_skip(name):
    try:
        return get_backend(name)
    except (BackendUnavailable, ValueError) as e:
        pytest.skip(f"the {name} backend is not usable here: {e}")


def on_host(x):
    """A JAX array placed on JAX's CPU device (JAX on a GPU machine defaults to the GPU)."""
    return jax.device_put(x, jax.devices("cpu")[0])


# ---- import ----------------------------------------------------------------------------------------
def test_from_dlpack_shares_memory_and_device_put_copies():
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    shared = lf.from_dlpack(Producer(src), "numpy")
    copied = lf.device_put(Producer(src), "numpy")
    assert shared.shape == (3, 4) and shared.dtype == lf.float32 and shared.backend == "numpy"
    src[0, 0] = 100.0
    assert np.asarray(shared)[0, 0] == 100.0  # the same memory, as jax/torch from_dlpack
    assert np.asarray(copied)[0, 0] == 0.0  # device_put copied
    np.testing.assert_array_equal(np.asarray(copied)[1:], np.arange(4, 12).reshape(2, 4))


@pytest.mark.parametrize("has_array", [False, True])
def test_arrays_on_another_device_are_copied_to_a_host_backend(has_array):
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    # the standard route (a host copy on request), else the producer's own __array__
    x = OnGpu(src, exports_to_host=not has_array, has_array=has_array)
    a = lf.from_dlpack(x, "numpy")
    src[0, 0] = -1.0  # a copy: later writes to the device array do not show
    np.testing.assert_array_equal(np.asarray(a), [[0, 1, 2], [3, 4, 5]])
    f = lf.jit(lambda v: (v * 2.0).sum(axis=0), backend="numpy")
    np.testing.assert_array_equal(np.asarray(f(x)), [4.0, 10.0, 14.0])  # (-1 + 3) * 2, (1 + 4) * 2, (2 + 5) * 2
    # a producer without shape/dtype attributes: the jitted call learns them from its host copy
    bare = OnGpu(src, exports_to_host=True, describes_itself=False)
    np.testing.assert_array_equal(np.asarray(f(bare)), [4.0, 10.0, 14.0])


def test_arrays_on_another_device_without_a_host_route_say_what_to_do():
    x = OnGpu(np.ones(3, np.float32), exports_to_host=False)
    with pytest.raises(BufferError, match=r"from_dlpack: numpy backend: a OnGpu on DLPack device "
                                          r"kDLCUDA:0 .*move it to the CPU first"):
        lf.from_dlpack(x, "numpy")
    f = lf.jit(lambda v: v + 1.0, backend="numpy")
    with pytest.raises(BufferError, match=r"<lambda>: argument .*kDLCUDA:0.*backend='cuda'"):
        f(x)


def test_64_bit_imports_are_narrowed_and_checked():
    a = lf.from_dlpack(Producer(np.array([1, -2, 3], np.int64)))  # the default backend
    assert a.dtype == lf.int32
    np.testing.assert_array_equal(np.asarray(a), [1, -2, 3])
    with pytest.raises(OverflowError, match="from_dlpack: .*int32"):
        lf.from_dlpack(Producer(np.array([2**40], np.int64)))


def test_unsupported_imports_say_what_to_do():
    with pytest.raises(TypeError, match="from_dlpack: a list has no __dlpack__; use device_put"):
        lf.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError, match="from_dlpack: .*unsupported dtype complex64"):
        lf.from_dlpack(Producer(np.ones(2, np.complex64)), "numpy")


# ---- export ----------------------------------------------------------------------------------------
def test_arrays_export_through_dlpack_with_the_array_api_keywords():
    a = lf.device_put(np.arange(6, dtype=np.float32), "numpy")
    assert a.__dlpack_device__() == (DLDeviceType.kDLCPU, 0)
    shared = np.from_dlpack(a)  # NumPy asks for DLPack 1.0 (max_version=(1, 0))
    np.testing.assert_array_equal(shared, np.arange(6, dtype=np.float32))
    assert np.shares_memory(shared, np.asarray(a))  # no copy on the NumPy backend
    assert not np.shares_memory(np.from_dlpack(a, copy=True), np.asarray(a))
    assert np.shares_memory(np.from_dlpack(a, device="cpu", copy=False), np.asarray(a))
    assert "dltensor" in repr(a.__dlpack__())  # a consumer that predates DLPack 1.0
    assert "dltensor_versioned" in repr(a.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    with pytest.raises(BufferError, match="lives on kDLCPU:0 .* not to kDLCUDA:0"):
        a.__dlpack__(dl_device=(DLDeviceType.kDLCUDA, 0))
    y = lf.jit(lambda x: x * 2.0, backend="numpy")(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.from_dlpack(y), [2.0, 2.0, 2.0])
    a.delete()
    with pytest.raises(lf.DonationError):
        np.from_dlpack(a)


@needs_jax
def test_arrays_export_to_jax():
    a = lf.device_put(np.arange(6, dtype=np.float32), "numpy")
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(a)), np.arange(6))
    y = lf.jit(lambda x: x * 2.0, backend="numpy")(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(y) + 1.0), [3.0, 3.0, 3.0])


# ---- JAX arrays in (on JAX's default device: the GPU on a GPU machine) ------------------------------
@needs_jax
@pytest.mark.parametrize("backend", ["numpy", "mlx", "cuda"])
def test_jitted_functions_take_jax_arrays(backend):
    backend_or_skip(backend)
    x = jnp.arange(8.0, dtype=jnp.float32).reshape(2, 4)
    w = jnp.full((4, 3), 0.5, dtype=jnp.float32)
    f = lf.jit(lambda x, w: lnp.tanh(x @ w), backend=backend)
    want = np.tanh(np.arange(8.0).reshape(2, 4) @ np.full((4, 3), 0.5))
    np.testing.assert_allclose(np.asarray(f(x, w)), want, rtol=1e-6, atol=1e-6)
    a = lf.from_dlpack(x, backend)
    assert a.backend == backend and a.dtype == lf.float32
    np.testing.assert_array_equal(np.asarray(a), np.arange(8.0).reshape(2, 4))


@needs_jax
def test_jax_bfloat16_on_the_host():
    x = on_host(jnp.arange(4, dtype=jnp.bfloat16))
    with pytest.raises(TypeError, match="from_dlpack: numpy backend: .*bfloat16.*device_put"):
        lf.from_dlpack(x, "numpy")  # NumPy's DLPack import has no bfloat16
    a = lf.device_put(x, "numpy")  # a copy through JAX's own conversion
    assert a.dtype == lf.bfloat16
    np.testing.assert_array_equal(np.asarray(a).astype(np.float32), [0, 1, 2, 3])


# ---- CUDA ------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cupy_arrays_in_and_out_without_copies():
    import cupy as cp

    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    a = lf.from_dlpack(x, "cuda")
    assert a.buffer.data.ptr == x.data.ptr  # shared
    f = lf.jit(lambda v: v.sum(axis=1), backend="cuda")
    np.testing.assert_allclose(np.asarray(f(x)), cp.asnumpy(x).sum(1))  # a CuPy argument
    assert a.buffer is x  # this backend's own kind of buffer: taken as it is, no DLPack wrapper
    x += 1.0  # the same CuPy array again, changed in place: the call reads it anew
    np.testing.assert_allclose(np.asarray(f(x)), cp.asnumpy(x).sum(1))
    back = cp.from_dlpack(f(a))
    np.testing.assert_allclose(cp.asnumpy(back), cp.asnumpy(x).sum(1))
    assert cp.from_dlpack(a).data.ptr == x.data.ptr  # exported without a copy
    host = np.arange(4.0, dtype=np.float32)  # host memory bound for the GPU is copied over
    h = lf.from_dlpack(Producer(host), "cuda")
    host[0] = 9.0
    np.testing.assert_array_equal(np.asarray(h), np.arange(4.0))
    # a GPU array for a host backend: copied to the host
    np.testing.assert_array_equal(np.asarray(lf.from_dlpack(x, "numpy")), cp.asnumpy(x))
    g = lf.jit(lambda v: v.sum(axis=1), backend="numpy")
    np.testing.assert_allclose(np.asarray(g(x)), cp.asnumpy(x).sum(1))


@pytest.mark.gpu
def test_cuda_arrays_export_to_the_host_on_request():
    import cupy as cp

    a = lf.device_put(np.arange(6, dtype=np.float32).reshape(2, 3), "cuda")
    assert a.__dlpack_device__()[0] == DLDeviceType.kDLCUDA
    host = np.from_dlpack(a, device="cpu")  # dl_device=(kDLCPU, 0): a host copy
    np.testing.assert_array_equal(host, np.arange(6).reshape(2, 3))
    with pytest.raises(BufferError, match="copy=False"):
        a.__dlpack__(dl_device=(1, 0), copy=False)
    assert cp.from_dlpack(a).data.ptr == a.buffer.data.ptr  # on its own device: no copy
    copied = cp.from_dlpack(ForcedKeywords(a, copy=True))
    assert copied.data.ptr != a.buffer.data.ptr
    np.testing.assert_array_equal(cp.asnumpy(copied), host)


class ForcedKeywords:
    """Passes fixed ``__dlpack__`` keywords to ``a`` whatever the consumer asks."""

    def __init__(self, a, **kw):
        self.a, self.kw = a, kw

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**{**kw, **self.kw})

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.mark.gpu
def test_cuda_bfloat16_through_dlpack():
    import cupy as cp

    vals = np.array([0.5, -2.0, 3.0], np.float32)
    src = cp.asarray(vals.astype(_bf16()))
    try:
        a = lf.from_dlpack(src, "cuda")
    except TypeError as e:
        assert "bfloat16" in str(e)
        pytest.skip(f"this CuPy has no bfloat16 ({cp.__version__})")
    assert a.dtype == lf.bfloat16 and a.buffer.data.ptr == src.data.ptr  # shared, stored as bits
    np.testing.assert_array_equal(np.asarray(a).astype(np.float32), vals)
    y = lf.jit(lambda v: v * 2.0, backend="cuda")(a)
    back = cp.from_dlpack(y)  # exported as bfloat16, not as its uint16 storage
    assert back.dtype == _bf16()
    np.testing.assert_array_equal(cp.asnumpy(back).astype(np.float32), vals * 2)


@pytest.mark.gpu
def test_cuda_views_that_start_inside_a_16_byte_word_are_copied_not_misread():
    # kernels read 16-byte vectors; a contiguous view starting at element 1 is read through an
    # aligned copy (a misaligned vector load would be a sticky CUDA error) and left as it was
    import cupy as cp

    vals = np.linspace(-3, 3, 1 + 4 * 2048, dtype=np.float32)
    x = cp.asarray(vals)[1:].reshape(4, 2048)
    assert x.flags.c_contiguous and x.data.ptr % 16 == 4
    f = lf.jit(lambda v: v * 2.0 + 1.0, backend="cuda")
    np.testing.assert_array_equal(np.asarray(f(x)), vals[1:].reshape(4, 2048) * 2 + 1)
    np.testing.assert_array_equal(cp.asnumpy(x).ravel(), vals[1:])
    src = cp.asarray(vals.astype(_bf16()))
    try:
        a = lf.from_dlpack(src[1:], "cuda")
    except TypeError as e:
        assert "bfloat16" in str(e)
        pytest.skip(f"this CuPy has no bfloat16 ({cp.__version__})")
    assert a.buffer.data.ptr % 16 == 2
    want = vals.astype(_bf16()).astype(np.float32)[1:]
    y = lf.jit(lambda v: (v * 2.0).reshape(4, 2048), backend="cuda")(a)
    np.testing.assert_array_equal(np.asarray(y).astype(np.float32).ravel(), want * 2)
    np.testing.assert_array_equal(cp.asnumpy(src).astype(np.float32)[1:], want)


def _bf16():
    from luminal_fn.ir import dtypes as dt

    return dt.to_numpy(dt.bfloat16)


@pytest.mark.gpu
def test_torch_cuda_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    t = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    want = np.arange(6, dtype=np.float32).reshape(2, 3).sum(0)
    for backend in ("cuda", "numpy"):  # the same device, and a host backend (a copy)
        f = lf.jit(lambda v: v.sum(axis=0), backend=backend)
        np.testing.assert_allclose(np.asarray(f(t)), want)
    a = lf.from_dlpack(t, "cuda")
    assert a.buffer.data.ptr == t.data_ptr()
    back = torch.from_dlpack(a)
    assert back.device.type == "cuda" and back.data_ptr() == t.data_ptr()

"""DLPack for every backend: device types, reading foreign arrays into host memory (shared where
they live there, copied when they live on another device), and exporting a buffer through
``__dlpack__`` with the array-API keywords (stream, max_version, dl_device, copy).

Same-device imports share memory; an array on another device (a JAX or PyTorch GPU array given
to a host backend) is copied, through the standard request ``__dlpack__(dl_device=CPU,
copy=True)``, then the producer's own ``__array__``, then CuPy for CUDA memory.
"""
from __future__ import annotations

import enum

import numpy as np

from ..ir import dtypes as dt


class DLDeviceType(enum.IntEnum):
    """DLPack's device types (the ones a Python array library reports)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14


DLPACK_CPU = int(DLDeviceType.kDLCPU)
# memory NumPy reads in place (pinned and managed memory are host-addressable)
HOST_READABLE = frozenset({1, 3, 11, 13})
# memory CuPy wraps in place
CUDA_READABLE = frozenset({2, 13})


def dlpack_device(x) -> tuple:
    """``x.__dlpack_device__()`` as a ``(DLDeviceType or int, int)`` tuple (CPU when it does not
    say)."""
    try:
        return as_device(x.__dlpack_device__())
    except Exception:
        return (DLDeviceType.kDLCPU, 0)


def as_device(device) -> tuple:
    """A ``(type, index)`` pair with the type as a DLDeviceType where it is a known one."""
    kind, index = int(device[0]), int(device[1])
    return (DLDeviceType(kind) if kind in DLDeviceType._value2member_map_ else kind, index)


def dlpack_device_type(x) -> int:
    """The DLPack device type of ``x`` (kDLCPU when it does not say)."""
    return int(dlpack_device(x)[0])


def device_text(device: tuple) -> str:
    kind, index = device
    name = kind.name if isinstance(kind, DLDeviceType) else f"device type {kind}"
    return f"{name}:{index}"


def _is_bfloat16(x) -> bool:
    return "bfloat16" in str(getattr(x, "dtype", ""))


def host_from_dlpack(x, backend: str) -> np.ndarray:
    """A NumPy array of ``x`` (anything with ``__dlpack__``), narrowed by the boundary rule:
    the producer's own memory when it is host memory, else a host copy."""
    device = dlpack_device(x)
    if int(device[0]) in HOST_READABLE:
        try:
            arr = np.from_dlpack(x)
        except (RuntimeError, TypeError, ValueError, BufferError) as e:
            if _is_bfloat16(x):
                hint = ("NumPy's DLPack import has no bfloat16: use lf.device_put(x) (a copy) or "
                        "convert it to float32 first")
            else:
                hint = "convert it to a float32, float16, int32 or bool array first"
            raise TypeError(f"{backend} backend: cannot import {type(x).__name__} through "
                            f"DLPack ({e}); {hint}") from None
    else:
        arr = host_copy(x, f"{backend} backend", device)
    return dt.narrow_array(arr, f"{backend} backend: DLPack import")


def host_copy(x, what: str, device: tuple) -> np.ndarray:
    """A host copy of a producer on another device, through the first route it offers; ``what``
    starts the error message."""
    tried = []
    try:  # the array-API request: export to the CPU, copying
        return np.from_dlpack(x, device="cpu", copy=True)
    except Exception as e:
        tried.append(f"__dlpack__(dl_device=CPU, copy=True): {e}")
    if hasattr(x, "__array__"):  # the producer's own conversion (JAX copies device memory)
        try:
            return np.asarray(x)
        except Exception as e:
            tried.append(f"__array__: {e}")
    if int(device[0]) in CUDA_READABLE:  # CUDA memory that only CuPy can read (PyTorch, ...)
        try:
            import cupy

            return cupy.asnumpy(cupy.from_dlpack(x))
        except ImportError:
            pass
        except Exception as e:
            tried.append(f"cupy: {e}")
    raise BufferError(
        f"{what}: a {type(x).__name__} on DLPack device {device_text(device)} is not in "
        f"host memory and offered no host copy ({'; '.join(tried)}); move it to the CPU first "
        "(np.asarray(x), x.cpu(), cupy.asnumpy(x)) or use the backend of its device (backend='cuda' "
        "for CUDA memory)")


def foreign_shape_dtype(x, what: str) -> tuple:
    """Shape and NumPy dtype of a foreign array without moving its data (CuPy and PyTorch GPU
    arrays refuse ``np.asarray``): its own ``shape``/``dtype`` where they are readable, else a
    host view or copy of it (``what`` starts the error message)."""
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    npd = None if dtype is None else _numpy_dtype(dtype)
    if shape is not None and npd is not None:
        return tuple(int(s) for s in shape), npd
    if hasattr(x, "__array__") or not hasattr(x, "__dlpack__"):
        arr = np.asarray(x)
    else:
        device = dlpack_device(x)
        arr = np.from_dlpack(x) if int(device[0]) in HOST_READABLE else host_copy(x, what, device)
    return arr.shape, arr.dtype


def _numpy_dtype(dtype):
    """The NumPy dtype of a foreign dtype, None when it has none. NumPy, CuPy and JAX dtypes are
    NumPy dtypes; PyTorch's and MLX's are spelled ``torch.float32`` / ``mlx.core.float32``."""
    try:
        return np.dtype(dtype)
    except TypeError:
        pass
    name = str(dtype).rsplit(".", 1)[-1]
    try:
        return dt.to_numpy(dt.BY_NAME[name]) if name in dt.BY_NAME else np.dtype(name)
    except TypeError:
        return None


# ---- export --------------------------------------------------------------------------------------
def export(src, own_device: tuple, to_host, copy_of, *, stream=None, max_version=None,
           dl_device=None, copy=None, what: str = "Array.__dlpack__"):
    """``__dlpack__`` per the array-API standard for a backend buffer ``src`` (whose own
    exporter may predate DLPack 1.0). ``to_host()`` gives a host copy (for ``dl_device=CPU``
    from another device); ``copy_of()`` a same-device copy (for ``copy=True``)."""
    if dl_device is not None:
        want, have = as_device(dl_device), as_device(own_device)
        if want != have:
            if want[0] != DLPACK_CPU:
                raise BufferError(f"{what}: the array lives on {device_text(have)} and can be "
                                  f"exported there or to the CPU, not to {device_text(want)}")
            if copy is False:
                raise BufferError(f"{what}: the array lives on {device_text(have)}; exporting it "
                                  "to the CPU needs a copy, which copy=False forbids")
            return _call(np.ascontiguousarray(to_host()), None, max_version, what)
    if copy:
        src = copy_of()
    return _call(src, stream, max_version, what)


def _call(src, stream, max_version, what):
    """``src.__dlpack__`` with the keywords its exporter knows: the versioned capsule where the
    consumer and exporter both speak DLPack 1.0, the legacy one otherwise (as the standard
    allows)."""
    kw = {} if stream is None else {"stream": stream}
    try:
        if max_version is not None:
            try:
                return src.__dlpack__(max_version=tuple(max_version), **kw)
            except TypeError:  # an exporter older than DLPack 1.0
                pass
        return src.__dlpack__(**kw)
    except BufferError as e:
        if _is_bfloat16(src):
            raise BufferError(f"{what}: NumPy exports no bfloat16 through DLPack ({e}); read it "
                              "with np.asarray(a) (ml_dtypes bfloat16) or export "
                              "a.astype(lf.float32)") from None
        raise

"""Programmatic dependent launch (Hopper, sm_90+): a kernel launched with the programmatic
stream serialization attribute may start while the kernel before it is still finishing. Its
blocks are placed and its pointers read during the other's tail; ``lf_pdl_wait()`` (every
kernel calls it before reading what an earlier kernel wrote, see render.lang) holds it until the
earlier grid has completed and its writes are visible. In a decode step of ~200 short kernels
this hides part of each launch gap; GEMVs also pull their first weight rows into L2 before
waiting.

CuPy's kernel call has no launch attributes, so the launch goes through the driver's
``cuLaunchKernelEx`` with ctypes. Stream capture records it like any launch, so captured CUDA
graphs keep the programmatic edges. ``LUMINAL_CUDA_PDL=0`` turns it off (plain launches; the
kernels' waits then return at once).
"""
from __future__ import annotations

import ctypes

from .switches import switch_count, switch_on

_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CUlaunchAttributeID


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad to 8, a 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("value_rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint), ("block_z", ctypes.c_uint),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


_DRIVER = []


def _driver_launch():
    """cuLaunchKernelEx of the loaded driver, or None where it has none."""
    if not _DRIVER:
        fn = None
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            fn = lib.cuLaunchKernelEx
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        except (OSError, AttributeError):
            fn = None
        _DRIVER.append(fn)
    return _DRIVER[0]


def pdl_supported(compute_capability: int) -> bool:
    """Whether kernels of this device are launched with the attribute (sm_90+, a driver with
    cuLaunchKernelEx, and LUMINAL_CUDA_PDL not 0)."""
    if not switch_on("LUMINAL_CUDA_PDL", True, "programmatic dependent launch"):
        return False
    return compute_capability >= 90 and _driver_launch() is not None


def function_handle(fn) -> int:
    """The CUfunction of a CuPy kernel: a cupy.cuda.Function's ptr, or that of the Function a
    RawKernel holds; AttributeError where this CuPy exposes neither."""
    ptr = getattr(fn, "ptr", None)
    if ptr is None:
        ptr = fn.kernel.ptr
    return int(ptr)


def module_arch(module) -> int:
    """The __CUDA_ARCH__ a loaded module was compiled for (the prelude stores it): its kernels'
    waits exist only at 900 and above, so only then may they be launched early."""
    import cupy as cp
    import numpy as np

    try:
        ptr = module.get_global("lf_module_arch")
    except Exception:  # a module without the prelude's marker
        return 0
    return int(cp.ndarray((1,), dtype=np.int32, memptr=ptr).get()[0])


class PdlLaunch:
    """One kernel of a bucket launched with programmatic serialization. The kernel's arguments
    (the parameter table's pointer, then int32 buffer and dim slots) never change, so the
    argument block is built once; a launch only sets the stream."""

    def __init__(self, fn, name: str, grid, block, table_ptr: int, ints, shared_bytes: int):
        self.name = name
        self.grid, self.block = tuple(grid), tuple(block)
        self._fn = ctypes.c_void_p(function_handle(fn))
        self._values = [ctypes.c_void_p(int(table_ptr))] + [ctypes.c_int(int(v)) for v in ints]
        self._params = (ctypes.c_void_p * len(self._values))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in self._values])
        self._attr = _LaunchAttribute(id=_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        self._config = _LaunchConfig(*(int(g) for g in grid), *(int(b) for b in block),
                                     int(shared_bytes), None, ctypes.pointer(self._attr), 1)
        self._launch = _driver_launch()

    def __call__(self, stream_ptr: int):
        self._config.stream = stream_ptr or None
        err = self._launch(ctypes.byref(self._config), self._fn, self._params, None)
        if err:
            raise RuntimeError(f"CUDA backend: cuLaunchKernelEx failed for kernel {self.name} "
                               f"(CUresult {err}); set LUMINAL_CUDA_PDL=0 to launch without "
                               "programmatic dependent launch")


def prefetch_chunks(switch: str, default: int) -> int:
    """Chunks of its weights a product kernel asks L2 for before its ``lf_pdl_wait`` (0: none):
    the environment variable ``switch`` when set (an integer, for A/B runs), else ``default``."""
    return switch_count(switch, default, "the chunks to prefetch, such as 0 or 1")


__all__ = ["PdlLaunch", "module_arch", "pdl_supported", "prefetch_chunks"]


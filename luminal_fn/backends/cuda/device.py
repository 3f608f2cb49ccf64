"""CuPy access for the CUDA backend: the lazy import, dtype mapping, NVRTC module cache.

CuPy has no bfloat16 dtype: bfloat16 buffers are CuPy ``uint16`` arrays holding the bits (no
luminal_fn dtype is uint16, so a uint16 buffer always means bfloat16).

Compiled modules are cached by source text: in memory per process, and on disk as cubins that
NVRTC compiled without CuPy's -ftz=true, keyed by source, architecture and NVRTC version (in
``$CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``, folder luminal_fn): a second process loads
the cubin instead of compiling. ``LUMINAL_CUDA_FTZ=1`` compiles through CuPy instead (float32
subnormals flushed to zero).
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from ...ir import dtypes as dt
from ..base import BackendUnavailable
from .source import source_key
from .switches import switch_on

INSTALL_HINT = 'pip install "luminal-fn[cuda]"'
_cp = None


def cupy():
    """The cupy module, or BackendUnavailable saying how to install it."""
    global _cp
    if _cp is None:
        try:
            import cupy as cp
        except ImportError as e:
            raise BackendUnavailable(
                f"the CUDA backend needs CuPy, which is not installed ({e}); install it with "
                f"{INSTALL_HINT} (or the cupy-cuda12x/13x wheel for your CUDA), or use "
                "backend='numpy'") from None
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, no device
            raise BackendUnavailable(f"the CUDA backend found CuPy but no usable NVIDIA GPU: {e}") from None
        if n < 1:
            raise BackendUnavailable("the CUDA backend found CuPy but no NVIDIA GPU")
        _cp = cp
    return _cp


_STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "int32": np.int32,
            "bool": np.bool_}


def cupy_dtype(d: dt.DType) -> np.dtype:
    return np.dtype(_STORAGE[d.name])


def dtype_of_storage(npd) -> dt.DType:
    npd = np.dtype(npd)
    if npd == np.uint16:
        return dt.bfloat16
    return dt.canonicalize(npd)


def host_to_storage(arr: np.ndarray) -> np.ndarray:
    """A NumPy array as the bits the device stores (bfloat16 as uint16)."""
    arr = np.asarray(arr)
    if arr.dtype == dt.to_numpy(dt.bfloat16):
        return arr.view(np.uint16)
    return arr


# ---- modules -------------------------------------------------------------------------------------
_MODULES: dict = {}
OPTIONS = ("-std=c++17",)


def arch() -> str:
    cp = cupy()
    return "sm_" + cp.cuda.Device().compute_capability


def _header_dirs() -> list:
    """CUDA include folders that hold cuda_fp16.h (CUDA_PATH, /usr/local/cuda, pip's nvidia-*)."""
    import glob
    import site

    cands = []
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "include"))
    cands.append("/usr/local/cuda/include")
    for sp in site.getsitepackages() + [site.getusersitepackages()]:
        cands += glob.glob(os.path.join(sp, "nvidia", "*", "include"))
    return [d for d in cands if os.path.exists(os.path.join(d, "cuda_fp16.h"))][:1]


def get_module(text: str):
    """A loaded RawModule for a module source (memory cache, then a cubin on disk)."""
    key = source_key(text)
    ftz = switch_on("LUMINAL_CUDA_FTZ", False, "CuPy's compile, which flushes float32 subnormals")
    mod = _MODULES.get((key, ftz))
    if mod is not None:
        return mod
    try:
        if ftz:
            mod = _compile_through_cupy(text)
        else:
            mod = cupy().RawModule(path=_cubin_path(text, key))
    except Exception as e:
        path = os.path.join(tempfile.gettempdir(), f"luminal_fn_cuda_{key}.cu")
        with open(path, "w") as f:
            f.write(text)
        raise RuntimeError(f"NVRTC failed to compile a CUDA module for {arch()} (source saved to "
                           f"{path}): {e}") from None
    _MODULES[key, ftz] = mod
    return mod


def _cubin_path(text: str, key: str) -> str:
    """The module's cubin, compiled by NVRTC itself: CuPy's compile appends -ftz=true to every
    NVRTC call (cupy/cupy#9576), which flushes float32 subnormals to zero where NumPy keeps
    them. Cached on disk by source, architecture and NVRTC version, beside CuPy's kernel cache
    ($CUPY_CACHE_DIR, default ~/.cupy/kernel_cache), so a second process loads it."""
    from cupy_backends.cuda.libs import nvrtc

    major, minor = nvrtc.getVersion()
    cache = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")
    folder = os.path.join(cache, "luminal_fn")
    path = os.path.join(folder, f"{key}-{arch()}-nvrtc{major}.{minor}.cubin")
    if not os.path.exists(path):
        binary = _nvrtc_cubin(nvrtc, text)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(binary)
        os.replace(tmp, path)  # a reader never sees half a cubin
    return path


def _nvrtc_cubin(nvrtc, text: str) -> bytes:
    def compile_with(options):
        prog = nvrtc.createProgram(text, "luminal_fn_module.cu", (), ())
        try:
            nvrtc.compileProgram(prog, options + (f"-arch={arch()}",))
            return nvrtc.getCUBIN(prog)
        except nvrtc.NVRTCError:
            raise RuntimeError(nvrtc.getProgramLog(prog)) from None
        finally:
            nvrtc.destroyProgram(prog)

    return _compile_finding_headers(compile_with)


def _compile_through_cupy(text: str):
    def compile_with(options):
        mod = cupy().RawModule(code=text, options=options, backend="nvrtc")
        mod.compile()
        return mod

    return _compile_finding_headers(compile_with)


def _compile_finding_headers(compile_with):
    """compile_with(OPTIONS); where NVRTC lacks the half/bfloat16 headers on its path, again
    pointed at a CUDA include dir."""
    try:
        return compile_with(OPTIONS)
    except Exception as first:
        inc = _header_dirs()
        if not inc or "cuda_" not in str(first):
            raise
        return compile_with(OPTIONS + tuple(f"-I{d}" for d in inc))


__all__ = ["cupy", "cupy_dtype", "dtype_of_storage", "host_to_storage", "get_module", "arch",
           "INSTALL_HINT"]

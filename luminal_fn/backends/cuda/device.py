"""CuPy access for the CUDA backend: the lazy import, dtype mapping, NVRTC module cache.

CuPy has no bfloat16 dtype: bfloat16 buffers are CuPy ``uint16`` arrays holding the bits (no
luminal_fn dtype is uint16, so a uint16 buffer always means bfloat16).

Compiled modules are cached by source text: in memory per process, and on disk as cubins that
NVRTC compiled without CuPy's -ftz=true, keyed by source, architecture and NVRTC version (in
``$CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``, folder luminal_fn): a second process loads
the cubin instead of compiling. ``LUMINAL_CUDA_FTZ=1`` compiles through CuPy instead (float32
subnormals flushed to zero).

A plan's kernels are found one by one (``kernel_modules``): each is keyed by its text and the
module prefix it is compiled after, and only the kernels no earlier plan compiled are compiled,
together, as one module. Beside that module's cubin, a reference file a kernel names the cubin
holding it, so a second process loads the chosen plan from the cubins the search wrote.
"""
from __future__ import annotations

import concurrent.futures
import os
import tempfile
import threading
import time

import numpy as np

from ...ir import dtypes as dt
from ..base import BackendUnavailable
from .source import TRACE_SWITCH, distinct, kernel_keys, module_source, source_key
from .switches import switch_count, switch_on

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
_MODULES: dict = {}  # (module key, ftz) -> the loaded module
_KERNELS: dict = {}  # (kernel key, ftz) -> the loaded module that holds the kernel
_AHEAD: dict = {}  # kernel key -> (the compile_ahead job compiling it, that module's key)
_AHEAD_PID = os.getpid()
_WORKERS = None  # ((threads, process id), the pool) of compile_ahead
# what this process compiled (compile_counts): NVRTC modules and the kernels in them, those
# compiled on compile_ahead's threads, NVRTC's seconds summed over threads, and the seconds the
# caller waited for a thread's module
_COUNTS = {"modules": 0, "kernels": 0, "ahead_modules": 0, "nvrtc_s": 0.0, "waited_s": 0.0}
_COUNTS_LOCK = threading.Lock()
COMPILE_THREADS_SWITCH = "LUMINAL_CUDA_COMPILE_THREADS"
OPTIONS = ("-std=c++17",)
_WORKING_OPTIONS = None  # OPTIONS, or OPTIONS and the include dir, once a compile worked


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
    return _module(text)[0]


def kernel_modules(kernels) -> dict:
    """name -> the loaded module holding that kernel, for each distinct kernel of a plan.

    A kernel compiled before (by this process, by compile_ahead's threads, or by any process
    into a cubin on disk that a reference file names) is not compiled again; the rest are
    compiled together as one module.
    A search's candidates share most of their kernels (the same sorts, scans and GEMVs, other
    fusions around them), so each candidate compiles only its new ones. While tracing
    (``LUMINAL_CUDA_TRACE``) the plan is one module, as the trace records live in a module."""
    if os.environ.get(TRACE_SWITCH):
        mod = get_module(module_source(kernels))
        return {name: mod for name in distinct(kernels)}
    _compile_threads()  # (a bad value is an error here too: a search's prepare is best effort)
    ftz = _ftz()
    keys = kernel_keys(kernels)
    found, missing = {}, []
    for name, key in keys.items():
        mod = _KERNELS.get((key, ftz))
        if mod is None and not ftz:
            mod = _module_compiled_ahead(key) or _module_named_by(key)
        if mod is None:
            missing.append(name)
        else:
            found[name] = _KERNELS[key, ftz] = mod
    if missing:
        by_name = distinct(kernels)
        _count(kernels=len(missing))
        mod, module_key = _module(module_source([by_name[n] for n in missing]))
        for name in missing:
            found[name] = _KERNELS[keys[name], ftz] = mod
            if not ftz:
                _write_reference(keys[name], module_key)
    return found


def compile_ahead(kernels) -> None:
    """Start compiling, on a worker thread, the kernels of a plan that no module holds yet (one
    module, as kernel_modules would compile them); kernel_modules then takes that module. NVRTC
    releases the GIL, so a search's candidates compile side by side while it plans the next."""
    if os.environ.get(TRACE_SWITCH) or _ftz() or _compile_threads() == 0:
        return
    keys = kernel_keys(kernels)
    ahead = _ahead()
    missing = [name for name, key in keys.items() if (key, False) not in _KERNELS and key not in ahead
               and not os.path.exists(_reference_file(key))]
    if not missing:
        return
    by_name = distinct(kernels)
    text = module_source([by_name[n] for n in missing])
    module_key = source_key(text)
    job = _workers().submit(_compile_into, _cubin_file(module_key), text, arch())
    _count(kernels=len(missing), ahead_modules=1)
    for name in missing:
        ahead[keys[name]] = (job, module_key)


def _compile_threads() -> int:
    """compile_ahead's threads: $LUMINAL_CUDA_COMPILE_THREADS (0: none, each plan compiled when
    it first runs), else one less than the cores, at most 8."""
    return switch_count(COMPILE_THREADS_SWITCH, max(1, min(8, (os.cpu_count() or 2) - 1)),
                        "a number of threads (0: compile each plan when it first runs)")


def _workers():
    global _WORKERS
    key = (_compile_threads(), os.getpid())  # (a forked child makes its own: the parent's threads are gone)
    if _WORKERS is None or _WORKERS[0] != key:
        _WORKERS = (key, concurrent.futures.ThreadPoolExecutor(key[0], thread_name_prefix="luminal_fn-nvrtc"))
    return _WORKERS[1]


def _ahead() -> dict:
    """compile_ahead's jobs of this process (a forked child starts with none: it would wait
    forever for its parent's threads)."""
    global _AHEAD, _AHEAD_PID
    if _AHEAD_PID != os.getpid():
        _AHEAD, _AHEAD_PID = {}, os.getpid()
    return _AHEAD


def _module_compiled_ahead(kernel_key: str):
    """The loaded module compile_ahead compiled that kernel into (waiting for it), or None."""
    ahead = _ahead().pop(kernel_key, None)
    if ahead is None:
        return None
    job, module_key = ahead
    t0 = time.perf_counter()
    try:
        path = job.result()
    except Exception:  # (compiled again in kernel_modules, which reports the error with the source)
        return None
    finally:
        _count(waited_s=time.perf_counter() - t0)
    mod = _MODULES.get((module_key, False))
    if mod is None:
        mod = _MODULES[module_key, False] = _load_cubin(path)
    _write_reference(kernel_key, module_key)
    return mod


def _ftz() -> bool:
    return switch_on("LUMINAL_CUDA_FTZ", False, "CuPy's compile, which flushes float32 subnormals")


def _module(text: str):
    """(the loaded module of a module source, its key)."""
    key = source_key(text)
    ftz = _ftz()
    mod = _MODULES.get((key, ftz))
    if mod is not None:
        return mod, key
    try:
        if ftz:
            mod = _compile_through_cupy(text)
        else:
            mod = _load_cubin(_cubin_path(text, key))
    except Exception as e:
        path = os.path.join(tempfile.gettempdir(), f"luminal_fn_cuda_{key}.cu")
        with open(path, "w") as f:
            f.write(text)
        raise RuntimeError(f"NVRTC failed to compile a CUDA module for {arch()} (source saved to "
                           f"{path}): {e}") from None
    _MODULES[key, ftz] = mod
    return mod, key


def _load_cubin(path: str):
    return cupy().RawModule(path=path)


def _cache_folder() -> str:
    cache = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")
    return os.path.join(cache, "luminal_fn")


def _toolchain() -> str:
    """The architecture and NVRTC version a cubin is for (part of every cached file's name)."""
    from cupy_backends.cuda.libs import nvrtc

    major, minor = nvrtc.getVersion()
    return f"{arch()}-nvrtc{major}.{minor}"


def _cubin_file(key: str) -> str:
    return os.path.join(_cache_folder(), f"{key}-{_toolchain()}.cubin")


def _reference_file(kernel_key: str) -> str:
    return os.path.join(_cache_folder(), f"{kernel_key}-{_toolchain()}.ref")


def _module_named_by(kernel_key: str):
    """The loaded module whose cubin a reference file names as holding that kernel, or None."""
    try:
        with open(_reference_file(kernel_key)) as f:
            module_key = f.read().strip()
    except OSError:
        return None
    mod = _MODULES.get((module_key, False))
    if mod is None:
        path = _cubin_file(module_key)
        if not os.path.exists(path):  # (a cleared cache: compile the kernel again)
            return None
        mod = _MODULES[module_key, False] = _load_cubin(path)
    return mod


def _write_reference(kernel_key: str, module_key: str) -> None:
    _write_atomically(_reference_file(kernel_key), module_key.encode())


def _write_atomically(path: str, data: bytes) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # a reader never sees half a file


def _cubin_path(text: str, key: str) -> str:
    """The module's cubin, compiled by NVRTC itself: CuPy's compile appends -ftz=true to every
    NVRTC call (cupy/cupy#9576), which flushes float32 subnormals to zero where NumPy keeps
    them. Cached on disk by source, architecture and NVRTC version, beside CuPy's kernel cache
    ($CUPY_CACHE_DIR, default ~/.cupy/kernel_cache), so a second process loads it."""
    return _compile_into(_cubin_file(key), text, arch())


def _compile_into(path: str, text: str, arch_name: str) -> str:
    """The cubin at ``path``, compiled from ``text`` for ``arch_name`` unless already there (on
    any thread: the architecture is given, not read from the thread's current device)."""
    if not os.path.exists(path):
        t0 = time.perf_counter()
        cubin = _compile_cubin(text, arch_name)
        _count(modules=1, nvrtc_s=time.perf_counter() - t0)
        _write_atomically(path, cubin)
    return path


def compile_counts() -> dict:
    """What this process has compiled so far: ``modules`` (NVRTC compiles into cubins),
    ``kernels`` (asked for, in those and in the modules compile_ahead's threads compile),
    ``ahead_modules`` (modules given to those threads), ``nvrtc_s`` (NVRTC's seconds, summed
    over threads) and ``waited_s`` (seconds a plan's first run waited for a thread's module).
    Where a first call's search time goes on CUDA (benchmarks/llama_bench.py prints them)."""
    with _COUNTS_LOCK:
        return dict(_COUNTS)


def _count(**amounts) -> None:
    with _COUNTS_LOCK:
        for name, amount in amounts.items():
            _COUNTS[name] += amount


def _compile_cubin(text: str, arch_name: str) -> bytes:
    from cupy_backends.cuda.libs import nvrtc

    return _nvrtc_cubin(nvrtc, text, arch_name)


def _nvrtc_cubin(nvrtc, text: str, arch_name: str) -> bytes:
    def compile_with(options):
        prog = nvrtc.createProgram(text, "luminal_fn_module.cu", (), ())
        try:
            nvrtc.compileProgram(prog, options + (f"-arch={arch_name}",))
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
    pointed at a CUDA include dir, and from then on with that dir (one compile a module, not a
    failed one first)."""
    global _WORKING_OPTIONS
    if _WORKING_OPTIONS is not None:
        return compile_with(_WORKING_OPTIONS)
    try:
        result = compile_with(OPTIONS)
        _WORKING_OPTIONS = OPTIONS
        return result
    except Exception as first:
        inc = _header_dirs()
        if not inc or "cuda_" not in str(first):
            raise
        options = OPTIONS + tuple(f"-I{d}" for d in inc)
        result = compile_with(options)
        _WORKING_OPTIONS = options
        return result


__all__ = ["cupy", "cupy_dtype", "dtype_of_storage", "host_to_storage", "get_module", "kernel_modules",
           "compile_ahead", "compile_counts", "arch", "INSTALL_HINT"]

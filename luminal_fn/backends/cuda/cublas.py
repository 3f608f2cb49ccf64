"""cuBLAS GEMMs called directly through ctypes, so that they can be captured into a CUDA graph.

CuPy's cuBLAS wrappers refuse to run while a stream is being captured; cuBLAS itself allows it
when the handle has a workspace of its own (no allocation during capture) and the scalars are
host values read at capture time. This module keeps one handle and one workspace per stream
and turns a product of strided row-major views into one ``cublasGemmStridedBatchedEx`` call
(or a few, when the batch axes do not collapse to one stride).

Row-major C = A @ B is column-major C^T = B^T A^T, so B is cuBLAS's first operand. A row-major
operand X (R, C) with strides (sr, 1) is, read column-major, X^T with leading dimension sr (op
N); with strides (1, sc) it is X with leading dimension sc (op T).
"""
from __future__ import annotations

import ctypes
import itertools

OP_N, OP_T = 0, 1
CUDA_TYPE = {"float32": 0, "float16": 2, "bfloat16": 14}
COMPUTE_32F = 68  # fp32 accumulation, no TF32 (the default math mode keeps full precision)
GEMM_DEFAULT = -1
WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommendation for Hopper
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)
_c = ctypes


class CublasError(RuntimeError):
    pass


def _library_path() -> str | None:
    """The libcublas CuPy has loaded (its wheel may bundle one outside the linker's path)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = path.rsplit("/", 1)[-1]
                if name.startswith("libcublas.so"):
                    return path
    except OSError:
        pass
    return None


class _Library:
    def __init__(self):
        import cupy

        cupy.cuda.device.get_cublas_handle()  # makes CuPy load libcublas
        candidates = [_library_path(), "libcublas.so.13", "libcublas.so.12", "libcublas.so"]
        errors = []
        for path in filter(None, candidates):
            try:
                self.lib = ctypes.CDLL(path)
                break
            except OSError as e:
                errors.append(f"{path}: {e}")
        else:
            raise CublasError("CUDA backend: cannot load libcublas (" + "; ".join(errors) + ")")
        lib = self.lib
        lib.cublasCreate_v2.argtypes = [_c.POINTER(_c.c_void_p)]
        lib.cublasSetStream_v2.argtypes = [_c.c_void_p, _c.c_void_p]
        lib.cublasSetWorkspace_v2.argtypes = [_c.c_void_p, _c.c_void_p, _c.c_size_t]
        i, p, ll = _c.c_int, _c.c_void_p, _c.c_longlong
        lib.cublasGemmStridedBatchedEx.argtypes = [
            p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i, ll, i, i, i]
        handle = _c.c_void_p()
        self.check(lib.cublasCreate_v2(_c.byref(handle)), "cublasCreate")
        self.handle = handle
        self.workspaces: dict = {}  # stream pointer -> CuPy buffer

    @staticmethod
    def check(status: int, what: str):
        if status != 0:
            raise CublasError(f"CUDA backend: {what} failed with cuBLAS status {status}")

    def bind(self, stream_ptr: int):
        """Point the handle at ``stream_ptr`` with that stream's own workspace (setting the stream
        resets the workspace, so both are set on every call)."""
        ws = self.workspaces.get(stream_ptr)
        if ws is None:
            import cupy

            ws = self.workspaces[stream_ptr] = cupy.empty(WORKSPACE_BYTES, dtype=cupy.uint8)
        lib = self.lib
        self.check(lib.cublasSetStream_v2(self.handle, stream_ptr), "cublasSetStream")
        self.check(lib.cublasSetWorkspace_v2(self.handle, ws.data.ptr, WORKSPACE_BYTES),
                   "cublasSetWorkspace")


_LIB = None


def library() -> _Library:
    global _LIB
    if _LIB is None:
        _LIB = _Library()
    return _LIB


# ---- layouts ----------------------------------------------------------------------------------
def operand(rows: int, cols: int, sr: int, sc: int):
    """(op, leading dimension) of a row-major (rows, cols) operand as cuBLAS reads its transpose,
    or None when the layout has no unit stride (a copy is needed)."""
    if rows <= 1:
        sr = max(cols, 1)  # one row: its stride is never used
    if cols <= 1:
        sc = 1
    if sc == 1 and sr >= max(cols, 1):
        return OP_N, sr
    if sr == 1 and sc >= max(rows, 1):
        return OP_T, sc
    return None


def batches(shape, *strides_per_operand):
    """[(offsets per operand, count, strides per operand)]: the batch axes as runs of one strided
    batch each (one run when the axes collapse)."""
    axes = [k for k, d in enumerate(shape) if d != 1]
    if not axes:
        return [(tuple(0 for _ in strides_per_operand), 1, tuple(0 for _ in strides_per_operand))]
    # merge trailing axes while every operand's strides stay regular
    inner = [axes[-1]]
    for k in reversed(axes[:-1]):
        j = inner[0]
        if all(st[k] == st[j] * shape[j] for st in strides_per_operand):
            inner.insert(0, k)
        else:
            break
    count = 1
    for k in inner:
        count *= shape[k]
    step = tuple(st[inner[-1]] for st in strides_per_operand)
    outer = [k for k in axes if k not in inner]
    runs = []
    for idx in itertools.product(*(range(shape[k]) for k in outer)):
        offs = tuple(sum(i * st[k] for i, k in zip(idx, outer)) for st in strides_per_operand)
        runs.append((offs, count, step))
    return runs


def gemm_plan(va, vb, shape, dtype_name: str, out_dtype_name: str | None = None):
    """The calls computing contiguous C (..., M, N) = A (..., M, K) @ B (..., K, N) for evaluated
    views ``va``, ``vb`` (integers) of ``dtype_name``, C of ``out_dtype_name`` (default the same;
    float32 for half operands: cuBLAS accumulates in float32 either way): a list of argument
    tuples for ``run_gemm``, or None when a layout needs a copy first."""
    *bat, M, N = shape
    K = va.shape[-1]
    fa = operand(M, K, va.strides[-2], va.strides[-1])
    fb = operand(K, N, vb.strides[-2], vb.strides[-1])
    if fa is None or fb is None:
        return None
    if any(s < 0 for s in va.strides[:-2] + vb.strides[:-2]):
        return None
    cstrides = []
    acc = M * N
    for d in reversed(bat):
        cstrides.insert(0, acc)
        acc *= d
    size = {"float32": 4, "float16": 2, "bfloat16": 2}
    out_dtype_name = out_dtype_name or dtype_name
    item, t = size[dtype_name], CUDA_TYPE[dtype_name]
    item_c, tc = size[out_dtype_name], CUDA_TYPE[out_dtype_name]
    calls = []
    for (oa, ob, oc), count, (sa, sb, sc) in batches(bat, va.strides[:-2], vb.strides[:-2], cstrides):
        calls.append((fb[0], fa[0], N, M, K, (vb.offset + ob) * item, t, fb[1], sb,
                      (va.offset + oa) * item, t, fa[1], sa, oc * item_c, tc, N, sc, count))
    return calls


def run_gemm(calls, a_ptr: int, b_ptr: int, c_ptr: int, stream_ptr: int):
    lib = library()
    lib.bind(stream_ptr)
    f = lib.lib.cublasGemmStridedBatchedEx
    h = lib.handle
    for (opa, opb, m, n, k, boff, bt, ldb_, sb, aoff, at, lda_, sa, coff, ct, ldc, sc, count) in calls:
        status = f(h, opa, opb, m, n, k, _c.byref(_ONE), b_ptr + boff, bt, ldb_, sb,
                   a_ptr + aoff, at, lda_, sa, _c.byref(_ZERO), c_ptr + coff, ct, ldc, sc, count,
                   COMPUTE_32F, GEMM_DEFAULT)
        lib.check(status, f"cublasGemmStridedBatchedEx (m={n}, n={m}, k={k}, batch={count})")


__all__ = ["gemm_plan", "run_gemm", "operand", "batches", "library", "CublasError"]

"""Split-K for the GEMMs of few rows (a prompt's projections: M = the prompt's tokens, <= 64).

cuBLAS tiles C (M, N) by its N: 32 rows of a 2048-wide projection make 16 tiles on 132 SMs, so
most of the device waits while a few CTAs stream the weights (H200 run AG: the 32-token prompt's
GEMMs at ~2.3 TB/s). Here K is cut into S chunks: one strided-batched cuBLAS call computes the S
partial products A[:, chunk] @ B[chunk, :] into a float32 scratch (S times the CTAs; the partials
stay in L2), and ``lf_split_k_sum_to`` (kernels/gemv.cu) adds them in order and stores C, handing
each value to a store functor so that the elementwise step reading C (a residual add) folds in
(epilogue.py).

On by default since the same-call A/B of H200 run AJ (docs/benchmarks.md: the 32-token prompt's
step replayed in 1372 us against 1405 us without it, twice each, interleaved).
``LUMINAL_CUDA_SPLIT_K=0`` turns it off; ``=n`` (a power of two) caps S at n.
"""
from __future__ import annotations

import functools
import os

from ...ir import dtypes as dt
from ...ir.expr import as_expr, to_int_or_expr
from ...ir.view import View
from ..render import index as ix
from ..render.kernels import finish
from .cublas import gemm_plan, run_gemm
from .plan import HostStep, evaluate, symbols_of

SWITCH = "LUMINAL_CUDA_SPLIT_K"
MAX_ROWS = 64  # rows of C at the bucket's largest dims: above, cuBLAS has CTAs enough
TILE_N = 128  # the width of cuBLAS's tiles assumed for a few rows
MAX_SPLIT = 8
MIN_CHUNK = 256  # rows of K a chunk keeps (each partial product must still stream its weights)


def max_split() -> int:
    """The cap on S from LUMINAL_CUDA_SPLIT_K: 1 (off) for 0/off/false, MAX_SPLIT when unset or
    on/1/true, else the number given (a cap for sweeping the split)."""
    v = os.environ.get(SWITCH, "").strip().lower()
    if v in ("0", "off", "false", "no"):
        return 1
    if v in ("", "1", "on", "true", "yes"):
        return MAX_SPLIT
    try:
        return max(1, int(v))
    except ValueError:
        raise ValueError(f"{SWITCH}={v!r}: expected 0 (off), 1 (on) or the largest split, "
                         f"an integer such as 4") from None


def split_count(m_max: int, N: int, K: int, sm_count: int, cap: int = MAX_SPLIT) -> int:
    """S, a power of two: about one CTA an SM for the S calls together, at most ``cap``, K / S a
    multiple of 16 (16-byte aligned chunks for any dtype) and at least MIN_CHUNK; 1 when no split
    is worth it."""
    if m_max > MAX_ROWS:
        return 1
    want = min(cap, -(-sm_count // -(-N // TILE_N)))
    S = 1
    while S * 2 <= want and K % (16 * S * 2) == 0 and K // (S * 2) >= MIN_CHUNK:
        S *= 2
    return S


def chunked(va: View, vb: View, S: int, K: int) -> tuple:
    """A (M, K) and B (K, N) as S-batched views over K's chunks: (S, M, K/S) and (S, K/S, N)."""
    kc = K // S
    (M, _), (sm, sk) = va.shape, va.strides
    (_, N), (tk, tn) = vb.shape, vb.strides
    a = View((S, M, kc), (kc * sk, sm, sk), va.offset, None)
    b = View((S, kc, N), (kc * tk, tk, tn), vb.offset, None)
    return a, b


def try_split_k(pl, node, va: View, vb: View) -> bool:
    """Plan C = A @ B as the split cuBLAS call and the partials kernel; False (nothing planned)
    when the product is not a 2-D half-precision one of few rows, or the split is off."""
    cap = max_split()
    if cap < 2 or len(node.shape) != 2 or node.dtype not in (dt.float16, dt.bfloat16):
        return False
    split = _split_of(va, vb, tuple(node.shape), node.dtype.name, tuple(sorted(pl.dims_max.items())),
                      pl.sm_count, cap)
    if split is None:
        return False
    S, a3, b3, m_max, N = split
    M = node.shape[0]
    name = node.dtype.name
    b_a, b_b = pl.input_buf(node, 0), pl.input_buf(node, 1)
    scratch = pl.scratch(dt.float32, S * m_max * N)

    @functools.lru_cache(maxsize=16)
    def calls_at(dims: tuple) -> list:  # (as _cublas memoizes its calls per dims)
        d = dict(dims)
        return gemm_plan(a3.evaluate(d), b3.evaluate(d), (S, int(evaluate(M, d)), N), name, "float32")

    def run(ptr, dims):
        import cupy

        if int(evaluate(M, dims)) == 0:
            return
        run_gemm(calls_at(tuple(sorted(dims.items()))), ptr(b_a), ptr(b_b), ptr(scratch),
                 cupy.cuda.get_current_stream().ptr)

    pl.add_host(HostStep([b_a, b_b, scratch], node.id, "matmul (cuBLAS split-K)", run, symbols_of(M, a3, b3)))
    add_partials_sum(pl, node, scratch, S, M, N)
    return True


@functools.lru_cache(maxsize=1024)
def _split_of(va: View, vb: View, shape: tuple, dtype: str, dims_max: tuple, sm_count: int, cap: int):
    """(S, A's and B's chunked views, M at the largest dims, N) of a split-K product, or None (no
    split worth it, or a layout cuBLAS cannot read); kept: a search plans the same products
    candidate after candidate."""
    M = shape[0]
    K, N = to_int_or_expr(va.shape[-1]), to_int_or_expr(shape[1])
    if not isinstance(K, int) or not isinstance(N, int) or N % 4:
        return None
    d = dict(dims_max)
    m_max = int(evaluate(M, d))
    S = split_count(m_max, N, K, sm_count, cap)
    if S == 1:
        return None
    a3, b3 = chunked(va, vb, S, K)
    if gemm_plan(a3.evaluate(d), b3.evaluate(d), (S, m_max, N), dtype, "float32") is None:
        return None
    return S, a3, b3, m_max, N


def add_product(pl, node, kind: str, label: str, call: str, S: int, part_floats, block: int, grid3: tuple,
                guard=(), meta=None):
    """Add the kernel of a product C = in0 @ in1 (a GEMV's or a few-row GEMM's) that stores C
    itself when S == 1, handing each value to its store functor (meta ``_store_call``: epilogue.py
    may fold the next elementwise step in), or else writes S float32 partials of ``part_floats``
    each into a new scratch, which it returns for a second kernel to add. ``call`` is the kernel
    call with @PART@ for the partials' pointer and @STORE@ for the store functor."""
    T = pl.lang.storage[node.dtype.name]
    bufs = [("in0", "b0", node.dtype, True), ("in1", "b1", node.dtype, True)]
    ids = [pl.input_buf(node, 0), pl.input_buf(node, 1)]
    scratch, store = None, {}
    if S > 1:
        scratch = pl.scratch(dt.float32, S * part_floats)
        bufs.append(("scratch", "part", dt.float32, False))
        ids.append(scratch)
        call = call.replace("@PART@", "part")
        body = call.replace("@STORE@", f"LfGemvStore<{T}>{{nullptr}}")  # (never called)
    else:
        bufs.append(("out", "out", node.dtype, False))
        ids.append(pl.node_buf[node.id])
        call = call.replace("@PART@", "(float*)0")
        store = {"_store_call": call, "_store_T": T, "_guard": tuple(guard)}
        body = call.replace("@STORE@", f"LfGemvStore<{T}>{{out}}")
    src = finish(pl.lang, kind, list(guard) + [body], bufs, block, 1, 1,
                 meta={"hand": True, "grid3": grid3, "split": S, **(meta or {}), **store})
    pl.add_kernel(src, ids, node.id, label)
    return scratch


SUM_WIDTH_SWITCH = "LUMINAL_CUDA_SUM_WIDTH"  # 1, 2 or 4 elements a thread (for A/B sweeps)
SUM_WIDE_BLOCKS_PER_SM = 4  # four elements a thread only when that still gives this many blocks an SM


def sum_width(mn_max: int, sm_count: int) -> int:
    """Elements of C a thread of the partials' sum adds (E): 2, or 4 when the grid still has
    SUM_WIDE_BLOCKS_PER_SM 256-thread blocks an SM (never at split-K's 64 rows and fewer: 4 was
    the only width before, and gave a 32-row, 2048-wide product 64 blocks on 132 SMs), unless
    LUMINAL_CUDA_SUM_WIDTH gives E. H200, the 32-token Llama-3.2-1B prompt step replayed alone
    (runs AQ and AR, interleaved): E = 2 1352.8-1357.6 us, 4 1370.0-1374.6 us, 1 1410-1411 us,
    1 for 2048 columns with 2 for 8192 1373.8 us."""
    v = os.environ.get(SUM_WIDTH_SWITCH, "").strip()
    if v:
        if v not in ("1", "2", "4"):
            raise ValueError(f"{SUM_WIDTH_SWITCH}={v!r}: expected 1, 2 or 4 elements a thread")
        return int(v)
    return 4 if mn_max // (256 * 4) >= SUM_WIDE_BLOCKS_PER_SM * sm_count else 2


def add_partials_sum(pl, node, scratch: int, S: int, M, N: int):
    """The kernel adding S float32 partials of C (M, N) (each M * N floats, row-major, at the
    call's M) in ``scratch`` and storing C: ``lf_split_k_sum_to``, whose store functor lets the
    elementwise step reading C fold in as its epilogue (epilogue.py). N must be a multiple of 4."""
    T = pl.lang.storage[node.dtype.name]
    E = sum_width(int(evaluate(M, pl.dims_max)) * N, pl.sm_count)
    call = _sum_call(S, E, M, N, tuple(pl.symbols))
    src = finish(pl.lang, "split_k_sum", [call.replace("@STORE@", f"LfGemvStore<{T}>{{out}}")],
                 [("scratch", "b0", dt.float32, True), ("out", "out", node.dtype, False)], 256,
                 as_expr(M) * (N // E), 256, meta={"hand": True, "_store_call": call, "_store_T": T, "_guard": ()})
    pl.add_kernel(src, [scratch, pl.node_buf[node.id]], node.id, "matmul (split-K sum)")


@functools.lru_cache(maxsize=1024)
def _sum_call(S: int, E: int, M, N: int, symbols: tuple) -> str:
    """lf_split_k_sum_to's call over C (M, N), E elements a thread, @STORE@ for its store."""
    mn = ix.r(as_expr(M) * N, ix.dim_names(symbols))
    return f"lf_split_k_sum_to<{S}, {E}>(b0, {mn}, @STORE@);"


__all__ = ["SWITCH", "SUM_WIDTH_SWITCH", "split_count", "chunked", "try_split_k", "max_split", "sum_width",
           "add_product", "add_partials_sum"]

"""Tensor-core GEMM for few rows: C (M, N) = A (M, K) @ W^T, W stored (N, K) (a Linear's
layout), M at most 64 (a prompt's tokens), half precision, on sm_80 and later.

cuBLAS tiles such a product by its columns and streams the weights at ~2.3-2.8 TB/s on the H200
(docs/benchmarks.md runs AG and AK); ``lf_skinny_nt_to`` (kernels/gemv.cu) reads each weight
once in 16-byte loads as the GEMV does, multiplies on tensor cores (mma.sync m16n8k16) and, with
a K split, leaves float partials that ``split_k.add_partials_sum``'s kernel adds (and where the
next elementwise step folds in).

Opt-in (``LUMINAL_CUDA_SKINNY=1``): correct on the H200 but slower than cuBLAS split-K (run AP
in docs/benchmarks.md: 8.3 against 6.6 us at 32 x 2048 x 2048, 15.7 against 13.1 us at 32 x
8192 x 2048; the 32-token prompt step 1961-1965 us against 1371 us). Since run AV it skips the
16-row tiles past the call's M (a 32-token prompt in a bucket up to 64 multiplied 64 rows) and
asks L2 for its first W chunk before the PDL wait (``LUMINAL_CUDA_SKINNY_PREFETCH``): the step
1705-1709 us against 1303 us. A warp keeps one 64-wide chunk of K in flight and every block
reloads A's rows; a faster version would stage A in shared memory once a block and keep several
chunks of W in flight (cp.async).
"""
from __future__ import annotations


from ...ir import dtypes as dt
from ...ir.expr import to_int_or_expr
from ...ir.view import View
from ..render import index as ix
from .pdl import prefetch_chunks
from .plan import evaluate
from .split_k import add_partials_sum, add_product
from .switches import switch_on

SWITCH = "LUMINAL_CUDA_SKINNY"
MAX_ROWS = 64  # rows of C at the bucket's largest dims (MT = 4 tiles of 16)
ROWS_A_BLOCK = 32  # rows of W a block covers (4 mma tiles of 8 columns of C)
CHUNK = 64  # K a warp's loads cover at once (two 16-byte loads a row a lane)
WARPS = 4
BLOCKS_PER_SM = 4  # 128-thread blocks an SM the launch fills
MAX_SPLIT = 8  # partials lf_split_k_sum_to adds
PREFETCH = 1  # chunks of W a warp asks L2 for before its PDL wait (LUMINAL_CUDA_SKINNY_PREFETCH)
PREFETCH_SWITCH = "LUMINAL_CUDA_SKINNY_PREFETCH"


def enabled() -> bool:
    return switch_on(SWITCH, False, "the tensor-core kernel for skinny prompt GEMMs")


def launch(N: int, K: int, sm_count: int) -> tuple:
    """(blocks along N, K split S): about BLOCKS_PER_SM blocks an SM, every warp at least one
    chunk of K, every block as many chunks as the others."""
    blocks_x = -(-N // ROWS_A_BLOCK)
    chunks = K // CHUNK
    S = max(1, min(chunks // WARPS, MAX_SPLIT, BLOCKS_PER_SM * sm_count // blocks_x))
    return blocks_x, -(-chunks // -(-chunks // S))


def _static_multiple(e, m: int):
    """``e`` as an int when it is a static multiple of ``m``, else None."""
    v = to_int_or_expr(e)
    return v if isinstance(v, int) and v % m == 0 else None


def try_skinny(pl, node, va: View, vb: View) -> bool:
    """Plan C = A @ B with lf_skinny_nt_to (and the partials' sum); False (nothing planned) when
    the switch is off, the device older than sm_80, or the product not one it reads as it lies:
    2-D half precision, M <= 64, K a multiple of 64, A's rows and W's rows (B's columns)
    contiguous with leading dims and offsets multiples of 8 elements (16 bytes)."""
    if not enabled() or pl.arch < 80 or len(node.shape) != 2 or node.dtype not in (dt.float16, dt.bfloat16):
        return False
    if va.mask is not None or vb.mask is not None or len(va.shape) != 2 or len(vb.shape) != 2:
        return False
    M = node.shape[0]
    m_max = int(evaluate(M, pl.dims_max))
    K, N = _static_multiple(va.shape[-1], CHUNK), to_int_or_expr(node.shape[1])
    if not 1 <= m_max <= MAX_ROWS or K is None or not isinstance(N, int) or N % 4:
        return False
    lda, ldw = _static_multiple(va.strides[0], 8), _static_multiple(vb.strides[1], 8)
    off_a, off_w = _static_multiple(va.offset, 8), _static_multiple(vb.offset, 8)
    if va.strides[1] != 1 or vb.strides[0] != 1 or None in (lda, ldw, off_a, off_w):
        return False
    blocks_x, S = launch(N, K, pl.sm_count)
    pf = prefetch_chunks(PREFETCH_SWITCH, PREFETCH)
    call = (f"lf_skinny_nt_to<{pl.lang.storage[node.dtype.name]}, {-(-m_max // 16)}, {pf}>(b0 + {off_a}, {lda}, "
            f"b1 + {off_w}, {ldw}, @PART@, {ix.r(M, ix.dim_names(pl.symbols))}, {N}, {K}, {S}, @STORE@);")
    scratch = add_product(pl, node, "skinny", "matmul (skinny tensor cores)", call, S, m_max * N,
                          32 * WARPS, (blocks_x, S, 1), meta={"waits_inside": True})
    if S > 1:  # the blocks' float partials, added by a second kernel
        add_partials_sum(pl, node, scratch, S, M, N)
    return True


__all__ = ["SWITCH", "enabled", "launch", "try_skinny"]

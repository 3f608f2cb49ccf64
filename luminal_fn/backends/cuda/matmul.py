"""The generic ``matmul`` kind on CUDA: a GEMV kernel for one activation row, cuBLAS (called
directly, so a captured CUDA graph holds it) for float32/float16/bfloat16 GEMMs, and a rendered
sum-of-products reduction for everything else (int32, bool, masked operands).

A (..., M, K) and B (..., K, N) arrive as views; the output (..., M, N) is contiguous.
"""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.expr import Expr, as_expr, same
from ...ir.graph import _freeze
from ...ir.view import View
from ..render import index as ix
from ..render.reduce import render_reduce
from ..render.kernels import KernelInput, finish
from ..render.nodes import Rendered, kept_rendering
from .cublas import gemm_plan, run_gemm
from .plan import HostStep, evaluate, lowerer, sibling_key, symbols_of
from .siblings import (MAX_UNROLLED, KnSegment, NkSegment, forced_warps_per_row, nk_shape, render_gemv_nk,
                       skip_when_empty)
from .skinny import try_skinny
from .split_k import add_product, try_split_k

GEMV_DTYPES = (dt.float32, dt.float16, dt.bfloat16)
CUBLAS_DTYPES = (dt.float32, dt.float16, dt.bfloat16)


def _static(e) -> int | None:
    if isinstance(e, int):
        return e
    e = as_expr(e)
    return e.args[0] if e.op == "const" else None


def _aligned(e, v: int) -> bool:
    s = _static(e)
    return s is not None and s % v == 0


@lowerer("matmul")
def lower_matmul(pl, node):
    (sa, va), (sb, vb) = node.inputs
    da, db = pl.graph.nodes[sa].dtype, pl.graph.nodes[sb].dtype
    scalar = pl.kernel_input(node, 0).scalar is not None or pl.kernel_input(node, 1).scalar is not None
    strategy = node.attrs.get("strategy")
    if not scalar and strategy in (None, "gemv") and _try_gemv(pl, node, va, vb, da, db):
        return
    if (not scalar and (strategy == "cublas" or (strategy is None and _worth_cublas(pl, va)))
            and node.dtype in CUBLAS_DTYPES
            and da == db == node.dtype and va.mask is None and vb.mask is None
            and all(_nonneg(s) for s in va.strides + vb.strides)
            and (node.dtype != dt.bfloat16 or _direct_layout(pl, node, va, vb))):
        if not try_skinny(pl, node, va, vb) and not try_split_k(pl, node, va, vb):
            _cublas(pl, node, va, vb)  # (CuPy's fallback for other layouts has no bfloat16 GEMM)
        return
    _rendered(pl, node, va, vb)


def _worth_cublas(pl, va: View) -> bool:
    """cuBLAS runs from the host, so a plan holding it cannot replay as one CUDA graph; tiny
    products (a decode step's attention: one query row per head, batched over heads) cost less
    as rendered kernels inside the graph. Rows M of at most SMALL_M at the bucket's largest dims
    (a symbolic s is 1 in the decode bucket) stay rendered."""
    m = va.shape[-2]
    m = int(evaluate(m, pl.dims_max)) if isinstance(m, Expr) else int(m)
    return m > SMALL_M


SMALL_M = 1


def _gemm_at(va: View, vb: View, shape, dtype, dims) -> tuple:
    """(output shape, cuBLAS calls or None when a layout needs a copy) at concrete ``dims``."""
    es = tuple(int(evaluate(d, dims)) for d in shape)
    return es, gemm_plan(va.evaluate(dims), vb.evaluate(dims), es, dtype.name)


def _direct_layout(pl, node, va: View, vb: View) -> bool:
    """Whether cuBLAS reads both operands as they lie at the bucket's largest dims."""
    return _gemm_at(va, vb, node.shape, node.dtype, pl.dims_max)[1] is not None


def _at_most(pl, e) -> int:
    """A dim's value at the bucket's largest dims (its static value when it has one)."""
    v = _static(e)
    return v if v is not None else int(evaluate(e, pl.dims_max))


def _nonneg(s) -> bool:
    v = _static(s)
    return v is None or v >= 0  # symbolic strides are products of dims: never negative


# ---- the rendered fallback ---------------------------------------------------------------------
def _rendered(pl, node, va: View, vb: View):
    """out[..., m, n] = sum_k A[..., m, k] * B[..., k, n] as a fused reduction over (..., M, N, K)."""
    nd = len(va.shape)
    M, K = va.shape[-2], va.shape[-1]
    N = vb.shape[-1]
    a3 = va.insert_axis(nd - 1, N)  # (..., M, N, K), broadcast along N
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    b3 = vb.permute(perm).insert_axis(nd - 2, M)  # (..., M, N, K)
    in_shape = tuple(node.shape) + (K,)
    d = node.dtype.name
    ins = [KernelInput(a3, pl.kernel_input(node, 0).dtype, pl.kernel_input(node, 0).scalar),
           KernelInput(b3, pl.kernel_input(node, 1).dtype, pl.kernel_input(node, 1).scalar)]
    tree = ("Mul", d, ("Cast", d, ("in", 0)), ("Cast", d, ("in", 1)))
    key = (pl.lang.name, id(pl.lang), "matmul", in_shape, nd, d,
           tuple((i.view, i.dtype.name, _freeze(i.scalar)) for i in ins),
           tuple(sorted(pl.dims_max.items())), tuple(pl.symbols), pl.sm_count)

    def render():
        ks = render_reduce(pl.lang, in_shape, nd, "sum", tree, ins, node.dtype, pl.dims_max, pl.symbols,
                           sm_count=pl.sm_count)
        return [Rendered(k, {"in0": 0, "in1": 1}) for k in ks]

    pl.bind(kept_rendering(pl.lang, key, render), node)


# ---- GEMV --------------------------------------------------------------------------------------
def _gemv_layout(pl, node, va: View, vb: View, da, db) -> str | None:
    """Which GEMV kernel reads these operands as they lie: "kn" (W stored (K, N), n contiguous),
    "nk" (W stored (N, K), k contiguous: a Linear weight) or None (one activation row at most,
    static N and K, 16-byte vectors along the unit-stride axis, aligned offsets)."""
    if not (node.dtype in GEMV_DTYPES and da == db == node.dtype):
        return None
    if va.mask is not None or vb.mask is not None:
        return None
    rows = va.shape[:-1]  # batch dims and M: one row in all, at most, for this bucket
    if any(_at_most(pl, d) != 1 for d in rows):
        return None
    N, K = _static(vb.shape[-1]), _static(va.shape[-1])
    if N is None or K is None or N < 1 or K < 1:
        return None
    V = 16 // node.dtype.itemsize
    if not (same(va.strides[-1], 1) and _aligned(va.offset, V)):
        return None
    s_k, s_n = vb.strides[-2], vb.strides[-1]
    if same(s_n, 1) and N % V == 0 and _aligned(s_k, V) and _aligned(vb.offset, V):
        return "kn"
    if same(s_k, 1) and K % V == 0 and _aligned(s_n, V) and _aligned(vb.offset, V):
        return "nk"
    return None


@sibling_key("matmul")
def _gemv_sibling(pl, node):
    """GEMVs of one layout that read the same producer through the same view (and so the same x
    buffer and offset) can share a launch (siblings.py)."""
    if node.attrs.get("strategy") not in (None, "gemv") or len(node.inputs) != 2:
        return None
    (sa, va), (sb, vb) = node.inputs
    if pl.is_scalar_constant(sa) or pl.is_scalar_constant(sb):
        return None
    da, db = pl.graph.nodes[sa].dtype, pl.graph.nodes[sb].dtype
    layout = _gemv_layout(pl, node, va, vb, da, db)
    if layout is None:
        return None
    return (f"gemv_{layout}", sa, va.key(), node.dtype.name)


KN_ROWS = 8  # rows of W a thread of lf_gemv_kn_to loads at once (8 x 16 bytes in flight; ~118 registers)
KN_BLOCKS_PER_SM = 2  # 256-thread blocks an SM the launch fills (as many as those registers let in)
KN_MAX_SPLIT = 64  # chunks of K at most: lf_gemv_partials_to adds this many partials a column
# the narrowest stripe: 8 lanes of 16 bytes, 128 contiguous bytes of each row (H200 run AL: 64-byte
# stripes read slower, 0.81 against 0.83 of copy at 2048x8192 bf16 unsplit; 128-byte ones with no
# split took float32 2048x8192 from 0.80 to 0.94-0.96 of copy, the bf16 shapes within 2%)
KN_MIN_LANES = 8


def kn_launch(N: int, K: int, V: int, sm_count: int) -> tuple:
    """(column stripes, K split S, lanes a row LC) of lf_gemv_kn_to: at most KN_BLOCKS_PER_SM
    blocks an SM in all, so the blocks run as one wave (H200 sweep in docs/benchmarks.md: 8 rows
    a thread, 2 blocks an SM), every block over as many chunks of K as the others (one with a
    chunk more would be the launch's tail). Of the stripe widths LC * V (LC in 32, 16, 8, 4, not
    under KN_MIN_LANES) the one needing the fewest partials wins, the widest among equals: a
    float32 product of 8192 columns fills the device in 128-byte stripes with no split (and no
    second kernel adding partials)."""
    best = None
    for lc in (32, 16, 8, 4):
        if lc < KN_MIN_LANES:
            break
        blocks_x = -(-N // (lc * V))
        chunks = -(-K // (8 * (32 // lc) * KN_ROWS))
        S = max(1, min(chunks, KN_MAX_SPLIT, KN_BLOCKS_PER_SM * sm_count // blocks_x))
        S = -(-chunks // -(-chunks // S))
        if best is None or S < best[1]:
            best = (blocks_x, S, lc)
    return best


def _try_gemv(pl, node, va: View, vb: View, da, db) -> bool:
    layout = _gemv_layout(pl, node, va, vb, da, db)
    if layout is None:
        return False
    rows = va.shape[:-1]
    N, K = _static(vb.shape[-1]), _static(va.shape[-1])
    V = 16 // node.dtype.itemsize
    s_k, s_n = vb.strides[-2], vb.strides[-1]
    T = pl.lang.storage[node.dtype.name]
    nm = ix.dim_names(pl.symbols)
    r = lambda e: ix.r(e, nm)  # noqa: E731
    b_a, b_w, out = pl.input_buf(node, 0), pl.input_buf(node, 1), pl.node_buf[node.id]
    # a symbolic row count is 1 at the bucket's largest dims, so 0 or 1 in a call: skip on 0
    symbolic = [d for d in rows if _static(d) is None]
    guard = [skip_when_empty(' * '.join(f'({r(d)})' for d in symbolic))] if symbolic else []
    if layout == "kn":
        blocks_x, S, lanes = kn_launch(N, K, V, pl.sm_count)
        seg = KnSegment(node.dtype, T, KN_ROWS, lanes, N, K, S, blocks_x, r(vb.offset), r(s_k), r(va.offset),
                        tuple(guard))
        # (the kernel writing y calls store(n, value): epilogue.py may pass its own, "_store_call";
        # siblings.merge_gemv_steps joins this GEMV with adjacent ones that read the same x, "_kn")
        call = seg.call("b1", "b0", "@PART@", "@STORE@", "blockIdx.x", "blockIdx.y")
        scratch = add_product(pl, node, "gemv_kn", "matmul (gemv kn)", call, S, N, 256, (blocks_x, S, 1),
                              guard, {"lanes": lanes, "_kn": seg})
        if S > 1:  # the blocks' float partials, added up by a second kernel
            call2 = seg.partials_call("b0", "blockIdx.x", "@STORE@")  # (a block for 128 columns)
            src2 = finish(pl.lang, "gemv_part", guard + [call2.replace("@STORE@", f"LfGemvStore<{T}>{{out}}")],
                          [("scratch", "b0", dt.float32, True), ("out", "out", node.dtype, False)], 256, 2 * N, 256,
                          meta={"hand": True, "_store_call": call2, "_store_T": T, "_guard": tuple(guard),
                                "_kn_part": seg})
            pl.add_kernel(src2, [scratch, out], node.id, "matmul (gemv partials)")
        return True
    wpr = _warps_per_row(N, K, V, pl.sm_count)
    iters, blocks = nk_shape(N, K, V, wpr, MAX_UNROLLED)
    seg = NkSegment(node.dtype, T, iters, wpr, N, K, r(vb.offset), r(s_n), r(va.offset), blocks, tuple(guard))
    # (siblings.merge_gemv_steps joins this step with adjacent ones that read the same x)
    pl.add_kernel(render_gemv_nk(pl.lang, [seg]), [b_a, b_w, out], node.id, "matmul (gemv nk)")
    return True


WPR_SWITCH = "LUMINAL_CUDA_GEMV_WPR"  # warps a row of every lf_gemv_nk GEMV (for A/B sweeps)


def _warps_per_row(N: int, K: int, V: int, sm_count: int) -> int:
    """Warps sharing one row of W (N, K): the fewest that give the grid (N * wpr / 8 blocks of 256
    threads) about three blocks per SM, with at most MAX_UNROLLED 16-byte loads per lane.
    In the Llama-3.2-1B bf16 decode step on the H200 (runs CC-CE, docs/benchmarks.md) the o and
    down projections, each waiting for the kernel before, end sooner in 512 blocks (2 warps a
    row) than in 1024 (4 warps; the fastest launch alone and back to back, gemv_sweep.py): o adds
    3.8 against 4.5 us, down 10.1 against 11.4, and the step replays in 770 against 788 us. One
    warp a row (256 blocks) puts down's 32 loads a lane in the loop: 12.1 us. 512-row matrices
    take all 8 warps. LUMINAL_CUDA_GEMV_WPR (1, 2, 4 or 8, at most what K's 16-byte loads allow)
    overrides it."""
    forced = forced_warps_per_row(WPR_SWITCH, K, V)
    if forced is not None:
        return forced
    wpr = 1
    while (wpr < 8 and (2 * wpr) * 32 * V <= K
           and (N * wpr // 8 < 3 * sm_count or K > MAX_UNROLLED * wpr * 32 * V)):
        wpr *= 2
    return wpr


# ---- cuBLAS ------------------------------------------------------------------------------------
def _cublas(pl, node, va: View, vb: View):
    """A host step: one cuBLAS call (a few when batch axes do not collapse) over the operand
    buffers as they lie, made through ctypes so that the step can be captured in a CUDA graph.
    A layout cuBLAS cannot read without a copy goes through ``cupy.matmul`` (not capturable)."""
    b_a, b_b, out = pl.input_buf(node, 0), pl.input_buf(node, 1), pl.node_buf[node.id]
    shape = tuple(node.shape)
    dtype = node.dtype
    calls_memo: dict = {}

    def calls_at(dims):
        key = tuple(sorted(dims.items()))
        hit = calls_memo.get(key)
        if hit is None:
            if len(calls_memo) > 16:
                calls_memo.clear()
            hit = calls_memo[key] = _gemm_at(va, vb, shape, dtype, dims)
        return hit

    def run(ptr, dims):
        import cupy

        es, calls = calls_at(dims)
        if not all(es):
            return
        stream = cupy.cuda.get_current_stream()
        if es and int(evaluate(va.shape[-1], dims)) == 0:  # empty sum: zeros
            n = 1
            for d in es:
                n *= d
            cupy.cuda.runtime.memsetAsync(ptr(out), 0, n * dtype.itemsize, stream.ptr)
        elif calls is not None:
            run_gemm(calls, ptr(b_a), ptr(b_b), ptr(out), stream.ptr)
        else:
            a = _strided(ptr(b_a), va, dtype, dims)
            b = _strided(ptr(b_b), vb, dtype, dims)
            o = _strided(ptr(out), View.contiguous(shape), dtype, dims)
            cupy.matmul(a, b, out=o)

    pl.add_host(HostStep([b_a, b_b, out], node.id, "matmul (cuBLAS)", run, symbols_of(va, vb, shape)))


def _strided(ptr: int, view: View, dtype, dims):
    """A CuPy array over device memory at ``ptr`` laid out as ``view`` (no copy)."""
    import cupy

    from .device import cupy_dtype

    v = view.evaluate(dims)
    item = dtype.itemsize
    span = 1
    for d, s in zip(v.shape, v.strides):
        if d == 0:
            span = 0
            break
        span += (d - 1) * s
    mem = cupy.cuda.UnownedMemory(ptr, max(span + v.offset, 1) * item, None)
    mp = cupy.cuda.MemoryPointer(mem, v.offset * item)
    return cupy.ndarray(tuple(v.shape), cupy_dtype(dtype), mp, tuple(s * item for s in v.strides))


__all__ = ["lower_matmul"]

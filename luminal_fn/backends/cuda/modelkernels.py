"""The model kernels of optimize/rules/specialize_models.egg on CUDA: dlrm_interact, conv2d_bias,
linear_bias, matmul_t (the embedding-bag kernels are in bagkernels.py, which shares the helpers
here).

Each ``CustomOp`` carries its inputs as views (in the rule's IList order) and its integer
parameters in ``attrs["params"]`` (ints or Exprs, rendered as C so symbolic dims are read from the
parameter table). The semantics are those of the NumPy backend's kernels
(backends/numpy/model_kernels.py); float math accumulates in float32 registers, integer math in
int, results are stored in the node's dtype.

dlrm_interact and conv2d_bias are rendered here as self-contained kernels (the algorithms of
kernels/dlrm_interact.cu and conv2d.cu, generalised to every
storage dtype and to strided reads through the P table). A masked view, a scalar literal, or a
layout a kernel cannot address with strides is first copied to contiguous scratch memory.
linear_bias is the matmul lowering (GEMV, cuBLAS or the rendered reduction) into scratch, then a
rendered bias add into the output; matmul_t is the matmul lowering with the right operand's last
two axes swapped (a transposed operand is only strides).
"""
from __future__ import annotations

from dataclasses import replace

from ...ir import dtypes as dt
from ...ir.expr import as_expr
from ...ir.view import View
from ..render import index as ix
from ..render.kernels import KernelInput, finish, render_elementwise, zero_of
from ..render.lang import compute_type, convert, load_expr, store_expr
from ..render.tree import literal
from .matmul import lower_matmul
from .plan import lowerer

MODEL_KINDS = ("embedding_bag", "dlrm_interact", "conv2d_bias", "linear_bias", "matmul_t")
MULTI_TABLE_KINDS = ("embedding_bag_multi", "embedding_bag_multi_raw")  # K stacked bags in one launch
SHARED_LIMIT = 48 * 1024  # dynamic shared memory usable without an opt-in attribute
DLRM_THREADS = 128
DLRM_MAX_SAMPLES = 32  # samples of T per block when F is small


def _r(pl, e) -> str:
    return ix.r(e, ix.dim_names(pl.symbols))


def _params(node, n: int, kind: str) -> tuple:
    p = tuple(node.attrs.get("params") or ())
    if len(p) != n:
        raise ValueError(f"CUDA {kind} kernel (node %{node.id}): expected {n} params, got {p!r}")
    return p


def _unmasked(view: View) -> bool:
    return view.mask is None or all(ix.mask_trivial(view, a) for a in range(len(view.shape)))


def _operand(pl, node, k, ok=lambda v: True) -> tuple:
    """(buffer id, view) of input k; a contiguous scratch copy when the view is masked, the
    producer is a scalar literal (no buffer), or ``ok(view)`` rejects the layout."""
    view = node.inputs[k][1]
    if not _unmasked(view) or pl.kernel_input(node, k).scalar is not None or not ok(view):
        return pl.materialize(node, k)
    return pl.input_buf(node, k), View(view.shape, view.strides, view.offset, None)


def _linear(view: View):
    """(offset, step) when the view's elements in row-major order lie at offset + i * step."""
    v = View(view.shape, view.strides, view.offset, None)
    shape, (cv,) = ix.coalesce(v.shape, [v])
    if len(shape) == 0:
        return view.offset, 0
    if len(shape) == 1:
        return view.offset, cv.strides[0]
    return None


def _in_dtype(pl, node, k) -> dt.DType:
    return pl.graph.nodes[node.inputs[k][0]].dtype


def _load(pl, d: dt.DType, x: str, want: str) -> str:
    """The storage element ``x`` of dtype ``d`` as compute type ``want``."""
    return convert(pl.lang, load_expr(pl.lang, d, x), compute_type(d), want)


def _smem_decl(ct: str, name: str) -> str:
    return f"extern __shared__ __align__(16) unsigned char lf_smem[]; {ct}* {name} = ({ct}*)lf_smem;"


# ---- dlrm_interact -----------------------------------------------------------------------------
def _dlrm_tiling(F, D, pl, ct: str):
    """(samples per block, shared row stride, vector dots) for T staged in shared memory, or None
    when one sample's rows do not fit. Rows are padded so a warp's threads (consecutive pairs:
    one row i, consecutive rows j) hit distinct banks: +4 floats for 16-byte reads, an odd
    stride for scalar ones. Small F packs several samples per block to keep the threads busy."""
    fmax, dmax = ix.max_value(F, pl.dims_max), ix.max_value(D, pl.dims_max)
    if fmax is None or dmax is None:
        return None
    vec = ct == "float" and isinstance(D, int) and D % 4 == 0
    ld = dmax + 4 if vec else (dmax if dmax % 2 else dmax + 1)
    per_sample = max(fmax, 1) * ld * 4
    if per_sample > SHARED_LIMIT:
        return None
    pairs = max(fmax * (fmax - 1) // 2, 1)
    samples = max(1, min(DLRM_MAX_SAMPLES, -(-DLRM_THREADS // pairs), SHARED_LIMIT // per_sample))
    return samples, ld, vec


@lowerer("dlrm_interact")
def lower_dlrm_interact(pl, node):
    """out[b, p] = dot(T[b, i_p], T[b, j_p]) over the strict lower triangle in tril_indices
    order. With T[b] staged in shared memory, each thread sums whole pairs (consecutive threads
    take consecutive pairs, so row i is a broadcast and rows j are distinct banks), four partial
    sums over 16-byte reads when D allows; several samples share a block when F is small.
    Without room in shared memory, a warp per pair reads T from global memory."""
    B, F, D = _params(node, 3, "dlrm_interact")
    ct = compute_type(node.dtype)
    b_t, tv = _operand(pl, node, 0, lambda v: len(v.shape) == 3)
    tdt = _in_dtype(pl, node, 0)
    sb, sf, sd = tv.strides
    r = lambda e: _r(pl, e)  # noqa: E731
    tiling = _dlrm_tiling(F, D, pl, ct)
    at = lambda b, f, d: (f"b0[({r(tv.offset)}) + (long long)({b}) * ({r(sb)}) + (long long)({f}) * ({r(sf)})"  # noqa: E731
                          f" + (long long)({d}) * ({r(sd)})]")
    decode = ["  int i = (int)((1.0f + sqrtf(1.0f + 8.0f * (float)p)) * 0.5f);",
              # the row i with i(i-1)/2 <= p < i(i+1)/2 (the quadratic formula, then exact fix-ups)
              "  while (i > 1 && i * (i - 1) / 2 > p) --i;",
              "  while ((i + 1) * i / 2 <= p) ++i;",
              "  const int j = p - i * (i - 1) / 2;"]
    body = [f"const int nb = {r(B)}, nf = {r(F)}, nd = {r(D)};",
            "const int np_ = nf * (nf - 1) / 2;"]
    if tiling is None:
        shared, grid = 0, (B,)
        body += ["const int b = blockIdx.x;",
                 "if (b >= nb) return;",
                 "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;",
                 "for (int p = warp; p < np_; p += warps) {", *decode,
                 f"  {ct} acc = {zero_of(ct)};",
                 f"  for (int d = lane; d < nd; d += 32) acc = ({ct})(acc + "
                 f"{_load(pl, tdt, at('b', 'i', 'd'), ct)} * {_load(pl, tdt, at('b', 'j', 'd'), ct)});",
                 "  #pragma unroll",
                 f"  for (int o = 16; o > 0; o >>= 1) acc = ({ct})(acc + lf_shfl(acc, o));",
                 f"  if (lane == 0) out[(long long)b * np_ + p] = {store_expr(pl.lang, node.dtype, 'acc', ct)};",
                 "}"]
    else:
        samples, ld, vec = tiling
        shared = samples * ix.max_value(F, pl.dims_max) * ld * 4
        grid = ((as_expr(B) + (samples - 1)) // samples,)
        body += [_smem_decl(ct, "rows"),
                 f"const int first = blockIdx.x * {samples};"]
        if vec and tdt == dt.float32 and all(isinstance(x, int) and x % 4 == 0 for x in (sb, sf, tv.offset)) \
                and sd == 1:  # 16-byte copies of contiguous float rows
            body += ["const int nd4 = nd / 4;",
                     f"for (int e = threadIdx.x; e < {samples} * nf * nd4; e += blockDim.x) {{",
                     "  const int s = e / (nf * nd4), f = (e / nd4) - s * nf, d = (e - (e / nd4) * nd4) * 4;",
                     "  if (first + s >= nb) break;",
                     "  float x[4];",
                     f"  lf_vld<4>(b0 + {tv.offset} + (long long)(first + s) * {sb} + f * {sf} + d, x);",
                     f"  lf_vst<4>(rows + (s * nf + f) * {ld} + d, x);",
                     "}"]
        else:
            body += ["for (int e = threadIdx.x; e < " + f"{samples} * nf * nd; e += blockDim.x) {{",
                     "  const int s = e / (nf * nd), f = (e / nd) - s * nf, d = e - (e / nd) * nd;",
                     "  if (first + s < nb) "
                     f"rows[(s * nf + f) * {ld} + d] = {_load(pl, tdt, at('first + s', 'f', 'd'), ct)};",
                     "}"]
        body += ["__syncthreads();",
                 f"for (int q = threadIdx.x; q < {samples} * np_; q += blockDim.x) {{",
                 "  const int s = q / np_, p = q - s * np_;",
                 "  if (first + s >= nb) break;", *decode,
                 f"  const {ct}* ri = rows + (s * nf + i) * {ld};",
                 f"  const {ct}* rj = rows + (s * nf + j) * {ld};"]
        if vec:
            body += ["  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;",
                     "  for (int d = 0; d < nd; d += 4) {",
                     "    float x[4], y[4];",
                     "    lf_vld<4>(ri + d, x);",
                     "    lf_vld<4>(rj + d, y);",
                     "    a0 += x[0] * y[0]; a1 += x[1] * y[1]; a2 += x[2] * y[2]; a3 += x[3] * y[3];",
                     "  }",
                     "  const float acc = (a0 + a1) + (a2 + a3);"]
        else:
            body += [f"  {ct} acc = {zero_of(ct)};",
                     f"  for (int d = 0; d < nd; ++d) acc = ({ct})(acc + ri[d] * rj[d]);"]
        body += [f"  out[(long long)(first + s) * np_ + p] = {store_expr(pl.lang, node.dtype, 'acc', ct)};",
                 "}"]
    bufs = [("in0", "b0", tdt, True), ("out", "out", node.dtype, False)]
    src = finish(pl.lang, "dlrm_interact", body, bufs, DLRM_THREADS, 1, 1,
                 meta={"model": True, "grid3": grid, "shared": bool(shared)}, shared_bytes=shared)
    pl.add_kernel(src, [b_t, pl.node_buf[node.id]], node.id, "dlrm_interact")


# ---- conv2d_bias -------------------------------------------------------------------------------
@lowerer("conv2d_bias")
def lower_conv2d_bias(pl, node):
    """out[o, y, x'] = bias[o] + sum_{c,i,j} w[o, (c*kh + i)*kw + j] * x[c, y*sh + i*dh - pt,
    x'*sw + j*dw - pl], x read as zero outside (C, H, W); a 4-D x (N, C, H, W) is a batch of
    such convs, out (N, C_out, H_out, W_out). Grid (pixel blocks, C_out, N); the filter of output
    channel o is staged in shared memory when it fits; one thread per output pixel."""
    kh, kw, sh, sw, dh, dw, pt, pl_, ho, wo = _params(node, 10, "conv2d_bias")
    ct = compute_type(node.dtype)
    b_x, xv = _operand(pl, node, 0, lambda v: len(v.shape) in (3, 4))
    b_w, wv = _operand(pl, node, 1, lambda v: len(v.shape) == 2)
    xdt, wdt, bdt = (_in_dtype(pl, node, k) for k in range(3))
    if len(xv.shape) == 3:  # unbatched: one sample, no batch stride
        xv = View((1,) + tuple(xv.shape), (0,) + tuple(xv.strides), xv.offset, None)
    N, C, H, W = xv.shape
    co = node.shape[-3]
    r = lambda e: _r(pl, e)  # noqa: E731
    bufs = [("in0", "b0", xdt, True), ("in1", "b1", wdt, True)]
    ids = [b_x, b_w]
    bk = pl.kernel_input(node, 2)
    if bk.inlined:
        bias = convert(pl.lang, *literal(pl.lang, bk.scalar, bdt.name), ct)
    else:
        b_b, bv = _operand(pl, node, 2, lambda v: len(v.shape) == 1)
        bufs.append(("in2", "b2", bdt, True))
        ids.append(b_b)
        bias = _load(pl, bdt, f"b2[{r(bv.offset)} + (long long)o * ({r(bv.strides[0])})]", ct)
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    kmax = ix.max_value(ix.numel([C, kh, kw]), pl.dims_max)
    shared = max(kmax * 4, 4) if kmax is not None and kmax * 4 <= SHARED_LIMIT else 0
    (xn, xc, xh, xw), (wso, wsk) = xv.strides, wv.strides
    wat = f"b1[{r(wv.offset)} + (long long)o * ({r(wso)}) + (long long)(e) * ({r(wsk)})]"
    body = [f"const int nn = {r(N)}, nc = {r(C)}, nh = {r(H)}, nw = {r(W)}, nco = {r(co)};",
            f"const int kh = {r(kh)}, kw = {r(kw)}, sh = {r(sh)}, sw = {r(sw)}, dh = {r(dh)}, "
            f"dw = {r(dw)}, pt = {r(pt)}, pl = {r(pl_)}, ho = {r(ho)}, wo = {r(wo)};",
            "const int o = blockIdx.y, n = blockIdx.z;",
            "if (o >= nco || n >= nn) return;"]
    if shared:
        body += ["const int nk = nc * kh * kw;",
                 _smem_decl(ct, "filt"),
                 f"for (int e = threadIdx.x; e < nk; e += blockDim.x) filt[e] = {_load(pl, wdt, wat, ct)};",
                 "__syncthreads();"]
        tap = "filt[e]"
    else:
        tap = _load(pl, wdt, wat, ct)
    xat = (f"b0[{r(xv.offset)} + (long long)n * ({r(xn)}) + (long long)c * ({r(xc)}) + (long long)yy * ({r(xh)}) "
           f"+ (long long)xx * ({r(xw)})]")
    body += ["const int pix = blockIdx.x * blockDim.x + threadIdx.x;",
             "if (pix >= ho * wo) return;",
             "const int y = pix / wo, xo = pix - y * wo;",
             f"{ct} acc = {bias};",
             "for (int c = 0; c < nc; ++c) {",
             "  for (int i = 0; i < kh; ++i) {",
             "    const int yy = y * sh + i * dh - pt;",
             "    if (yy < 0 || yy >= nh) continue;",
             "    for (int j = 0; j < kw; ++j) {",
             "      const int xx = xo * sw + j * dw - pl;",
             "      if (xx < 0 || xx >= nw) continue;",
             "      const int e = (c * kh + i) * kw + j;",
             f"      acc = ({ct})(acc + {tap} * {_load(pl, xdt, xat, ct)});",
             "    }",
             "  }",
             "}",
             f"out[(((long long)n * nco + o) * ho + y) * wo + xo] = {store_expr(pl.lang, node.dtype, 'acc', ct)};"]
    for what, v in (("C_out", co), ("N", N)):
        if isinstance(v, int) and v > 65535:
            raise NotImplementedError(f"CUDA conv2d_bias kernel (node %{node.id}): {what}={v} exceeds "
                                      "the 65535 blocks of a grid's y and z")
    npix = ix.numel([ho, wo])
    gx = -(-npix // 128) if isinstance(npix, int) else (as_expr(npix) + 127) // 128
    grid3 = (gx, co, N)
    src = finish(pl.lang, "conv2d_bias", body, bufs, 128, 1, 1,
                 meta={"model": True, "grid3": grid3, "shared": bool(shared)}, shared_bytes=shared)
    pl.add_kernel(src, ids, node.id, "conv2d_bias")


# ---- matmul_t and linear_bias through the matmul lowering --------------------------------------
def _as_matmul(node, a, b):
    """A stand-in matmul node over input edges a (..., M, K) and b (..., K, N) with the same id."""
    va, vb = a[1], b[1]
    return replace(node, inputs=(a, b), attrs={"name": "matmul", "m": va.shape[-2],
                                                "n": vb.shape[-1], "k": va.shape[-1]})


@lowerer("matmul_t")
def lower_matmul_t(pl, node):
    """out[b] = a[b] @ c[b]^T: the matmul lowering with c's last two axes swapped."""
    _params(node, 4, "matmul_t")
    (sa, va), (sc, vc) = node.inputs
    nd = len(vc.shape)
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    lower_matmul(pl, _as_matmul(node, (sa, va), (sc, vc.permute(perm))))


@lowerer("linear_bias")
def lower_linear_bias(pl, node):
    """out = x @ w + b: the matmul lowering writes scratch, a rendered kernel adds the bias
    (broadcast over rows) into the output."""
    _params(node, 3, "linear_bias")
    out = pl.node_buf[node.id]
    shape = tuple(node.shape)
    tmp = pl.scratch(node.dtype, ix.numel(shape))
    pl.node_buf[node.id] = tmp  # the matmul lowering writes the node's buffer: point it at tmp
    try:
        lower_matmul(pl, _as_matmul(node, node.inputs[0], node.inputs[1]))
    finally:
        pl.node_buf[node.id] = out
    bk = pl.kernel_input(node, 2)
    bias2d = bk.view.insert_axis(0, shape[0])  # (N,) -> (M, N), stride 0 over rows
    d = node.dtype.name
    ins = [KernelInput(View.contiguous(shape), node.dtype), KernelInput(bias2d, bk.dtype, bk.scalar)]
    src = render_elementwise(pl.lang, shape, node.dtype, ("Add", d, ("in", 0), ("Cast", d, ("in", 1))),
                             ins, pl.dims_max, pl.symbols)
    role = {"in0": tmp, "out": out}
    if "in1" in src.buffers:
        role["in1"] = pl.input_buf(node, 2)
    pl.add_kernel(src, [role[x] for x in src.buffers], node.id, "linear_bias (bias add)")


__all__ = ["MODEL_KINDS", "MULTI_TABLE_KINDS"]


from . import bagkernels as _bags  # noqa: E402,F401  (registers the embedding-bag lowerers)

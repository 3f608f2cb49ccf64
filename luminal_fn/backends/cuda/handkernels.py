"""CustomOp kinds backed by the hand-written kernels in kernels/*.cu: rms_norm, softmax
(attention lives in attentionkernels.py, rope in ropekernels.py; kernels/README.md documents each kind's inputs and attrs
for rule writers).

Each lowering checks the operands' views, materialises the ones a kernel cannot read
directly, and renders a small ``extern "C"`` wrapper that reads pointers and dims from the
parameter table and calls the templated device function. The wrappers go through the same
:func:`~luminal_fn.backends.render.kernels.finish` as generated kernels, so they are cached,
named and launched the same way.
"""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.expr import same
from ...ir.view import View
from ..render import index as ix
from ..render.kernels import finish
from .plan import lowerer


def hand_source(pl, kind, body, bufs, block, work, per_block=1, meta=None, grid3=None):
    m = {"hand": True, **(meta or {})}
    if grid3 is not None:
        m["grid3"] = grid3
    return finish(pl.lang, kind, body, bufs, block, work, per_block, meta=m)


def storage(pl, d: dt.DType) -> str:
    return pl.lang.storage[d.name]


def names(pl) -> dict:
    return ix.dim_names(pl.symbols)


def rexpr(pl, e) -> str:
    return ix.r(e, names(pl))


def row_view(view: View):
    """(offset, row_stride, rows, D) when the view reads rows of D unit-stride elements with a
    single row stride (any leading shape that coalesces to one dim); else None."""
    shape = view.shape
    if not shape:
        return None
    if view.mask is not None and not all(ix.mask_trivial(view, a) for a in range(len(shape))):
        return None
    D = shape[-1]
    if not (same(view.strides[-1], 1) or same(D, 1)):
        return None
    lead = View(tuple(shape[:-1]), tuple(view.strides[:-1]), 0, None)
    if not lead.shape:
        return view.offset, D, 1, D
    cshape, (cv,) = ix.coalesce(lead.shape, [lead])
    if len(cshape) == 0:
        return view.offset, D, 1, D
    if len(cshape) == 1:
        return view.offset, cv.strides[0], cshape[0], D
    return None


def _rows_operand(pl, node, k):
    """(buffer, offset, row stride, rows, D) of input k, materialised when needed."""
    view = node.inputs[k][1]
    rv = row_view(view)
    if rv is None or pl.kernel_input(node, k).scalar is not None:
        b, v = pl.materialize(node, k)
        rv = row_view(v)
        return (b,) + rv
    return (pl.input_buf(node, k),) + rv


def _pow2_threads(n, lo=32, hi=512) -> int:
    n = max(int(n or 1), 1)
    t = 1 << (n - 1).bit_length()
    return max(lo, min(hi, t))


def _vector_elems(d: dt.DType) -> int:
    return 16 // d.itemsize


# ---- rms_norm ----------------------------------------------------------------------------------
@lowerer("rms_norm")
def lower_rms_norm(pl, node):
    T = storage(pl, node.dtype)
    b_x, off, rs, rows, D = _rows_operand(pl, node, 0)
    has_w = len(node.inputs) > 1
    eps = float(node.attrs.get("eps", 1e-6))
    w_off = float(node.attrs.get("weight_offset", 0.0))
    rnd = bool(node.attrs.get("round_before_weight", True))
    bufs = [("in0", "b0", node.dtype, True)]
    ids = [b_x]
    wptr = f"(const {T}*)0"
    W = T
    if has_w:
        wv = node.inputs[1][1]
        wd = pl.graph.nodes[node.inputs[1][0]].dtype
        W = storage(pl, wd)
        # the weight as a (D,) vector: the last axis of its (broadcast) view
        v1 = View((wv.shape[-1],), (wv.strides[-1],), wv.offset,
                  None if wv.mask is None else (wv.mask[-1],))
        lead_zero = all(same(s, 0) or same(d, 1) for s, d in zip(wv.strides[:-1], wv.shape[:-1]))
        if v1.mask is None and same(v1.strides[0], 1) and lead_zero and pl.kernel_input(node, 1).scalar is None:
            b_w, w_o = pl.input_buf(node, 1), v1.offset
        else:
            b_w, _ = pl.materialize(node, 1, v1 if lead_zero else None)
            w_o = 0
            if not lead_zero:
                raise NotImplementedError("rms_norm: the weight must broadcast along every axis but the last")
        bufs.append(("in1", "b1", wd, True))
        ids.append(b_w)
        wptr = f"b1 + ({rexpr(pl, w_o)})"
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    Dm = ix.max_value(D, pl.dims_max)
    threads = _pow2_threads((Dm or 1024) // (_vector_elems(node.dtype) * 2))
    body = [f"lf_rms_norm<{T}, {W}, {threads}, {'true' if has_w else 'false'}, {'true' if rnd else 'false'}>("
            f"b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), {wptr}, out, {rexpr(pl, rows)}, "
            f"{rexpr(pl, D)}, {eps!r}f, {w_off!r}f);"]
    src = hand_source(pl, "rms_norm", body, bufs, threads, rows, 1)
    pl.add_kernel(src, ids, node.id, "rms_norm")


# ---- softmax -----------------------------------------------------------------------------------
@lowerer("softmax")
def lower_softmax(pl, node):
    axis = node.attrs.get("axis", -1)
    if axis not in (-1, len(node.shape) - 1):
        raise NotImplementedError(f"softmax kernel: only the last axis (got axis={axis}); "
                                  "rules should permute first")
    T = storage(pl, node.dtype)
    in_dt = pl.graph.nodes[node.inputs[0][0]].dtype
    if in_dt != node.dtype:
        raise NotImplementedError(f"softmax kernel: input dtype {in_dt} must equal the output's {node.dtype}")
    b_x, off, rs, rows, D = _rows_operand(pl, node, 0)
    scale = float(node.attrs.get("scale", 1.0))
    Dm = ix.max_value(D, pl.dims_max)
    threads = _pow2_threads((Dm or 1024) // 4)
    body = [f"lf_softmax<{T}, {threads}>(b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), out, "
            f"{rexpr(pl, rows)}, {rexpr(pl, D)}, {scale!r}f);"]
    bufs = [("in0", "b0", node.dtype, True), ("out", "out", node.dtype, False)]
    src = hand_source(pl, "softmax", body, bufs, threads, rows, 1)
    pl.add_kernel(src, [b_x, pl.node_buf[node.id]], node.id, "softmax")

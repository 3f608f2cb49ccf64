"""The RoPE kinds on CUDA (kernels/rope.cu): ``rope``, attr-driven (x, cos, sin and a style
attr; no rule offers it), one thread per rotated pair.
"""
from __future__ import annotations

from ...ir.expr import as_expr
from ...ir.view import View, contiguous_strides
from ..render import index as ix
from ..render.kernels import BLOCK, gtid
from ..render.lang import load_expr, store_expr
from .handkernels import hand_source, names
from .plan import lowerer


# ---- rope --------------------------------------------------------------------------------------
@lowerer("rope")
def lower_rope(pl, node):
    style = node.attrs.get("style", "half")
    if style not in ("half", "interleaved"):
        raise ValueError(f"rope: style must be 'half' or 'interleaved', got {style!r}")
    shape = tuple(node.shape)
    D = shape[-1]
    if not isinstance(D, int) or D % 2:
        raise NotImplementedError(f"rope kernel: the last dim must be a static even size, got {D}")
    h = D // 2
    step, pair = (1, h) if style == "half" else (2, 1)
    pshape = shape[:-1] + (h,)
    views, ids, bufs, lasts = [], [], [], []
    for k in range(3):
        view = node.inputs[k][1]
        ki = pl.kernel_input(node, k)
        if view.mask is not None or ki.scalar is not None:
            b, view = pl.materialize(node, k)
        else:
            b = pl.input_buf(node, k)
        views.append(View(pshape, tuple(view.strides[:-1]) + (as_expr(view.strides[-1]) * step,), view.offset))
        lasts.append(view.strides[-1])
        ids.append(b)
        bufs.append((f"in{k}", f"b{k}", pl.graph.nodes[node.inputs[k][0]].dtype, True))
    ostr = contiguous_strides(shape)
    views.append(View(pshape, tuple(ostr[:-1]) + (step,), 0))
    cshape, cviews = ix.coalesce(pshape, views)
    nm = names(pl)
    n = ix.numel(pshape)
    itype = ix.index_type([ix.numel(shape)] + [ix.view_extent(v) for v in views], pl.dims_max)
    g, stride = gtid(pl.lang, itype)
    body = [f"const {itype} n = {ix.r(n, nm)};", f"for ({itype} i = {g}; i < n; i += {stride}) {{"]
    cl, cs = ix.coords(cshape, "i", nm, "c", itype)
    inner = list(cl)
    vals = []
    for k in range(3):
        d = bufs[k][2]
        a = ix.address(cviews[k], cs, nm)
        dist = ix.r(as_expr(lasts[k]) * pair, nm)
        inner.append(f"const {itype} a{k} = {a};")
        vals.append((load_expr(pl.lang, d, f"b{k}[a{k}]"), load_expr(pl.lang, d, f"b{k}[a{k} + {dist}]")))
    inner.append(f"const {itype} ao = {ix.address(cviews[3], cs, nm)};")
    inner.append("float y1, y2;")
    inner.append(f"lf_rope_pair({vals[0][0]}, {vals[0][1]}, {vals[1][0]}, {vals[2][0]}, {vals[1][1]}, "
                 f"{vals[2][1]}, y1, y2);")
    inner.append(f"out[ao] = {store_expr(pl.lang, node.dtype, 'y1', 'float')};")
    inner.append(f"out[ao + {pair}] = {store_expr(pl.lang, node.dtype, 'y2', 'float')};")
    body += ["  " + ln for ln in inner] + ["}"]
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    src = hand_source(pl, "rope", body, bufs, BLOCK, n, BLOCK, meta={"style": style})
    pl.add_kernel(src, ids, node.id, "rope")


__all__ = ["lower_rope"]

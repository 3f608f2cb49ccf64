"""Elementwise epilogues folded into the decode GEMV: a projection followed by the kernel that
reads its row once, element for element (a Llama layer's residual add ``x + o_proj(h)``, the
LM head's widening to float32), runs as one launch. Each dot product is rounded to the GEMV's
dtype as its own store would round it, then the elementwise tree computes the consumer's value
at the same index and only that is written; the GEMV's own output is never stored.

Applied after planning to a single ``lf_gemv_nk`` step and the fused step right after it when:
the fused node reads the GEMV's buffer exactly as laid out (contiguous, from offset 0), its output
has the GEMV's length, nothing else reads the GEMV's buffer, and its tree has no gathers. Every
other input of the fused node is read at the consumer's coordinates of that index, through its
view, as the elementwise renderer would.
"""
from __future__ import annotations

from dataclasses import replace

from ..render import index as ix
from ..render.kernels import finish, inline_scalars, zero_of
from ..render.lang import compute_type, convert, load_expr, store_expr
from ..render.tree import TreeRenderer, leaf_inputs, tree_has


def fuse_gemv_epilogues(pl) -> int:
    """Fold eligible fused steps into the single GEMV before them; returns how many."""
    steps = pl.steps
    folded = 0
    i = 0
    while i + 1 < len(steps):
        s1, s2 = steps[i], steps[i + 1]
        fused = _epilogue_of(pl, s1, s2)
        if fused is not None:
            steps[i:i + 2] = [fused]
            folded += 1
        i += 1
    return folded


def _epilogue_of(pl, s1, s2):
    if getattr(s1, "source", None) is None or getattr(s2, "source", None) is None:
        return None  # (host steps: cuBLAS)
    seg = s1.source.meta.get("_gemv_nk")
    if seg is None or s2.label != "fused":
        return None
    g = pl.graph
    node = g.nodes[s2.node]
    if node.op != "CustomOp" or node.attrs.get("name") != "fused":
        return None
    gemv_buf = s1.bufs[-1]
    reads = [k for k, (src, _) in enumerate(node.inputs) if pl.node_buf.get(src) == gemv_buf]
    if len(reads) != 1 or pl.bufs[gemv_buf].kind != "arena":
        return None
    (gk,) = reads
    view = node.inputs[gk][1]
    n_out = ix.numel(node.shape)
    if not (view.is_contiguous and view.mask is None and ix.is_zero(view.offset)
            and _same_int(ix.numel(view.shape), seg.n, pl.dims_max)
            and _same_int(n_out, seg.n, pl.dims_max)):
        return None
    if any(gemv_buf in st.bufs for st in pl.steps if st is not s1 and st is not s2):
        return None
    inputs = [pl.kernel_input(node, k) for k in range(len(node.inputs))]
    tree = inline_scalars(node.attrs["expr"], inputs)
    if tree_has(tree, {"Gather"}):
        return None
    return _render(pl, s1, s2, node, seg, gk, inputs, tree)


def _same_int(e, n: int, dims=None) -> bool:
    """Whether ``e`` is ``n`` (a symbolic count: at the bucket's largest dims, where the GEMV's
    single row is the whole row)."""
    if isinstance(e, int):
        return e == n
    return dims is not None and ix.max_value(e, dims) == n


def _render(pl, s1, s2, node, seg, gk, inputs, tree):
    names = ix.dim_names(pl.symbols)
    T = seg.T
    bufs = [("in0", "b0", seg.dtype, True), ("in1", "b1", seg.dtype, True)]
    ids = [s1.bufs[0], s1.bufs[1]]
    cname = {}
    for k in sorted(leaf_inputs(tree)):
        if k == gk:
            continue
        cname[k] = f"e{k}"
        bufs.append((f"in{k + 2}", f"e{k}", inputs[k].dtype, True))
        ids.append(pl.input_buf(node, k))
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    cl, cs = ix.coords(node.shape, "n", names, "c", "int")

    def leaf(k):
        if k == gk:  # the dot product as the GEMV would have stored it
            return f"lf_ld(lf_st<{T}>(acc))", "float"
        inp = inputs[k]
        ct = compute_type(inp.dtype)
        val = load_expr(pl.lang, inp.dtype, f"{cname[k]}[{ix.address(inp.view, cs, names)}]")
        cond = ix.validity(inp.view, cs, names)
        return (f"(({cond}) ? {val} : {zero_of(ct)})" if cond is not None else val), ct

    tr = TreeRenderer(pl.lang, leaf, None, lambda e: f"(int)({ix.r(e, {**names, 'z': 'n'})})", prefix="v")
    val, vt = tr.render(tree)
    ct_out = compute_type(node.dtype)
    store = store_expr(pl.lang, node.dtype, convert(pl.lang, val, vt, ct_out), ct_out)
    epi = (["auto epilogue = [&](int n, float acc) {"] + ["  " + ln for ln in cl + tr.lines]
           + [f"  out[n] = {store};", "};"])
    call = (f"lf_gemv_nk_to<{T}, {seg.iters}>(b1 + ({seg.w_offset}), (long long)({seg.ldw}), "
            f"b0 + ({seg.x_offset}), {seg.n}, {seg.k}, {seg.wpr}, blockIdx.x, gridDim.x, epilogue);")
    body = list(seg.guard) + epi + [call]
    src = finish(pl.lang, "gemv_nk_epi", body, bufs, 256, 1, 1,
                 meta={"hand": True, "grid3": (seg.blocks, 1, 1), "wpr": seg.wpr,
                       "nodes": (s1.node, s2.node)})
    return replace(s2, source=src, bufs=ids, label="matmul (gemv nk) + epilogue")


__all__ = ["fuse_gemv_epilogues"]

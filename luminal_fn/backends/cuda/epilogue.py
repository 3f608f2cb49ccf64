"""Elementwise epilogues folded into the decode GEMV: a projection followed by the kernel that
reads its row once, element for element (a Llama layer's residual add ``x + o_proj(h)``, the
LM head's widening to float32, ``silu(gate) * up``), runs as one launch. Each dot product is rounded to the GEMV's
dtype as its own store would round it, then the elementwise tree computes the consumer's value
at the same index and only that is written; the GEMV's own output is never stored.

Applied after planning to a single ``lf_gemv_nk`` step (or two merged siblings of one shape: a
gated MLP's gate and up, then computed row by row together by ``lf_gemv_nk_pair_to``), or to a
kernel that hands each value it writes to a store functor (meta ``_store_call``: the x @ W GEMV,
or the kernel adding its K split's partials: a dense layer's bias and activation), and the
fused step right after it when: the fused node reads each GEMV's buffer once, exactly as laid out
(contiguous, from offset 0), its output has the GEMV's length, nothing else reads those buffers,
and its tree has no gathers. Every
other input of the fused node is read at the consumer's coordinates of that index, through its
view, as the elementwise renderer would.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.expr import same

from ..render import index as ix
from ..render.kernels import consumer_store, finish, inline_scalars, render_elementwise
from ..render.tree import substitute_inputs, tree_has
from .siblings import forced_warps_per_row, nk_shape, x_arg
from .switches import switch_count, switch_on


def fold_adjacent(steps: list, fold, chain: bool = False) -> int:
    """Replace each adjacent pair (a, b) of ``steps`` for which ``fold(a, b)`` returns a step (or
    a list of steps) by it; returns how many were replaced. With ``chain`` the new step is tried
    again with the step after it (a kernel that takes over several copies in a row); else the
    walk moves on."""
    folded = i = 0
    while i + 1 < len(steps):
        new = fold(steps[i], steps[i + 1])
        if new is not None:
            steps[i:i + 2] = new if isinstance(new, list) else [new]
            folded += 1
            if chain:
                continue
        i += 1
    return folded


def fuse_gemv_epilogues(pl) -> int:
    """Fold eligible fused steps into the single GEMV before them; returns how many."""
    return fold_adjacent(pl.steps, lambda s1, s2: _epilogue_of(pl, s1, s2))


def _epilogue_of(pl, s1, s2):
    if getattr(s1, "source", None) is None or getattr(s2, "source", None) is None:
        return None  # (host steps: cuBLAS)
    segs = _gemv_segments(s1)
    store_call = s1.source.meta.get("_store_call")  # a kernel handing each value to a store functor
    if (segs is None and store_call is None) or s2.label != "fused":
        return None
    g = pl.graph
    node = g.nodes[s2.node]
    if node.op != "CustomOp" or node.attrs.get("name") != "fused":
        return None
    gemv_bufs = s1.bufs[-len(segs):] if segs is not None else s1.bufs[-1:]
    reads = []  # per GEMV output: the fused node's input index reading it
    for b in gemv_bufs:
        ks = [k for k, (src, _) in enumerate(node.inputs) if pl.node_buf.get(src) == b]
        if len(ks) != 1 or not _in_order(pl, node, ks[0]) or not _only_between(pl, b, s1, s2):
            return None
        reads.append(ks[0])
    inputs = [pl.kernel_input(node, k) for k in range(len(node.inputs))]
    tree = inline_scalars(node.attrs["expr"], inputs)
    if tree_has(tree, {"Gather"}):
        return None
    if segs is None:
        return _render_store_call(pl, s1, s2, node, reads, inputs, tree)
    return _render(pl, s1, s2, node, segs, reads, inputs, tree)


def _gemv_segments(step):
    """The GEMV(s) a step runs when an epilogue can follow them: a single lf_gemv_nk, or two
    siblings of the same shape (a gated MLP's gate and up: one pair kernel computes both rows)."""
    segs = step.source.meta.get("_segments")
    if segs and len(segs) == 1:
        return segs
    if segs and len(segs) == 2:
        a, b = segs
        if (a.n, a.k, a.T, a.x_offset, a.guard) == (b.n, b.k, b.T, b.x_offset, b.guard):
            return segs
    return None


PAIR_UNROLL_SWITCH = "LUMINAL_CUDA_GEMV_PAIR_UNROLL"
PAIR_WPR_SWITCH = "LUMINAL_CUDA_GEMV_PAIR_WPR"  # warps a row of the pair kernel (for A/B sweeps)
PAIR_BLOCKS_SWITCH = "LUMINAL_CUDA_GEMV_PAIR_BLOCKS"  # at most this many blocks, looping over rows
MAX_PAIR_UNROLLED = 8  # 16-byte loads of each row a lane holds at once (2 rows: 64 registers of data)


def pair_launch(seg) -> tuple:
    """(warps per row, ITERS, blocks) of the pair kernel. Warps per row: the segment's own, or
    LUMINAL_CUDA_GEMV_PAIR_WPR's (1, 2, 4 or 8, at most what K's 16-byte loads allow). ITERS:
    the unrolled count when it fits MAX_PAIR_UNROLLED, else 0 (the loop);
    ``LUMINAL_CUDA_GEMV_PAIR_UNROLL=0`` keeps the loop. H200, runs U and V: the Llama decode step
    replayed alone 809.4 us unrolled against 818.8 us with the loop (gate/up 19.05 against 19.27
    us each); run AR: 820.3 and 822.3 us unrolled, 819.2 and 817.4 us with the loop, 841.7 and
    841.5 us with the loop at 2 warps a row (the fastest launch alone, gemv_sweep.py --pair)."""
    V = 16 // seg.dtype.itemsize
    forced = forced_warps_per_row(PAIR_WPR_SWITCH, seg.k, V)
    wpr = seg.wpr if forced is None else forced
    unroll = switch_on(PAIR_UNROLL_SWITCH, True, "unroll the pair kernel's loads")
    iters, blocks = nk_shape(seg.n, seg.k, V, wpr, MAX_PAIR_UNROLLED if unroll else 0)
    cap = switch_count(PAIR_BLOCKS_SWITCH, 0, "the most blocks of a pair launch, such as 264", 1)
    if cap:
        blocks = -(-blocks // -(-blocks // cap))  # each block the same number of row groups
    return wpr, iters, blocks


def _in_order(pl, node, k) -> bool:
    """Whether ``node`` reads its input k element for element: a contiguous, unmasked view of all
    of the producer's buffer from its start, with the consumer's own length."""
    src, view = node.inputs[k]
    n = ix.numel(pl.graph.nodes[src].shape)
    return (view.is_contiguous and view.mask is None and ix.is_zero(view.offset)
            and same(ix.numel(view.shape), n) and same(ix.numel(node.shape), n))


def _only_between(pl, buf, s1, s2) -> bool:
    """Whether only steps s1 (writing it) and s2 (reading it) touch the intermediate ``buf``."""
    return pl.bufs[buf].kind == "arena" and not any(buf in st.bufs for st in pl.steps
                                                    if st is not s1 and st is not s2)


def _epilogue_lambda(pl, node, reads, inputs, tree, T) -> tuple:
    """(the lines defining ``epilogue``, a lambda (n, acc0[, acc1]) that computes the fused node's
    element n from the GEMV values, each rounded to T as its store would, and writes out[n]; the
    other inputs' (role, C name, dtype, const) bindings; their buffer ids)."""
    links = {k: (f"lf_ld(lf_st<{T}>(acc{i}))", "float") for i, k in enumerate(reads)}
    lines, bufs = consumer_store(pl.lang, tree, inputs, links, node.shape, node.dtype,
                                 ix.dim_names(pl.symbols), "int")
    ids = [pl.input_buf(node, int(role[1:])) for role, *_ in bufs]
    accs = ", ".join(f"float acc{i}" for i in range(len(reads)))
    return [f"auto epilogue = [&](int n, {accs}) {{"] + ["  " + ln for ln in lines] + ["};"], bufs, ids


def _render_store_call(pl, s1, s2, node, reads, inputs, tree):
    """The kernel of s1 (which hands each value of y to a store functor: the x @ W GEMV, or the
    kernel adding its split's partials) with the epilogue as that functor."""
    src = s1.source
    meta = src.meta
    epi, ebufs, eids = _epilogue_lambda(pl, node, reads, inputs, tree, meta["_store_T"])
    bufs = [b for b in meta["_bufs"] if b[0] != "out"] + ebufs + [("out", "out", node.dtype, False)]
    ids = list(s1.bufs[:-1]) + eids + [pl.node_buf[node.id]]
    body = list(meta["_guard"]) + epi + [meta["_store_call"].replace("@STORE@", "epilogue")]
    keep = {k: v for k, v in meta.items() if not k.startswith("_")}
    new = finish(pl.lang, f"{src.kind}_epi", body, bufs, src.block, src.work, src.per_block, src.grid_cap,
                 meta={**keep, "nodes": (s1.node, s2.node)}, shared_bytes=src.shared_bytes)
    return replace(s2, source=new, bufs=ids, label=f"{s1.label} + epilogue")


def _render(pl, s1, s2, node, segs, reads, inputs, tree):
    seg = segs[0]
    T = seg.T
    pair = len(segs) == 2
    pro = s1.source.meta.get("_prologue")  # x computed in the kernel (prologue.py), or read from b0
    xbufs = list(pro.bufs) if pro is not None else [("in0", "b0", seg.dtype, True)]
    x = x_arg(seg, pro)
    bufs = xbufs + [(f"in{i + 1}", f"w{i}", seg.dtype, True) for i in range(len(segs))]
    ids = list(s1.bufs[:len(xbufs) + len(segs)])
    epi, ebufs, eids = _epilogue_lambda(pl, node, reads, inputs, tree, T)
    bufs += ebufs + [("out", "out", node.dtype, False)]
    ids += eids + [pl.node_buf[node.id]]
    weights = ", ".join(f"w{i} + ({s.w_offset}), (long long)({s.ldw})" for i, s in enumerate(segs))
    wpr, blocks = seg.wpr, seg.blocks
    if pair:
        wpr, iters, blocks = pair_launch(seg)
        call = (f"lf_gemv_nk_pair_to<{T}, {iters}>({weights}, {x}, {seg.n}, {seg.k}, "
                f"{wpr}, blockIdx.x, gridDim.x, epilogue);")
    else:
        call = (f"lf_gemv_nk_to<{T}, {seg.iters}>({weights}, {x}, {seg.n}, {seg.k}, "
                f"{seg.wpr}, blockIdx.x, gridDim.x, epilogue);")
    body = list(seg.guard) + (list(pro.lines) if pro is not None else []) + epi + [call]
    kind = "gemv_nk_pair_epi" if pair else "gemv_nk_epi"
    if pro is not None:
        kind = f"{kind}_{pro.tag}"
    src = finish(pl.lang, kind, body, bufs, 256, 1, 1,
                 meta={"hand": True, "grid3": (blocks, 1, 1), "wpr": wpr,
                       "nodes": (s1.node, s2.node), "waits_inside": True,
                       "_weights": tuple((len(xbufs) + i, s) for i, s in enumerate(segs))})
    label = "matmul (gemv nk pair) + epilogue" if pair else "matmul (gemv nk) + epilogue"
    if pro is not None:
        label = f"{pro.label} + {label}"
    return replace(s2, source=src, bufs=ids, label=label)


# ---- an elementwise kernel read through a reshape by the next one ------------------------------
def fuse_reshaped_elementwise(pl) -> int:
    """Fold a fused elementwise step into the fused step right after it when that one reads its
    float32 buffer once, in order (a contiguous view of all of it, under another shape: the
    attention output's transposed copy, then its cast for the next matmul). View inlining at
    extraction cannot do it (splitting an axis of a transposed read is no strided view); here
    the consumer is simply computed over the producer's shape, which walks the same flat order.
    Returns how many steps were folded. (The folded step computes another tree than its node's:
    it is never a producer here again, so the walk moves past it.)"""
    return fold_adjacent(pl.steps, lambda s1, s2: _chain_of(pl, s1, s2))


def _fused_node(pl, step):
    if getattr(step, "source", None) is None or step.label != "fused":
        return None
    node = pl.graph.nodes[step.node]
    ok = node.op == "CustomOp" and node.attrs.get("name") == "fused"
    return node if ok and step.bufs[-1] == pl.node_buf.get(node.id) else None


def _chain_of(pl, s1, s2):
    p, c = _fused_node(pl, s1), _fused_node(pl, s2)
    if p is None or c is None or p.dtype.name != "float32":
        return None  # (a half-precision producer would round in between: keep its store)
    links = [k for k, (src, _) in enumerate(c.inputs) if src == p.id]
    if len(links) != 1 or not _in_order(pl, c, links[0]) or not _only_between(pl, s1.bufs[-1], s1, s2):
        return None
    (link,) = links
    p_ins = [pl.kernel_input(p, k) for k in range(len(p.inputs))]
    c_ins = [pl.kernel_input(c, k) for k in range(len(c.inputs))]
    moved = {}
    for k, ki in enumerate(c_ins):
        if k == link or ki.inlined:
            continue
        v = ki.view.reshape(p.shape)  # the consumer's other reads, at the producer's shape
        if v is None:
            return None
        moved[k] = type(ki)(v, ki.dtype, ki.scalar)
    ptree = inline_scalars(p.attrs["expr"], p_ins)
    if tree_has(ptree, {"Gather"}) or tree_has(c.attrs["expr"], {"Gather"}):
        return None
    n1 = len(p_ins)
    slots = {k: n1 + j for j, k in enumerate(sorted(moved))}
    mapping = {k: ("in", slots[k]) for k in moved}
    mapping[link] = ("Cast", "float32", ptree)  # the value as the producer stored it
    tree = substitute_inputs(inline_scalars(c.attrs["expr"], c_ins), mapping)
    inputs = p_ins + [moved[k] for k in sorted(moved)]
    src = render_elementwise(pl.lang, p.shape, c.dtype, tree, inputs, pl.dims_max, pl.symbols)
    where = {f"in{k}": (pl.input_buf(p, k) if not p_ins[k].inlined else None) for k in range(n1)}
    where.update({f"in{slots[k]}": pl.input_buf(c, k) for k in moved})
    ids = [pl.node_buf[c.id] if role == "out" else where[role] for role in src.buffers]
    return replace(s2, source=src, bufs=ids)


__all__ = ["fold_adjacent", "fuse_gemv_epilogues", "fuse_reshaped_elementwise"]

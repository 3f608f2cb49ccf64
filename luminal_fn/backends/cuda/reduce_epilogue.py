"""Elementwise epilogues folded into reductions: a reduction followed by the fused kernel that
reads its result once, element for element (argmax's sign flip after its min, a mean's scale, a
norm's square root), runs as one launch: the reduction computes the consumer's value where it
would have stored its own, and only that is written (render/reduce.py ``ReduceEpilogue``).

Applied after planning to a reduction step of one kernel (the thread, warp and block strategies,
and ``split`` where the row's last warp merges in the same launch) and the fused step right after
it, when the fused node reads the reduction's buffer once, exactly as laid out, nothing else
reads that buffer, and its tree has no gathers.
"""
from __future__ import annotations

from dataclasses import replace

from ..render.kernels import inline_scalars
from ..render.reduce import ReduceEpilogue, render_reduce
from ..render.tree import tree_has
from .epilogue import _in_order, _only_between, fold_adjacent

_REDUCTIONS = {"SumReduce": "sum", "MaxReduce": "max"}


def fuse_reduce_epilogues(pl) -> int:
    """Fold eligible fused steps into the reduction step before them; returns how many."""
    return fold_adjacent(pl.steps, lambda s1, s2: _epilogue_of(pl, s1, s2))


def _reduction(node):
    """(in_shape, axis, op, tree) of a reduction node, or None."""
    if node.op in _REDUCTIONS:
        return tuple(node.inputs[0][1].shape), node.attrs["axis"], _REDUCTIONS[node.op], ("in", 0)
    if node.op == "CustomOp" and node.attrs.get("name") == "fused_reduce":
        return tuple(node.attrs["in_shape"]), node.attrs["axis"], node.attrs["reduce"], node.attrs["expr"]
    return None


def _epilogue_of(pl, s1, s2):
    src1, src2 = getattr(s1, "source", None), getattr(s2, "source", None)
    if src1 is None or src2 is None or src1.kind != "red" or s2.label != "fused":
        return None  # (host steps; a split's first stage, its partials stored for a second kernel)
    if src1.meta.get("chunks", 1) > 1 and src1.meta.get("count") is None:
        return None
    g = pl.graph
    red, node = g.nodes[s1.node], g.nodes[s2.node]
    spec = _reduction(red)
    if spec is None or s1.label != (red.op if red.op in _REDUCTIONS else "fused_reduce"):
        return None  # (a step merged with others)
    if node.op != "CustomOp" or node.attrs.get("name") != "fused":
        return None
    buf = pl.node_buf.get(red.id)
    if s1.bufs[-1] != buf or s2.bufs[-1] != pl.node_buf.get(node.id):
        return None
    links = [k for k, (src, _) in enumerate(node.inputs) if src == red.id]
    if len(links) != 1 or not _in_order(pl, node, links[0]) or not _only_between(pl, buf, s1, s2):
        return None
    inputs = tuple(pl.kernel_input(node, k) for k in range(len(node.inputs)))
    if tree_has(inline_scalars(node.attrs["expr"], inputs), {"Gather"}):
        return None
    in_shape, axis, op, tree = spec
    red_inputs = [pl.kernel_input(red, k) for k in range(len(red.inputs))]
    epi = ReduceEpilogue(node.attrs["expr"], inputs, links[0], tuple(node.shape), node.dtype)
    (src,) = render_reduce(pl.lang, in_shape, axis, op, tree, red_inputs, red.dtype, pl.dims_max,
                           pl.symbols, strategy=src1.meta["strategy"], sm_count=pl.sm_count,
                           chunks=src1.meta.get("chunks"), epilogue=epi)
    own = dict(zip(src1.buffers, s1.bufs))  # the reduction's inputs, scratch and counters
    ids = []
    for role in src.buffers:
        if role == "out":
            ids.append(s2.bufs[-1])
        elif role.startswith("e"):
            ids.append(pl.input_buf(node, int(role[1:])))
        else:
            ids.append(own[role])
    src = replace(src, meta={**src.meta, "nodes": (s1.node, s2.node)})
    return replace(s2, source=src, bufs=ids, label=f"{s1.label} + epilogue")


__all__ = ["fuse_reduce_epilogues"]

"""Values one fused kernel computes, read by later kernels instead of recomputed.

Extraction decides which values get a buffer; the rest are recomputed inside every kernel that
needs them, which costs nothing extra in a GPU kernel's registers but one more pass over memory
per appearance on NumPy. A layer norm typically computes ``x + residual`` in one kernel and again
inside the mean's reduction, and ``x - mean`` inside the variance's reduction and again in the
normalising kernel; a softmax computes ``exp(s - max)`` in the sum and again in the division.

Before the plan is built, every kernel that takes tree_program's straight-line path is read as
its expression with each input replaced by the edge it reads (producer id and view): two kernels
that contain the same such subtree compute the same values. Walking the kernels in plan order, a
subtree of the full shape that an earlier kernel computed becomes an input of the later one: the
earlier kernel's own output when it is that kernel's whole result, else a value the earlier
kernel's program keeps (a stash, under an id past the graph's nodes). Same operations in the
same order, so the results are bit-for-bit unchanged; buffers live longer (a stash lives until
its last reader), and a kernel left without readers is dropped.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...ir import dtypes as dt
from ...ir.view import View
from .tree_peephole import rewrite
from .tree_program import compact_view, compile_program

SHAREABLE = ("fused", "fused_reduce")


def _full_shape(node):
    return tuple(node.attrs["in_shape"]) if node.attrs.get("name") == "fused_reduce" else tuple(node.shape)


def program_inputs(graph, node):
    """``(tree, full shape, compact input shapes, input dtypes)`` when ``node`` is a fused kernel
    on tree_program's straight-line path, else None."""
    if node.op != "CustomOp" or node.attrs.get("name") not in SHAREABLE:
        return None
    full = _full_shape(node)
    if not all(isinstance(d, int) for d in full) or node.dtype.name not in ("float32", "float64"):
        return None
    shapes, dtypes = [], []
    for src, view in node.inputs:
        prod = graph.nodes[src] if src < len(graph.nodes) else None
        pshape = tuple(prod.shape) if prod is not None else None
        if pshape is None or not all(isinstance(d, int) for d in pshape):
            return None
        cv = compact_view(view, pshape)
        if cv is None:
            return None
        shapes.append(cv[0])
        dtypes.append(prod.dtype)
    tree = rewrite(node.attrs["expr"])
    if compile_program(tree, shapes, dtypes, node.dtype.name) is None:
        return None
    return tree, full, shapes, dtypes


def share_subtrees(graph):
    """``(nodes, n_ids, extra)``: the graph's live nodes in order, the fused kernels among them as
    copies whose trees read earlier kernels' values (attrs ``expr`` rewritten, inputs appended,
    ``_stash``: ((local subtree, value id), ...) on a kernel whose program keeps values for later
    ones); ``n_ids`` bounds every value id; ``extra`` maps each stash id to its (shape, dtype).
    The graph itself is not modified."""
    n_ids = len(graph.nodes)
    registry: dict = {}  # canonical subtree -> (producer position, local subtree)
    out, roots, stashes = [], {}, {}
    for node in graph.live_nodes():
        info = program_inputs(graph, node)
        if info is None:
            out.append(node)
            continue
        tree, full, shapes, _ = info
        inputs = list(node.inputs)
        canon_in = [("edge", src, view.key()) for src, view in inputs]
        shapes = [tuple(s) for s in shapes]
        sources: dict = {}  # value id -> its input index in this kernel

        def canon(t):
            if t[0] == "in":
                return canon_in[t[1]]
            if t[0] == "const":
                return t
            return (t[0], t[1]) + tuple(canon(c) for c in t[2:])

        def shape(t):
            if t[0] == "in":
                return shapes[t[1]]
            if t[0] == "const":
                return ()
            return np.broadcast_shapes(*(shape(c) for c in t[2:]))

        def replace(t):
            if t[0] in ("in", "const"):
                return t
            c = canon(t)
            hit = registry.get(c)
            if hit is not None and shape(t) == full:
                nonlocal n_ids
                pos, local = hit
                producer = out[pos]
                if roots.get(pos) == local and producer.attrs.get("name") == "fused":
                    src = producer.id  # the producer's own output
                else:
                    wanted = stashes.setdefault(pos, {})
                    if local not in wanted:
                        wanted[local] = n_ids
                        n_ids += 1
                    src = wanted[local]
                k = sources.get(src)
                if k is None:
                    k = sources[src] = len(inputs)
                    inputs.append((src, View.contiguous(full)))
                    canon_in.append(c)
                    shapes.append(full)
                return ("in", k)
            return (t[0], t[1]) + tuple(replace(x) for x in t[2:])

        new_tree = replace(tree)
        if new_tree != tree:  # drop the edges no longer read, renumbering the rest
            used = sorted(_inputs_of(new_tree))
            renumber = {k: j for j, k in enumerate(used)}
            new_tree = _renumber(new_tree, renumber)
            inputs = [inputs[k] for k in used]
            canon_in = [canon_in[k] for k in used]
            shapes = [shapes[k] for k in used]
        pos = len(out)
        roots[pos] = new_tree

        def register(t):
            if t[0] in ("in", "const"):
                return
            if shape(t) == full:
                registry.setdefault(canon(t), (pos, t))
            for x in t[2:]:
                register(x)

        register(new_tree)
        if new_tree == tree:
            out.append(node)
        else:
            out.append(dataclasses.replace(node, inputs=tuple(inputs),
                                           attrs={**node.attrs, "expr": new_tree}))
    extra = {}  # stash id -> (shape, dtype)
    for pos, wanted in stashes.items():
        n = out[pos]
        out[pos] = dataclasses.replace(n, attrs={**n.attrs, "_stash": tuple(wanted.items())})
        extra.update({vid: (_full_shape(n), n.dtype) for vid in wanted.values()})
    return _drop_unread(out, set(graph.outputs)), n_ids, extra


def _inputs_of(t) -> set:
    if t[0] == "in":
        return {t[1]}
    if t[0] == "const":
        return set()
    return set().union(*(_inputs_of(c) for c in t[2:]))


def _renumber(t, renumber):
    if t[0] == "in":
        return ("in", renumber[t[1]])
    if t[0] == "const":
        return t
    return (t[0], t[1]) + tuple(_renumber(c, renumber) for c in t[2:])


def _drop_unread(nodes, outputs):
    """Fused kernels whose every reader now reads something else are not run."""
    while True:
        read = {src for n in nodes for src, _ in n.inputs}
        keep = [n for n in nodes if n.id in read or n.id in outputs or n.op != "CustomOp"
                or n.attrs.get("name") not in SHAREABLE or "_stash" in n.attrs]
        if len(keep) == len(nodes):
            return nodes
        nodes = keep


__all__ = ["share_subtrees", "program_inputs", "SHAREABLE"]

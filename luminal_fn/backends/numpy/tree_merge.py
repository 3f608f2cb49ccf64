"""Fused kernels read by one later kernel only, written into that kernel's tree.

Extraction stores every select's result (a select is a kernel boundary: optimize/rules/
specialize.egg says why), so ``abs(x)``, written ``where(x == 0, 0.0, where(x < 0, -x, x))``, is
two kernels, and ``rint`` three. On a GPU the boundary costs one store and one load; on NumPy
nothing is saved by it either way (each node is one pass over memory), but tree_peephole sees
one kernel's tree at a time, so NumPy's own ``np.abs`` / ``np.rint`` can only replace the whole
function once its pieces are one tree.

A kernel is inlined into its reader when it is that reader's only producer of the value (no
other kernel and no output reads it) and the reader reads it whole, at its own index space
(a contiguous view of the same static shape, which is the reader's full shape): its inputs then
read the same elements from inside the reader. The merged tree is the same operations in the
same order with the stored value kept in a temporary, so results are bit-for-bit unchanged
unless a peephole then matches the larger tree (or a product meets a reciprocal computed in the
producer: then it is the one division it is inside any kernel). Only trees that stay on
tree_program's straight-line path are merged.
"""
from __future__ import annotations

import copy
import dataclasses

from .plan_share import SHAREABLE, full_shape, program_inputs, relabel_inputs
from .tree_peephole import rewrite

# the most nodes a merged tree may have walked as a tree (a subtree read twice counted twice)
# once tree_peephole has rewritten it: hashing a tree walks it so, and a value reused at every
# level of a chain (x = x * x) doubles it a level (the extractor bounds its kernels alike).
# sinh's two kernels walk ~20,000 nodes merged, under 100 rewritten. Equal subtrees are made one
# object first, so rewriting and comparing cost the distinct nodes, which are bounded too.
MAX_WALKED = 1024
MAX_DISTINCT = 4 * MAX_WALKED


def inline_single_readers(graph):
    """A shallow copy of ``graph`` with every such producer written into its reader (the producer
    node dropped), or ``graph`` itself when none is."""
    readers: dict = {}
    for n in graph.live_nodes():
        for src, _ in n.inputs:
            readers.setdefault(src, set()).add(n.id)
    outputs = set(graph.outputs)
    nodes = list(graph.nodes)
    merged = None
    for pos, node in enumerate(nodes):
        if node is None or node.op != "CustomOp" or node.attrs.get("name") not in SHAREABLE:
            continue
        failed: set = set()  # producers that cannot be written in (their readers may still merge)
        changed = True
        while changed:  # an inlined producer brings its own inputs, and readers merge into one
            changed = False
            for src in sorted({s for s, _ in node.inputs} - failed):
                prod = nodes[src]
                if prod is None or src in outputs or readers.get(src) != {node.id}:
                    continue
                new = _inline(merged or graph, node, prod)
                if new is None:
                    failed.add(src)
                    continue
                if merged is None:
                    merged = copy.copy(graph)
                    merged.nodes = nodes
                nodes[pos] = node = new
                nodes[src] = None
                for s, _ in prod.inputs:  # the producer's inputs are now read by this node
                    readers[s] = (readers[s] - {prod.id}) | {node.id}
                changed = True
                break
    return graph if merged is None else merged


def _inline(graph, node, prod):
    """``node`` with ``prod``'s tree in place of its reads of ``prod``, or None where that is
    not a plain read or the merged kernel would leave the straight-line path."""
    if prod.op != "CustomOp" or prod.attrs.get("name") != "fused" or prod.attrs.get("_stash"):
        return None
    shape = tuple(prod.shape)
    if full_shape(node) != shape or not all(isinstance(d, int) for d in shape):
        return None
    ptree = prod.attrs["expr"]
    if ptree[0] in ("in", "const") or ptree[1] != prod.dtype.name:
        return None  # (a root of another dtype is converted when stored)
    slots = [k for k, (s, _) in enumerate(node.inputs) if s == prod.id]
    for k in slots:
        v = node.inputs[k][1]
        if not (v.is_static() and v.mask is None and v.is_contiguous and tuple(v.shape) == shape):
            return None
    # the reader's other inputs keep their order; the producer's follow them
    # (an edge both read, as x in abs's two selects, is one input: one leaf, computed on once)
    keep = [k for k in range(len(node.inputs)) if k not in slots]
    renumber = {k: j for j, k in enumerate(keep)}
    inputs = [node.inputs[k] for k in keep]
    index = {(s, v.key()): j for j, (s, v) in enumerate(inputs)}
    moved = []
    for s, v in prod.inputs:
        j = index.get((s, v.key()))
        if j is None:
            j = index[s, v.key()] = len(inputs)
            inputs.append((s, v))
        moved.append(j)
    inner = relabel_inputs(ptree, lambda j: ("in", moved[j]), {})
    tree = relabel_inputs(node.attrs["expr"], lambda k: inner if k in slots else ("in", renumber[k]), {})
    interned: dict = {}
    tree = _interned(tree, interned, {})
    if len(interned) > MAX_DISTINCT or _walked(rewrite(tree), {}) > MAX_WALKED:
        return None
    new = dataclasses.replace(node, inputs=tuple(inputs), attrs={**node.attrs, "expr": tree})
    # (program_inputs reads only the producers of new's inputs: the graph's, unchanged by merges)
    return new if program_inputs(graph, new) is not None else None


def _interned(t, table: dict, memo: dict):
    """t with structurally equal subtrees one object (``table``: their canonical forms)."""
    if t[0] in ("in", "const", "iota"):
        return table.setdefault(t, t)
    if t[0] == "Gather":
        return t  # (off the straight-line path: the merge is refused after)
    done = memo.get(id(t))
    if done is None:
        kids = tuple(_interned(c, table, memo) for c in t[2:])
        key = (t[0], t[1]) + tuple(map(id, kids))  # kids are canonical: their ids say equality
        done = memo[id(t)] = table.setdefault(key, (t[0], t[1]) + kids)
    return done


def _walked(t, memo: dict) -> int:
    """Nodes of t walked as a tree, each distinct subtree object counted once per reference."""
    if t[0] in ("in", "const", "iota"):
        return 1
    n = memo.get(id(t))
    if n is None:
        n = memo[id(t)] = 1 + sum(_walked(c, memo) for c in t[2:] if isinstance(c, tuple))
    return n


__all__ = ["inline_single_readers"]

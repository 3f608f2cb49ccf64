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

from ...ir.llir import quotient
from ...ir.view import View
from .tree_peephole import rewrite
from .tree_program import PROGRAM_DTYPES, compact_view, compile_program

SHAREABLE = ("fused", "fused_reduce")


def full_shape(node):
    return tuple(node.attrs["in_shape"]) if node.attrs.get("name") == "fused_reduce" else tuple(node.shape)


def program_inputs(graph, node):
    """``(tree, full shape, compact input shapes, input dtypes)`` when ``node`` is a fused kernel
    on tree_program's straight-line path, else None."""
    if node.op != "CustomOp" or node.attrs.get("name") not in SHAREABLE:
        return None
    full = full_shape(node)
    if not all(isinstance(d, int) for d in full) or node.dtype.name not in PROGRAM_DTYPES:
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
    registry: dict = {}  # canonical subtree id -> (producer position, local subtree)
    interned: dict = {}  # a canonical subtree (op, dtype, children's ids) -> its id
    out, roots, stashes = [], {}, {}
    # A subtree met twice in one tree is one object (x * x): every walk below remembers what it
    # did for each object (by id; the trees stay alive meanwhile), and subtrees are compared by
    # interned ids, not as nested tuples, else a value reused at every level doubles the work
    for node in graph.live_nodes():
        info = program_inputs(graph, node)
        if info is None:
            out.append(node)
            continue
        tree, full, shapes, _ = info
        inputs = list(node.inputs)
        canon_in = [_intern(interned, ("edge", src, view.key())) for src, view in inputs]
        shapes = [tuple(s) for s in shapes]
        sources: dict = {}  # value id -> its input index in this kernel
        canons, shaped, replaced = {}, {}, {}

        def canon(t):
            if t[0] == "in":
                return canon_in[t[1]]
            c = canons.get(id(t))
            if c is None:
                key = t if t[0] == "const" else (t[0], t[1]) + tuple(canon(x) for x in t[2:])
                c = canons[id(t)] = _intern(interned, key)
            return c

        def shape(t):
            if t[0] == "in":
                return shapes[t[1]]
            if t[0] == "const":
                return ()
            sh = shaped.get(id(t))
            if sh is None:
                sh = shaped[id(t)] = np.broadcast_shapes(*(shape(c) for c in t[2:]))
            return sh

        def replace(t):
            if t[0] in ("in", "const"):
                return t
            done = replaced.get(id(t))
            if done is not None:
                return done
            c = canon(t)
            hit = registry.get(c)
            if hit is not None and shape(t) == full:
                nonlocal n_ids
                pos, local = hit
                producer = out[pos]
                if roots.get(pos) is local and producer.attrs.get("name") == "fused":
                    src = producer.id  # the producer's own output
                else:
                    wanted = stashes.setdefault(pos, {})  # id(local) -> (local, value id)
                    if id(local) not in wanted:
                        wanted[id(local)] = (local, n_ids)
                        n_ids += 1
                    src = wanted[id(local)][1]
                k = sources.get(src)
                if k is None:
                    k = sources[src] = len(inputs)
                    inputs.append((src, View.contiguous(full)))
                    canon_in.append(c)
                    shapes.append(full)
                done = ("in", k)
            else:
                q = quotient(t)
                if q is not None:  # a / b: the reciprocal stays the divisor (1/b read back is
                    # the product of two roundings, and inf for a subnormal b)
                    a, b = replace(q[0]), replace(q[1])
                    at = 3 if t[3][0] == "Recip" and t[3][2] is q[1] else 2  # the reciprocal's side
                    r = t[at] if b is q[1] else (t[at][0], t[at][1], b)
                    kids = (a, r) if at == 3 else (r, a)
                else:
                    kids = tuple(replace(x) for x in t[2:])
                same = all(a is b for a, b in zip(kids, t[2:]))
                done = t if same else (t[0], t[1]) + kids  # unchanged: the same object
            replaced[id(t)] = done
            return done

        new_tree = replace(tree)
        if new_tree is not tree:  # drop the edges no longer read, renumbering the rest
            used = sorted(_inputs_of(new_tree, {}))
            renumber = {k: j for j, k in enumerate(used)}
            new_tree = relabel_inputs(new_tree, lambda k: ("in", renumber[k]), {})
            inputs = [inputs[k] for k in used]
            canon_in = [canon_in[k] for k in used]
            shapes = [shapes[k] for k in used]
            canons.clear()
            shaped.clear()
        pos = len(out)
        roots[pos] = new_tree
        registered: set = set()

        def register(t):
            if t[0] in ("in", "const") or id(t) in registered:
                return
            registered.add(id(t))
            if shape(t) == full and t[1] == node.dtype.name:  # (a stash holds the kernel's dtype)
                registry.setdefault(canon(t), (pos, t))
            for x in t[2:]:
                register(x)

        register(new_tree)
        if new_tree is tree:
            out.append(node)
        else:
            out.append(dataclasses.replace(node, inputs=tuple(inputs),
                                           attrs={**node.attrs, "expr": new_tree}))
    extra = {}  # stash id -> (shape, dtype)
    for pos, wanted in stashes.items():
        n = out[pos]
        out[pos] = dataclasses.replace(n, attrs={**n.attrs, "_stash": tuple(wanted.values())})
        extra.update({vid: (full_shape(n), n.dtype) for _, vid in wanted.values()})
    return _drop_unread(out, set(graph.outputs)), n_ids, extra


def _intern(table: dict, key) -> int:
    return table.setdefault(key, len(table))


def _inputs_of(t, memo: dict) -> set:
    if t[0] == "in":
        return {t[1]}
    if t[0] == "const":
        return set()
    if id(t) not in memo:
        memo[id(t)] = set().union(*(_inputs_of(c, memo) for c in t[2:]))
    return memo[id(t)]


def relabel_inputs(t, leaf, memo: dict):
    """t with each ("in", k) replaced by leaf(k); a subtree met twice stays one object."""
    if t[0] == "in":
        return leaf(t[1])
    if t[0] in ("const", "iota"):
        return t
    done = memo.get(id(t))
    if done is None:
        if t[0] == "Gather":
            done = (t[0], t[1], t[2], relabel_inputs(t[3], leaf, memo))
        else:
            done = (t[0], t[1]) + tuple(relabel_inputs(c, leaf, memo) for c in t[2:])
        memo[id(t)] = done
    return done


def _drop_unread(nodes, outputs):
    """Fused kernels whose every reader now reads something else are not run."""
    while True:
        read = {src for n in nodes for src, _ in n.inputs}
        keep = [n for n in nodes if n.id in read or n.id in outputs or n.op != "CustomOp"
                or n.attrs.get("name") not in SHAREABLE or "_stash" in n.attrs]
        if len(keep) == len(nodes):
            return nodes
        nodes = keep


__all__ = ["share_subtrees", "program_inputs", "full_shape", "relabel_inputs", "SHAREABLE"]

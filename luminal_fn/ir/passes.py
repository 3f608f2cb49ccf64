"""Graph passes before optimisation: constant folding, common-subexpression elimination and
dead-code elimination. Each returns a new, compacted graph; inputs are always kept so the call
signature holds."""
from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .graph import Graph, Node
from .view import View

# Folding materialises arrays; larger results stay as ops (they are cheap to recompute on device).
FOLD_LIMIT = 1 << 16


def _uniform_value(g: Graph, nid: int, view: View):
    """The scalar a read yields everywhere, or None when the read is not uniform."""
    n = g.nodes[nid]
    if n.op != "Constant" or view.mask is not None:
        return None
    v = n.attrs["value"]
    if isinstance(v, np.ndarray):
        return None
    return v


def _static_numel(shape) -> int | None:
    total = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        total *= d
    return total


_FOLDABLE = ("Cast", "Exp2", "Log2", "Sin", "Sqrt", "Recip", "Add", "Mul", "Mod", "LessThan",
             "SumReduce", "MaxReduce", "Gather")


def simplify(g: Graph, fold: bool = True, evaluate=None) -> Graph:
    """Constant folding + CSE (through Graph.add's hash-consing) + DCE.

    ``evaluate(graph, node) -> ndarray`` runs one node on constant inputs; it comes from the
    caller (the NumPy backend's reference kernels) so the IR depends on no backend. Without it,
    only identities such as x * 1 are folded."""
    out = Graph(g.name)
    remap: dict[int, tuple] = {}  # old id -> (new id, view override or None)
    for node in g.live_nodes():
        inputs = []
        for i, v in node.inputs:
            nid, override = remap[i]
            inputs.append((nid, _compose(override, v)))
        new = Node(-1, node.op, tuple(inputs), node.shape, node.dtype, dict(node.attrs))
        if fold and evaluate is not None and node.op in _FOLDABLE:
            r = _try_fold(out, new, evaluate)
            if r is not None:
                remap[node.id] = r
                continue
        if fold:
            r = _try_identity(out, new)
            if r is not None:
                remap[node.id] = r
                continue
        nid = out.add(new.op, new.inputs, new.shape, new.dtype, **new.attrs)
        remap[node.id] = (nid, None)
    # (a node folded to a constant, or read through a view override, is no kernel's result)
    out.carry_composites(g, lambda i: remap[i][0] if i in remap and remap[i][1] is None else None)
    return dce(out)


def _compose(override, v: View) -> View:
    """A consumer's view over a node that was replaced by a uniform constant."""
    if override is None:
        return v
    return View(v.shape, (0,) * len(v.shape), 0, v.mask)


def _try_fold(g: Graph, node: Node, evaluate):
    if not node.inputs or any(g.nodes[i].op != "Constant" for i, _ in node.inputs):
        return None
    uniform = [_uniform_value(g, i, v) for i, v in node.inputs]
    if all(u is not None for u in uniform) and node.op not in ("SumReduce", "Gather"):
        scalar_node = Node(-1, node.op, tuple((i, View.contiguous(())) for i, _ in node.inputs), (),
                           node.dtype, {k: v for k, v in node.attrs.items()})
        if node.op == "MaxReduce":
            return None
        val = evaluate(g, scalar_node).item()
        extra = {}
        if node.op == "Recip" and node.dtype.is_float:
            # a / c is traced a * recip(c): kernels that multiply by this literal divide by c
            # instead (one rounding, as NumPy's divide; optimize/fused_tree.py)
            extra["divisor"] = float(uniform[0])
        c = g.add("Constant", (), (), node.dtype, value=_py(val, node.dtype), **extra)
        return (c, "uniform")
    numel = _static_numel(node.shape)
    if numel is None or numel > FOLD_LIMIT:
        return None
    if any(not v.is_static() for _, v in node.inputs):
        return None
    val = evaluate(g, node)
    c = g.add("Constant", (), node.shape, node.dtype, value=np.asarray(val, order="C"))  # asarray: keeps 0-d
    return (c, None)


def _py(v, d: dt.DType):
    if d.is_bool:
        return bool(v)
    if d.is_int:
        return int(v)
    return float(v)


def _try_identity(g: Graph, node: Node):
    """x * 1 and x + 0 read x directly when x is read plainly (same shape, contiguous)."""
    if node.op not in ("Add", "Mul") or len(node.inputs) != 2:
        return None
    unit = 0 if node.op == "Add" else 1
    for k in (0, 1):
        ci, cv = node.inputs[k]
        xi, xv = node.inputs[1 - k]
        u = _uniform_value(g, ci, cv)
        if u is None or u != unit or isinstance(u, bool) and node.op == "Add":
            continue
        xn = g.nodes[xi]
        if xn.dtype is not node.dtype or not xv.is_contiguous:
            continue
        if len(xv.shape) != len(xn.shape) or any(a != b for a, b in zip(xv.shape, xn.shape)):
            continue
        return (xi, None)
    return None


def dce(g: Graph, owned: bool = False) -> Graph:
    """Drop nodes no output depends on; keep every Input. Renumbers densely. ``owned``: the
    caller gives ``g`` up, so it comes back itself when nothing is dead and its ids are dense
    (an extraction's graph almost always: rebuilding it was a sixth of extracting it)."""
    live = set(g.inputs) | set(g.outputs)
    nodes = g.live_nodes()
    for node in reversed(nodes):
        if node.id in live:
            for i, _ in node.inputs:
                live.add(i)
    if owned and len(live) == len(nodes) == len(g.nodes):
        return g
    out = Graph(g.name)
    remap = {}
    for node in g.live_nodes():
        if node.id not in live:
            continue
        ins = tuple((remap[i], v) for i, v in node.inputs)
        remap[node.id] = out.add(node.op, ins, node.shape, node.dtype, **node.attrs)
    out.carry_composites(g, remap.get)
    return out


def use_composites(g: Graph, kinds) -> Graph:
    """The graph with each composite whose kernel ``kinds`` names computed by that kernel (a
    CustomOp of its inputs) and its primitive form dropped: for runs without the optimizer (an
    eager call), which would otherwise evaluate a sort's n^2 ranks."""
    chosen = {c.node: c for c in g.composites if c.name in kinds}
    if not chosen:
        return g
    out = Graph(g.name)
    remap = {}
    for node in g.live_nodes():
        c = chosen.get(node.id)
        if c is not None:
            ins = tuple((remap[i], v) for i, v in c.inputs)
            remap[node.id] = out.add("CustomOp", ins, node.shape, node.dtype, name=c.name, params=c.params)
            continue
        ins = tuple((remap[i], v) for i, v in node.inputs)
        remap[node.id] = out.add(node.op, ins, node.shape, node.dtype, **node.attrs)
    out.carry_composites(g, lambda i: None if i in chosen else remap.get(i))
    return dce(out)


def cse(g: Graph) -> Graph:
    """Rebuild through Graph.add, which hash-conses identical nodes."""
    return simplify(g, fold=False)


def last_readers(graph: Graph) -> dict:
    """node id -> the producers whose last reader it is (an interpreter frees them after it);
    inputs are never listed (the caller owns them)."""
    last: dict = {}
    for node in graph.live_nodes():
        for i, _ in node.inputs:
            last[i] = node.id
    out: dict = {}
    for prod, consumer in last.items():
        if graph.nodes[prod].op != "Input":
            out.setdefault(consumer, []).append(prod)
    return out

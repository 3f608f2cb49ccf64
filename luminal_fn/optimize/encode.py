"""HLIR graph -> egglog terms (text), plus the side tables the read-back needs.

Each HLIR node becomes one term bound to ``$nK_``; each input edge whose view is not the plain
read of its producer is wrapped in ``(V producer shape strides offset mask)``. Literals stay on
the Python side (``(Const id)``), so the e-graph never holds floats or arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.expr import as_expr
from ..ir.graph import Graph
from ..ir.view import View


def expr_term(e) -> str:
    """An Expr (or int) as an egglog Expr term. Sums are emitted with the index variable z first
    so that rules can match ``(MAdd (MVar "z") rest)``."""
    e = as_expr(e)
    op = e.op
    if op == "const":
        return f"(MNum {e.args[0]})"
    if op == "var":
        return f'(MVar "{e.args[0]}")'
    if op in ("add", "mul"):
        args = list(e.args)
        if op == "add":
            args.sort(key=lambda a: 0 if (a.op == "var" and a.args[0] == "z") else 1)
        ctor = "MAdd" if op == "add" else "MMul"
        out = expr_term(args[-1])
        for a in reversed(args[:-1]):
            out = f"({ctor} {expr_term(a)} {out})"
        return out
    if op == "floordiv":
        return f"(MDiv {expr_term(e.args[0])} {expr_term(e.args[1])})"
    if op == "mod":
        return f"(MMod {expr_term(e.args[0])} {expr_term(e.args[1])})"
    if op in ("min", "max"):
        return f"(M{op.capitalize()} {expr_term(e.args[0])} {expr_term(e.args[1])})"
    return f'(MCmp "{op}" {expr_term(e.args[0])} {expr_term(e.args[1])})'


def list_term(xs) -> str:
    out = "(ENil)"
    for x in reversed(list(xs)):
        out = f"(ECons {expr_term(x)} {out})"
    return out


def mask_term(mask) -> str:
    if mask is None:
        return "(MaskNone)"
    return f"(MaskSome {list_term([lo for lo, _ in mask])} {list_term([hi for _, hi in mask])})"


def view_term(inner: str, v: View) -> str:
    return f"(V {inner} {list_term(v.shape)} {list_term(v.strides)} {expr_term(v.offset)} {mask_term(v.mask)})"


def edge_term(inner: str, v: View, producer_shape) -> str:
    """An input edge: the producer's term itself where the view reads it whole, else a view."""
    return inner if v.reads_whole(producer_shape) else view_term(inner, v)


def int_literal(node):
    """The value of an int32 Constant holding one element (a scalar literal), else None."""
    if node.dtype.name != "int32":
        return None
    try:
        arr = np.asarray(node.attrs.get("value"))
    except Exception:  # noqa: BLE001 - an attribute that is no array is simply not a literal
        return None
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
        return None
    return int(arr.reshape(-1)[0])


def inf_literal(node):
    """+1 or -1 for a float Constant holding one infinity (isnan's bounds), else None."""
    if not node.dtype.is_float:
        return None
    try:
        arr = np.asarray(node.attrs.get("value"), dtype=np.float64)
    except Exception:  # noqa: BLE001 - as int_literal
        return None
    if arr.size != 1 or not np.isinf(arr.reshape(-1)[0]):
        return None
    return 1 if arr.reshape(-1)[0] > 0 else -1


# Bumped whenever the same graph would encode to a different e-graph: part of the search cache
# key, so an LLIR extracted from an earlier encoding is searched again (2: names end in "_", an
# earlier name could alias another node's term).
ENCODING_VERSION = 2


def global_name(node_id: int) -> str:
    """The egglog global bound to a node's term. It ends in a non-digit: egglog names the
    temporaries of a term it flattens after the globals the term reads plus a count (``$n9`` read
    a second time becomes ``$n91``), and a global named ``$n91`` would then be read as ``$n9``'s
    value: egglog 13.2 built ``(Bin "LessThan" $n91 (V $n9 ...))`` as ``(Bin "LessThan" $n9
    ...)`` in a traced triu, silently (tests/test_program_fuzz.py has the case)."""
    return f"$n{node_id}_"


@dataclass
class Encoded:
    """The egglog commands of a graph; (Const id) and (Custom id) name HLIR node ids, whose
    literals and attributes extraction reads back from the graph itself."""

    commands: list  # egglog command strings, in order


def encode(g: Graph) -> Encoded:
    enc = Encoded([])
    names = {}
    for node in g.live_nodes():
        ins = []
        for i, v in node.inputs:
            ins.append(edge_term(names[i], v, g.nodes[i].shape))
        op = node.op
        if op == "Input":
            term = f"(Inp {node.attrs['index']})"
        elif op == "Constant":
            term = f"(Const {node.id})"
            value = int_literal(node)
            if value is not None:
                enc.commands.append(f"(ConstInt {node.id} {value})")
            sign = inf_literal(node)
            if sign is not None:
                enc.commands.append(f"(ConstInf {node.id} {sign})")
        elif op == "Iota":
            term = f"(Iota {expr_term(node.attrs['expr'])} {expr_term(node.shape[0])})"
        elif op == "Cast":
            term = f'(Cast {ins[0]} "{node.dtype.name}")'
        elif op in ("Exp2", "Log2", "Sin", "Sqrt", "Recip"):
            term = f'(Un "{op}" {ins[0]})'
        elif op in ("Add", "Mul", "Mod", "LessThan"):
            term = f'(Bin "{op}" {ins[0]} {ins[1]})'
        elif op == "SumReduce":
            term = f"(Sum {ins[0]} {node.attrs['axis']})"
        elif op == "MaxReduce":
            term = f"(Max {ins[0]} {node.attrs['axis']})"
        elif op == "Gather":
            term = f"(Gath {ins[0]} {ins[1]})"
        elif op == "Scatter":
            term = f'(Scat {ins[0]} {ins[1]} {ins[2]} "{node.attrs.get("mode", "set")}")'
        elif op == "CustomOp":
            term = f"(Custom {node.id})"
        elif op == "Output":
            names[node.id] = ins[0]
            enc.commands.append(f"(set (OutputOf {node.attrs['index']}) {ins[0]})")
            continue
        else:
            raise ValueError(f"cannot encode HLIR op {op}")
        name = global_name(node.id)
        names[node.id] = name
        enc.commands.append(f"(let {name} {term})")
        enc.commands.append(f"(set (NodeOf {node.id}) {name})")
    for c in g.composites:  # the front end's named kernels, in their node's e-class
        ins = "(INil)"
        for i, v in reversed(c.inputs):
            ins = f"(ICons {edge_term(names[i], v, g.nodes[i].shape)} {ins})"
        enc.commands.append(f'(union {names[c.node]} (Kernel "{c.name}" {ins} {list_term(c.params)}))')
    return enc


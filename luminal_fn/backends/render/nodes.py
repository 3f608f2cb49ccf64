"""From graph nodes (HLIR primitives and the generic LLIR kinds) to rendered kernels.

Every primitive becomes one of the generic shapes: unary/binary/Cast/Iota/Gather are
elementwise trees, SumReduce/MaxReduce are reductions whose prologue reads the input, Scatter
is a copy of dest followed by a scatter kernel. ``render_node`` returns a list of
:class:`Rendered`: the kernel and, for each of its ``in<k>`` roles, the index of the node input
it reads.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ...ir.graph import _freeze
from ...ir.memo import Memo
from ...ir.ops import BINARY, UNARY
from .kernels import KernelInput, KernelSource, render_elementwise, render_scatter
from .lang import Language
from .reduce import render_reduce

GENERIC = ("fused", "fused_reduce")
_RENDERED = Memo(4096)  # key -> (the Language, [Rendered]): a search renders the same kernels again and again


@dataclass
class Rendered:
    kernel: KernelSource
    inmap: dict  # role "in<k>" -> node input index


def _ident(n: int) -> dict:
    return {f"in{k}": k for k in range(n)}


def primitive_tree(node) -> tuple | None:
    """The elementwise tree of a primitive node (None when it is not elementwise)."""
    d = node.dtype.name
    if node.op in UNARY:
        return (node.op, d, ("in", 0))
    if node.op in BINARY:
        return (node.op, d, ("in", 0), ("in", 1))
    if node.op == "Iota":
        return ("iota", node.attrs["expr"])
    if node.op == "Gather":
        return ("Gather", d, 1, ("in", 0))
    return None


def renderable(node) -> bool:
    if node.op == "CustomOp":
        return node.attrs.get("name") in GENERIC
    return primitive_tree(node) is not None or node.op in ("SumReduce", "MaxReduce", "Scatter")


def render_copy(lang: Language, out_shape, inp: KernelInput, dims_max=None, symbols=()) -> KernelSource:
    """A contiguous copy of one viewed input (used for outputs, materialisation, Scatter's dest)."""
    return render_elementwise(lang, out_shape, inp.dtype, ("in", 0), [inp], dims_max, symbols)


def render_node(lang: Language, node, inputs: Sequence[KernelInput], dims_max: dict | None = None,
                symbols: Sequence[str] = (), sm_count: int = 132) -> list:
    """The node's kernels. A node of the same op, shape, dtype and attributes over inputs of the
    same views renders the same text, so the result is kept (``_RENDERED``, bounded) and later
    plans get a copy: a search plans one candidate after another, mostly of the same kernels."""
    key = (lang.name, id(lang), node.op, node.shape, node.dtype.name, _freeze(node.attrs),
           tuple((i.view, i.dtype.name, _freeze(i.scalar)) for i in inputs),
           tuple(sorted((dims_max or {}).items())), tuple(symbols), sm_count)
    return kept_rendering(lang, key, lambda: _render_node(lang, node, inputs, dims_max, symbols, sm_count))


def kept_rendering(lang: Language, key, render) -> list:
    """``render()`` ([Rendered]) kept by ``key`` (a key names the Language by id, which is
    kept alive with the entry): each call gets its own copy of the kernels' meta
    (plan passes set it)."""
    hit = _RENDERED.get(key, lambda: (lang, render()))
    return [Rendered(replace(r.kernel, meta=dict(r.kernel.meta)), dict(r.inmap)) for r in hit[1]]


def _render_node(lang: Language, node, inputs: Sequence[KernelInput], dims_max, symbols, sm_count) -> list:
    op = node.op
    shape = node.shape
    tree = primitive_tree(node)
    if tree is not None:
        k = render_elementwise(lang, shape, node.dtype, tree, inputs, dims_max, symbols)
        return [Rendered(k, _ident(len(inputs)))]
    if op in ("SumReduce", "MaxReduce"):
        axis = node.attrs["axis"]
        in_shape = inputs[0].view.shape
        ks = render_reduce(lang, in_shape, axis, "sum" if op == "SumReduce" else "max", ("in", 0),
                           inputs, node.dtype, dims_max, symbols,
                           strategy=node.attrs.get("strategy"), sm_count=sm_count)
        return [Rendered(k, _ident(len(inputs))) for k in ks]
    if op == "Scatter":
        dest, idx, src = inputs
        copy = render_copy(lang, shape, dest, dims_max, symbols)
        sc = render_scatter(lang, shape, node.dtype, idx, src, node.attrs.get("mode", "set"),
                            dims_max, symbols)
        return [Rendered(copy, {"in0": 0}), Rendered(sc, {"in0": 1, "in1": 2})]
    if op == "CustomOp":
        kind = node.attrs.get("name")
        if kind == "fused":
            k = render_elementwise(lang, shape, node.dtype, node.attrs["expr"], inputs, dims_max, symbols)
            return [Rendered(k, _ident(len(inputs)))]
        if kind == "fused_reduce":
            ks = render_reduce(lang, tuple(node.attrs["in_shape"]), node.attrs["axis"],
                               node.attrs["reduce"], node.attrs["expr"], inputs, node.dtype,
                               dims_max, symbols, strategy=node.attrs.get("strategy"),
                               sm_count=sm_count)
            return [Rendered(k, _ident(len(inputs))) for k in ks]
    raise NotImplementedError(f"the renderer has no kernel for {op}"
                              + (f" {node.attrs.get('name')!r}" if op == "CustomOp" else ""))

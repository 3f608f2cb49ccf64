"""The HLIR graph: nodes in creation (= topological) order, each an op with viewed inputs."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import numpy as np

from . import dtypes as dt
from .expr import Expr, render
from .ops import PRIMITIVES
from .view import View


def _freeze(v: Any):
    """A hashable stand-in for an attribute value (arrays hash by content)."""
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, hashlib.sha1(np.ascontiguousarray(v).tobytes()).hexdigest())
    if isinstance(v, tuple):
        try:
            hash(v)  # kernel expression trees: already hashable, and large
            return v
        except TypeError:
            return tuple(_freeze(x) for x in v)
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        return ("nan",)
    if isinstance(v, float) and v == 0.0 and math.copysign(1.0, v) < 0:
        return ("-0.0",)  # -0.0 == 0.0 in Python: a literal -0.0 is not the node of a 0.0
    return v


@dataclass
class Node:
    id: int
    op: str
    inputs: tuple  # ((producer id, View), ...)
    shape: tuple
    dtype: dt.DType
    attrs: dict = field(default_factory=dict)

    def key(self) -> tuple:
        return (self.op, tuple((i, v.key()) for i, v in self.inputs), self.shape, self.dtype.name,
                _freeze(self.attrs))


@dataclass(frozen=True)
class Composite:
    """What the front end knows a node computes: ``node``'s value is also the backend kernel
    ``name`` (ir/composites.py) of ``inputs`` ((producer id, View) pairs) with integer
    ``params``. The node's own primitive subgraph stays the definition; a backend with the kernel
    runs it instead (jax.lax.composite's idea): always when ``only`` (the subgraph is too costly
    to time: a sort's n^2 ranks), else where the search finds it faster."""
    node: int
    name: str
    inputs: tuple
    params: tuple
    only: bool = True

    def key(self) -> tuple:
        return (self.node, self.name, tuple((i, v.key()) for i, v in self.inputs), self.params, self.only)

    def remapped(self, remap) -> "Composite | None":
        """The composite over renumbered nodes (``remap(id)`` -> new id or None), or None where
        the node or an input is gone."""
        ids = [remap(self.node)] + [remap(i) for i, _ in self.inputs]
        if any(i is None for i in ids):
            return None
        return Composite(ids[0], self.name, tuple((j, v) for j, (_, v) in zip(ids[1:], self.inputs)),
                         self.params, self.only)


class Graph:
    """A DAG of primitive ops. ``inputs`` and ``outputs`` list node ids in argument/result order;
    ``composites`` the front end's named kernels of some nodes (:class:`Composite`)."""

    composites: tuple = ()  # (graphs pickled before composites existed read as none)

    def __init__(self, name: str = "fn"):
        self.name = name
        self.nodes: list[Optional[Node]] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.composites = ()
        self._cse: dict = {}

    def __len__(self):
        return sum(1 for n in self.nodes if n is not None)

    def add(self, op: str, inputs: Iterable = (), shape: tuple = (), dtype: dt.DType = dt.float32,
            **attrs) -> int:
        if op not in PRIMITIVES:
            raise ValueError(f"unknown HLIR op {op!r}")
        inputs = tuple(inputs)
        node = Node(len(self.nodes), op, inputs, tuple(shape), dtype, attrs)
        if op not in ("Input", "Output"):
            k = node.key()
            hit = self._cse.get(k)
            if hit is not None:
                return hit
            self._cse[k] = node.id
        self.nodes.append(node)
        if op == "Input":
            self.inputs.append(node.id)
        elif op == "Output":
            self.outputs.append(node.id)
        return node.id

    def node(self, i: int) -> Node:
        return self.nodes[i]

    def add_composite(self, node: int, name: str, inputs, params, only: bool = True) -> None:
        c = Composite(node, name, tuple(inputs), tuple(params), only)
        if all(c.key() != o.key() for o in self.composites):  # (Graph.add hash-conses the node)
            self.composites = self.composites + (c,)

    def carry_composites(self, source: "Graph", remap) -> None:
        """Keep ``source``'s composites over this rebuilt graph (``remap(old id)`` -> new id or
        None where the node was dropped or folded away)."""
        kept = (c.remapped(remap) for c in source.composites)
        self.composites = tuple(c for c in kept if c is not None)

    def live_nodes(self):
        return [n for n in self.nodes if n is not None]

    def consumers(self) -> dict:
        out: dict = {n.id: [] for n in self.live_nodes()}
        for n in self.live_nodes():
            for i, _ in n.inputs:
                out[i].append(n.id)
        return out

    def symbols(self) -> frozenset:
        syms = frozenset()
        for n in self.live_nodes():
            for d in n.shape:
                if isinstance(d, Expr):
                    syms |= d.free_symbols()
        return syms - {"z"}

    # ---- identity ---------------------------------------------------------------------------
    def structural_hash(self) -> str:
        """A stable hash of the graph's structure, shapes, dtypes and attributes."""
        h = hashlib.sha256()
        for n in self.live_nodes():
            h.update(repr(n.key()).encode())
        h.update(repr((self.inputs, self.outputs)).encode())
        if self.composites:
            h.update(repr([c.key() for c in self.composites]).encode())
        return h.hexdigest()[:32]

    # ---- printing ---------------------------------------------------------------------------
    def as_text(self) -> str:
        lines = [f"hlir {self.name} ({len(self)} nodes)"]
        for n in self.live_nodes():
            ins = ", ".join(f"%{i}" + ("" if v.reads_whole(self.nodes[i].shape)
                                       else f"<{v}>") for i, v in n.inputs)
            attrs = _fmt_attrs(n)
            lines.append(f"  %{n.id} = {n.op}{attrs}({ins}) : {type_str(n.dtype, n.shape)}")
        for c in self.composites:
            ins = ", ".join(f"%{i}" for i, _ in c.inputs)
            lines.append(f"  %{c.node} is {c.name}({ins}) params {list(c.params)}")
        return "\n".join(lines)

    __str__ = as_text


_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "bool": "bool"}


def type_str(dtype: dt.DType, shape: tuple) -> str:
    dims = ",".join(str(d) if isinstance(d, int) else render(d) for d in shape)
    return f"{_SHORT[dtype.name]}[{dims}]"


def _fmt_attrs(n: Node) -> str:
    if not n.attrs:
        return ""
    parts = []
    for k, v in n.attrs.items():
        if isinstance(v, np.ndarray):
            v = f"array{list(v.shape)}" if v.size > 4 else np.array2string(v, separator=",")
        elif isinstance(v, Expr):
            v = render(v)
        elif isinstance(v, dt.DType):
            v = v.name
        parts.append(f"{k}={v}")
    return "[" + " ".join(parts) + "]"

"""Planning one bucket of a graph for the CUDA backend: kernels, buffers, lifetimes, arena.

The planner walks the graph once, turns every node into device steps (rendered kernels, hand
kernels, host-side cuBLAS calls), gives every value a buffer, and packs the intermediates into
one arena from their lifetimes (sized at the bucket's largest dims). The walk follows the graph's
order except that sibling GEMVs (one activation row read by q, k, v) are moved next to each
other, and their steps then become one launch (siblings.py). Nothing here touches the
GPU, so planning and the rendered sources are testable on any machine.

Buffers: ``input`` (the caller's array, registered by pointer), ``output`` (allocated per call,
the producing kernel writes it directly when it can), ``const`` (captured arrays, uploaded
once), ``arena`` (intermediates) and ``scratch`` (per-step temporaries: split-reduction
partials, materialised operands). Every kernel reads buffer pointers and dims from the
parameter table ``P``: dims first, then one pointer per buffer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, same
from ...ir.view import View
from ..render import (CUDA, KernelInput, KernelSource, render_copy, render_node, render_scatter,
                      renderable)
from ..render.index import max_value, numel
from .attention_store import fold_attention_stores
from .epilogue import fuse_gemv_epilogues, fuse_reshaped_elementwise
from .gemv_argmax import fold_gemv_argmax
from .gemv_stores import fold_gemv_stores
from .horizontal import merge_independent_steps
from .l2_prefetch import prefetch_next_weights
from .launch import evaluate
from .prologue import fold_rms_prologues
from .reduce_epilogue import fuse_reduce_epilogues
from .rope_store import fold_rope_stores
from .siblings import merge_gemv_steps, sibling_order
from .widening import read_through

ALIGN = 256


# the largest table (elements at a bucket's largest dims) the planner computes first when it is
# made from the inputs alone: a decode step's RoPE cos/sin rows and KV-cache index are a few KB
TABLE_ELEMENTS = 1 << 16

@dataclass
class Buf:
    id: int
    dtype: dt.DType
    numel: object  # int or Expr: elements at the call's dims
    kind: str  # input, output, const, arena, scratch
    index: int = -1  # input / output position, or const node id
    first: int = -1
    last: int = -1
    offset: int = 0
    nbytes_max: int = 0
    shape: tuple = ()  # outputs: the node's shape (Exprs evaluated per call)


@dataclass
class KernelStep:
    source: KernelSource
    bufs: list  # buffer ids in the order of source.buffers
    node: int
    label: str


@dataclass
class HostStep:
    """A step run by the host (a cuBLAS call): ``run(ptr, dims)`` enqueues it. What it enqueues
    depends only on its buffers' pointers and the values of the symbols in ``dims``: a captured
    graph is reused while those are the same (the bucket reads them from its parameter table,
    one slice a call, rather than asking each step)."""

    bufs: list
    node: int
    label: str
    run: Callable
    dims: frozenset = frozenset()


def symbols_of(*items) -> frozenset:
    """The dim symbols in ints, Exprs and Views (shape, strides, offset, mask) and tuples of them."""
    out = frozenset()
    for it in items:
        if isinstance(it, Expr):
            out |= it.free_symbols()
        elif isinstance(it, View):
            out |= symbols_of(it.shape, it.strides, it.offset, *(it.mask or ()))
        elif isinstance(it, (tuple, list)):
            out |= symbols_of(*it)
    return out


@dataclass
class BucketPlan:
    symbols: list
    dims_max: dict
    bufs: list
    steps: list
    arena_bytes: int = 0
    outputs: list = field(default_factory=list)  # buffer id per graph output
    inputs: list = field(default_factory=list)  # buffer id per graph input (None: unused)

    def kernels(self) -> list:
        return [s.source for s in self.steps if isinstance(s, KernelStep)]

    def describe(self) -> str:
        lines = [f"bucket {self.dims_max or '{}'}: {len(self.steps)} steps, arena {self.arena_bytes} B"]
        for s in self.steps:
            if isinstance(s, KernelStep):
                m = s.source.meta
                extra = ", ".join(f"{k}={v}" for k, v in m.items()
                                  if not k.startswith("_") and v not in (None, 0))
                lines.append(f"  %{s.node} {s.label}: {s.source.name}" + (f" ({extra})" if extra else ""))
            else:
                lines.append(f"  %{s.node} {s.label}: host")
        return "\n".join(lines)


def _registrar(table: dict):
    """A decorator factory filing functions in ``table`` under a CustomOp kind's name."""
    def register(name: str):
        def deco(fn):
            table[name] = fn
            return fn

        return deco

    return register


# CustomOp kinds beyond the renderer's generic ones: name -> lower(planner, node)
LOWERERS: dict[str, Callable] = {}
lowerer = _registrar(LOWERERS)

# CustomOp kinds whose kernels one launch can run together with a sibling's: name ->
# key(planner, node), equal for nodes that may share a launch, None for a node that may not
# (the matmul lowering's GEMV over one activation row, see siblings.py)
SIBLING_KEYS: dict[str, Callable] = {}
sibling_key = _registrar(SIBLING_KEYS)


class Planner:
    def __init__(self, graph, dims_max: dict, symbols, sm_count: int = 132, lang=CUDA,
                 donated=(), arch: int = 0):
        self.graph = graph
        self.arch = arch  # the device's compute capability (90 for sm_90); 0: unknown, none assumed
        self.donated = frozenset(donated)
        self.dims_max = dict(dims_max)
        self.symbols = list(symbols)
        self.sm_count = sm_count
        self.lang = lang
        self.bufs: list[Buf] = []
        self.steps: list = []
        self.node_buf: dict[int, int] = {}  # node id -> buffer id (None for inlined scalars)
        self.scalars: dict[int, object] = {}  # node id -> Python scalar of a scalar Constant
        self.narrow_source: dict[int, int] = {}  # widening copy skipped -> the node it copies

    # ---- buffers --------------------------------------------------------------------------
    def new_buf(self, dtype, n, kind, index=-1, shape=()) -> int:
        b = Buf(len(self.bufs), dtype, n, kind, index, shape=tuple(shape))
        self.bufs.append(b)
        return b.id

    def scratch(self, dtype, n) -> int:
        return self.new_buf(dtype, n, "scratch")

    def zeroed_counters(self, n: int, key) -> int:
        """n int32 counters, zero at the first launch; the kernel counting in them (the last
        block or warp of a row to finish) sets them back to zero for the next one."""
        self.const_values[key] = np.zeros(n, np.int32)
        return self.new_buf(dt.int32, n, "const", key)

    def kernel_input(self, node, k) -> KernelInput:
        src, view = node.inputs[k]
        src = self.narrow_source.get(src, src)  # (a skipped widening copy: its source, widening.py)
        d = self.graph.nodes[src].dtype
        if src in self.scalars:
            return KernelInput(view, d, self.scalars[src])
        return KernelInput(view, d)

    def input_buf(self, node, k) -> int:
        src = node.inputs[k][0]
        src = self.narrow_source.get(src, src)
        b = self.node_buf.get(src)
        if b is None:  # a scalar constant read by something that needs memory
            val = np.asarray(self.scalars[src], dtype=self.graph.nodes[src].dtype.np).reshape(())
            b = self.node_buf[src] = self.new_buf(self.graph.nodes[src].dtype, 1, "const", src)
            self.const_values[src] = val
        return b

    def materialize(self, node, k, view: View | None = None) -> tuple:
        """A contiguous copy of input k (through ``view``, default its edge view) in scratch
        memory: returns (buffer id, contiguous view)."""
        inp = self.kernel_input(node, k)
        if view is not None:
            inp = KernelInput(view, inp.dtype, inp.scalar)
        shape = inp.view.shape
        b = self.scratch(inp.dtype, numel(shape))
        src = render_copy(self.lang, shape, inp, self.dims_max, self.symbols)
        bufs = [] if inp.inlined else [self.input_buf(node, k)]
        self.add_kernel(src, bufs + [b], node.id, "materialize")
        return b, View.contiguous(shape)

    # ---- steps ----------------------------------------------------------------------------
    def add_kernel(self, source: KernelSource, bufs: list, node: int, label: str):
        if len(bufs) != len(source.buffers):
            raise AssertionError(f"kernel {source.name} takes {source.buffers}, got {len(bufs)} buffers")
        self.steps.append(KernelStep(source, list(bufs), node, label))

    def add_host(self, step: HostStep):
        self.steps.append(step)

    def bind(self, rendered, node):
        """Resolve the roles of rendered kernels for a node to buffers and add them."""
        out = self.node_buf[node.id]
        scratch = None
        for rk in rendered:
            bufs = []
            for role in rk.kernel.buffers:
                if role == "out":
                    bufs.append(out)
                elif role == "scratch":
                    if scratch is None:
                        meta = rk.kernel.meta.get("scratch")
                        pdt, rows = meta if meta else (dt.float32, 1)
                        scratch = self.scratch(pdt, rows)
                    bufs.append(scratch)
                elif role == "count":  # per-row counters of a one-launch split (render/reduce.py)
                    n = int(max_value(rk.kernel.meta["count"], self.dims_max) or 1)
                    bufs.append(self.zeroed_counters(n, ("reduce count", node.id, rk.kernel.name)))
                else:
                    bufs.append(self.input_buf(node, rk.inmap[role]))
            self.add_kernel(rk.kernel, bufs, node.id, node.op if node.op != "CustomOp" else node.attrs["name"])

    # ---- the walk -------------------------------------------------------------------------
    def plan(self, const_values: dict) -> BucketPlan:
        g = self.graph
        self.const_values = const_values
        aliased = self._choose_aliases()
        inputs = []
        for pos, nid in enumerate(g.inputs):
            n = g.nodes[nid]
            self.node_buf[nid] = self.new_buf(n.dtype, numel(n.shape), "input", pos)
            inputs.append(self.node_buf[nid])
        outputs = [None] * len(g.outputs)
        self.narrow_source = read_through(g)
        readers: dict = {}
        for n in g.live_nodes():
            for i, _ in n.inputs:
                readers[i] = readers.get(i, 0) + 1
        for node in self._schedule():
            op = node.op
            if op == "Input" or node.id in self.narrow_source:
                continue
            if op == "Constant":
                v = node.attrs["value"]
                if isinstance(v, np.ndarray) and v.ndim > 0:
                    self.node_buf[node.id] = self.new_buf(node.dtype, int(v.size), "const", node.id)
                    const_values.setdefault(node.id, np.ascontiguousarray(v, dtype=node.dtype.np))
                else:
                    self.scalars[node.id] = np.asarray(v).item() if isinstance(v, np.ndarray) else v
                continue
            if op == "Output":
                k = g.outputs.index(node.id)
                src, view = node.inputs[0]
                if aliased.get(node.id) is not None:
                    outputs[k] = self.node_buf[src]
                    continue
                ob = self.new_buf(node.dtype, numel(node.shape), "output", k, node.shape)
                outputs[k] = ob
                inp = self.kernel_input(node, 0)
                srcs = render_copy(self.lang, node.shape, inp, self.dims_max, self.symbols)
                bufs = [] if inp.inlined else [self.input_buf(node, 0)]
                self.add_kernel(srcs, bufs + [ob], node.id, "output copy")
                continue
            alias_k = aliased.get(("prod", node.id))
            if alias_k is not None and self._scatter_in_place(node, readers):
                continue
            if alias_k is not None:  # (the caller gets the output's shape, the same elements)
                self.node_buf[node.id] = self.new_buf(node.dtype, numel(node.shape), "output", alias_k,
                                                      g.nodes[g.outputs[alias_k]].shape)
            else:
                self.node_buf[node.id] = self.new_buf(node.dtype, numel(node.shape), "arena")
            name = node.attrs.get("name") if op == "CustomOp" else None
            if name in LOWERERS:
                first = len(self.steps)
                LOWERERS[name](self, node)
                mine = self.node_buf[node.id]
                if alias_k is not None and any(isinstance(st, HostStep) and mine in st.bufs
                                               for st in self.steps[first:]):
                    # a host step bakes its pointers into a captured graph, and an output is new
                    # every call: write the arena and copy out instead
                    buf = self.bufs[mine]
                    buf.kind, buf.index, buf.shape = "arena", -1, ()
                    aliased.pop(g.outputs[alias_k], None)
            elif renderable(node):
                ins = [self.kernel_input(node, k) for k in range(len(node.inputs))]
                self.bind(render_node(self.lang, node, ins, self.dims_max, self.symbols, self.sm_count), node)
            else:
                raise NotImplementedError(
                    f"the CUDA backend has no kernel for node %{node.id} {op}"
                    + (f" {name!r}" if name else "") + f"; known CustomOp kinds: "
                    f"fused, fused_reduce, {', '.join(sorted(LOWERERS))}")
        merge_gemv_steps(self)
        fold_rms_prologues(self)  # (before the epilogues: a GEMV step's epilogue keeps its prologue)
        fuse_gemv_epilogues(self)
        fuse_reduce_epilogues(self)
        fold_attention_stores(self)  # (before the copies it folds are chained to each other)
        fuse_reshaped_elementwise(self)
        fold_rope_stores(self)  # (before the merge: the folded step joins RoPE of q and the v scatter)
        fold_gemv_stores(self)  # (after it: RoPE of k keeps its cache stores inside the GEMV)
        fold_gemv_argmax(self)  # (the greedy pick after the LM head's GEMV and its epilogue)
        merge_independent_steps(self)
        prefetch_next_weights(self)  # (last: the GEMV steps it renders again are final)
        self._lifetimes()
        size = self._pack()
        return BucketPlan(self.symbols, self.dims_max, self.bufs, self.steps, size, outputs, inputs)

    def _schedule(self) -> list:
        """The nodes in planning order: the graph's, with small tables made from the inputs
        alone first (_tables_first), and sibling nodes (equal SIBLING_KEYS keys, such as GEMVs
        reading the same activation row) moved next to each other when their inputs allow, so
        that merge_gemv_steps can run them in one launch."""
        nodes = self._tables_first(self.graph.live_nodes())
        keys = {}
        for n in nodes:
            fn = SIBLING_KEYS.get(n.attrs.get("name")) if n.op == "CustomOp" else None
            key = fn(self, n) if fn is not None else None
            if key is not None:
                keys[n.id] = key
        if len(keys) < 2:
            return nodes
        return sibling_order(nodes, keys, {n.id for n in nodes if n.op == "Input"})

    def _tables_first(self, nodes: list) -> list:
        """Constants, then small elementwise kernels computed from inputs and constants alone
        (at most TABLE_ELEMENTS at the bucket's largest dims), then the rest, each in graph
        order. A decode step's RoPE tables and cache index are traced inside layer 0's
        attention, after its q/k/v GEMV: first, they let that GEMV take RoPE and the cache
        stores as its own (gemv_stores.py), and may share a launch with the step's first
        kernels (horizontal.py)."""
        early = {n.id for n in nodes if n.op in ("Input", "Constant")}
        tables = []
        for n in nodes:
            if (n.op == "CustomOp" and n.attrs.get("name") == "fused"
                    and all(i in early for i, _ in n.inputs)
                    and (max_value(numel(n.shape), self.dims_max) or TABLE_ELEMENTS + 1) <= TABLE_ELEMENTS):
                early.add(n.id)
                tables.append(n)
        if not tables:
            return nodes
        first = [n for n in nodes if n.op == "Constant"] + tables
        moved = {n.id for n in first}
        return first + [n for n in nodes if n.id not in moved]

    def is_scalar_constant(self, nid: int) -> bool:
        """Whether node ``nid`` is a scalar Constant (inlined into the kernels that read it)."""
        n = self.graph.nodes[nid]
        v = n.attrs.get("value") if n.op == "Constant" else None
        return n.op == "Constant" and not (isinstance(v, np.ndarray) and v.ndim > 0)

    def _scatter_in_place(self, node, readers: dict) -> bool:
        """A Scatter into a donated input that nothing else reads, whose result is an output of
        the same shape: it updates the caller's buffer in place (no copy of the destination),
        and the output is that buffer (a KV cache row written per step, not the whole cache)."""
        if node.op != "Scatter":
            return False
        dest, view = node.inputs[0]
        src = self.graph.nodes[dest]
        if (src.op != "Input" or src.attrs.get("index") not in self.donated or readers.get(dest) != 1
                or src.dtype != node.dtype or not view.is_contiguous or view.mask is not None
                or len(view.shape) != len(node.shape)
                or not all(same(a, b) for a, b in zip(view.shape, node.shape))
                or not all(same(a, b) for a, b in zip(src.shape, node.shape))):
            return False
        buf = self.node_buf[dest]
        self.node_buf[node.id] = buf
        _, idx, upd = (self.kernel_input(node, k) for k in range(3))
        sc = render_scatter(self.lang, node.shape, node.dtype, idx, upd, node.attrs.get("mode", "set"),
                            self.dims_max, self.symbols)
        ins = [self.input_buf(node, 1)] + ([] if upd.inlined else [self.input_buf(node, 2)])
        self.add_kernel(sc, ins + [buf], node.id, "Scatter (in place)")
        return True

    def _choose_aliases(self) -> dict:
        """Outputs whose producer can write the output buffer directly (trivial view, a node
        the planner computes, first output of that producer)."""
        g = self.graph
        out: dict = {}
        taken = set()
        for k, oid in enumerate(g.outputs):
            onode = g.nodes[oid]
            src, view = onode.inputs[0]
            p = g.nodes[src]
            if p.op in ("Input", "Constant") or src in taken:
                continue
            # the view reads all of the producer in its own order (a reshape, a [] read as [1])
            trivial = view.is_contiguous and same(numel(view.shape), numel(p.shape))
            if not trivial or p.dtype != onode.dtype:
                continue
            taken.add(src)
            out[oid] = src
            out[("prod", src)] = k
        return out

    def _lifetimes(self):
        for i, s in enumerate(self.steps):
            for b in s.bufs:
                buf = self.bufs[b]
                if buf.first < 0:
                    buf.first = i
                buf.last = i
        dmax = self.dims_max
        for b in self.bufs:
            n = max_value(b.numel, dmax)
            if n is None:
                raise ValueError(f"buffer {b.id} has size {b.numel}, which the bucket dims {dmax} do not bound")
            b.nbytes_max = max(int(n), 1) * b.dtype.itemsize

    def _pack(self) -> int:
        """Greedy best-fit of arena/scratch buffers by size, reusing memory of dead buffers."""
        placed: list = []
        size = 0
        todo = [b for b in self.bufs if b.kind in ("arena", "scratch") and b.first >= 0]
        todo.sort(key=lambda b: -b.nbytes_max)
        for b in todo:
            need = (b.nbytes_max + ALIGN - 1) // ALIGN * ALIGN
            busy = sorted((p.offset, p.offset + ((p.nbytes_max + ALIGN - 1) // ALIGN * ALIGN))
                          for p in placed if not (p.last < b.first or b.last < p.first))
            off = 0
            for lo, hi in busy:
                if off + need <= lo:
                    break
                off = max(off, hi)
            b.offset = off
            placed.append(b)
            size = max(size, off + need)
        return size


__all__ = ["Planner", "BucketPlan", "Buf", "KernelStep", "HostStep", "symbols_of", "lowerer", "LOWERERS",
           "sibling_key", "SIBLING_KEYS", "evaluate"]

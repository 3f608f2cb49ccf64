"""Compiling an LLIR graph for MLX: a list of per-node steps, run lazily and evaluated once.

Each step returns an MLX array (lazy); ``run`` evaluates the outputs together so MLX can
schedule the whole graph at once. On the Metal path, nodes the shared renderer can express
become Metal kernels (backends/mlx/metal_host.py); every other node, and every node on machines
without Metal, runs through MLX's own ops (backends/mlx/ops.py).
"""
from __future__ import annotations

import mlx.core as mx

from ...ir.passes import last_readers
from ..base import Executable
from . import kernels as _kernels  # noqa: F401  (registers fused, fused_reduce, matmul)
from .model_kernels import MODEL_KINDS, MULTI_TABLE_KINDS
from .row_kernels import ROW_KINDS
from .sort_kernels import SORT_KINDS
from .math_kernels import MATH_KINDS
from .ops import OPS, make_reader


class MemoryBudgetError(MemoryError):
    """A candidate's buffers would exceed the search's memory budget (it is not run)."""


def kernel_name(node) -> str:
    return node.attrs.get("name") if node.op == "CustomOp" else node.op


class MLXExecutable(Executable):
    """A graph compiled to steps. ``metal`` is a :class:`~.metal_host.MetalKernels` or None."""

    def __init__(self, graph, options: dict | None = None, metal=None):
        options = dict(options or {})
        self.graph = graph
        self.options = options
        self.metal = metal
        self.n = len(graph.nodes)
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        matmul_impl = options.get("matmul", "library")
        if matmul_impl not in ("library", "generic"):
            raise ValueError(f"MLX backend: option matmul must be 'library' or 'generic', got {matmul_impl!r}")
        self.steps = []
        self.kinds = []  # (node id, how it runs) for describe()
        last_use = last_readers(graph)
        for node in graph.live_nodes():
            if node.op == "Input":
                continue
            name = kernel_name(node)
            if name == "matmul" and matmul_impl == "generic":
                name = "matmul_generic"
            readers = [make_reader(i, v, graph.nodes[i].shape) for i, v in node.inputs]
            step = None
            if metal is not None:
                step = metal.step_for(node, name, readers)
            how = "metal" if step is not None else "mlx"
            if step is None:
                build = OPS.get(name)
                if build is None:
                    raise NotImplementedError(
                        f"MLX backend: no kernel for {name!r} (node %{node.id}); it runs the HLIR "
                        f"primitives, the kinds fused, fused_reduce, matmul and the model and row kernels "
                        f"{sorted(MODEL_KINDS + MULTI_TABLE_KINDS + ROW_KINDS + SORT_KINDS + MATH_KINDS)}")
                step = build(node, readers)
            free = tuple(i for i in last_use.get(node.id, ()) if i not in self.outputs)
            self.steps.append((node.id, step, free))
            self.kinds.append((node.id, f"{name}:{how}"))
        self._checked = metal is None  # the first Metal run evaluates kernel by kernel

    # ---- running ----------------------------------------------------------------------------------
    def run(self, inputs, dims) -> list:
        vals = [None] * self.n
        for nid, x in zip(self.inputs, inputs):
            vals[nid] = x
        check = not self._checked
        for nid, step, free in self.steps:
            vals[nid] = step(vals, dims)
            if check:  # surface a Metal compile failure at the kernel that caused it
                self.metal.check(nid, vals[nid])
            for f in free:
                vals[f] = None
        outs = [vals[o] for o in self.outputs]
        mx.eval(*outs)
        self._checked = True
        return outs

    def synchronize(self) -> None:
        mx.synchronize()

    # ---- memory ---------------------------------------------------------------------------------
    def buffer_bytes(self, dims: dict) -> int:
        """Bytes of every intermediate and output buffer at these dims (an upper bound: MLX
        frees intermediates as soon as their last reader ran)."""
        total = 0
        for node in self.graph.live_nodes():
            if node.op in ("Input", "Output"):
                continue
            n = 1
            for d in node.shape:
                n *= d if isinstance(d, int) else d.evaluate(dims)
            total += n * node.dtype.itemsize
        return total

    def profile(self, inputs, dims, trials: int, timeout_s: float, max_memory_mib: float | None = None) -> float:
        """Median seconds per run. Raises MemoryBudgetError before running when the buffers
        exceed ``max_memory_mib`` (or the compile option of that name), TimeoutError as soon as
        the wall clock spent on this candidate passes ``timeout_s``."""
        budget = max_memory_mib if max_memory_mib is not None else self.options.get("max_memory_mib")
        if budget is not None:
            need = self.buffer_bytes(dims)
            if need > budget * 2**20:
                raise MemoryBudgetError(f"MLX candidate needs {need / 2**20:.1f} MiB of buffers, over the "
                                        f"budget of {budget} MiB")
        # the warm-up compiles the kernels; the budget covers the whole candidate
        return self.median_seconds(inputs, dims, trials, timeout_s, "MLX candidate", whole_budget=True)

    def describe(self) -> str:
        path = "metal" if self.metal is not None else "mlx ops"
        lines = [f"mlx plan of {len(self.steps)} steps ({path})"]
        lines += [f"  %{nid} {how}" for nid, how in self.kinds]
        if self.metal is not None:
            lines += self.metal.describe()
        return "\n".join(lines)


__all__ = ["MLXExecutable", "MemoryBudgetError", "kernel_name"]

"""Running rendered Metal kernels through ``mx.fast.metal_kernel`` (the path on Apple silicon).

Each node the renderer can express gets a step that hands its producers' row-major buffers
(flattened) and the dims it reads to the kernel; the grid is counted in threads. The first run
of an executable evaluates node by node, so a Metal compile failure is reported with the kernel
name, the node and the saved source instead of surfacing at the end of the graph. The model
kernels (embedding_bag(_multi), dlrm_interact, conv2d_bias) run the hand kernels of
kernels/*.metal instead (metal_model.py).
"""
from __future__ import annotations

import os
import tempfile

import mlx.core as mx
import numpy as np

from ..render import KernelInput
from .metal import kernel_for
from .metal_model import hand_step
from .ops import mx_dtype


class MetalCompileError(RuntimeError):
    """A Metal kernel failed to compile or run; the message names it and where its source is."""


def _scalar_of(node):
    """The value of a scalar Constant producer (inlined into kernels), else None."""
    if node.op != "Constant":
        return None
    v = np.asarray(node.attrs["value"])
    return v.reshape(()).item() if v.size == 1 else None


class MetalKernels:
    """The Metal side of one executable: kernels by node, compiled objects cached by name."""

    _compiled: dict = {}  # kernel name (content hash) -> mx.fast.metal_kernel object, process-wide

    def __init__(self, graph, options: dict | None = None):
        self.graph = graph
        self.options = options or {}
        self.by_node: dict = {}  # node id -> MetalKernel
        self.source_dir = self.options.get("metal_source_dir") or os.path.join(
            tempfile.gettempdir(), "luminal_fn_metal")

    def step_for(self, node, name: str, readers=None):
        """A step running the node as a Metal kernel, or None (then MLX ops run it). With
        ``readers`` (the node's view readers), model kernels run the hand kernels of
        kernels/*.metal (metal_model.py)."""
        if readers is not None:
            hand = hand_step(node, name, readers, self._kernel)
            if hand is not None:
                step, hk = hand
                self.by_node[node.id] = hk
                return step
        g = self.graph
        inputs = [KernelInput(v, g.nodes[i].dtype, _scalar_of(g.nodes[i])) for i, v in node.inputs]
        mk = kernel_for(node, inputs, name)
        if mk is None:
            return None
        self.by_node[node.id] = mk
        kernel = self._kernel(mk)
        srcs = [i for i, _ in node.inputs]
        shape = node.shape
        out_dt = mx_dtype(node.dtype)

        def step(vals, dims):
            out_shape = tuple(d if isinstance(d, int) else d.evaluate(dims) for d in shape)
            n = int(np.prod(out_shape)) if out_shape else 1
            if n == 0:
                return mx.zeros(out_shape, out_dt)
            args = []
            for role in mk.input_roles:
                if role == "dims":
                    args.append(mx.array([int(dims[s]) for s in mk.dims], mx.int32))
                    continue
                buf = vals[srcs[role]].reshape(-1)
                args.append(buf if buf.size else mx.zeros((1,), buf.dtype))
            grid, group = mk.launch(dims)
            (out,) = kernel(inputs=args, output_shapes=[(n,)], output_dtypes=[out_dt],
                            grid=grid, threadgroup=group)
            return out.reshape(out_shape)

        return step

    def _kernel(self, mk):
        k = self._compiled.get(mk.name)
        if k is None:
            k = self._compiled[mk.name] = mx.fast.metal_kernel(
                name=mk.name, input_names=mk.input_names, output_names=["out"], source=mk.body,
                header=mk.header, ensure_row_contiguous=True)
        return k

    def check(self, nid: int, arr) -> None:
        """Evaluate one node's result; a failure of its Metal kernel names the kernel."""
        try:
            mx.eval(arr)
        except Exception as e:
            mk = self.by_node.get(nid)
            if mk is None:
                raise
            path = self.save_source(mk)
            node = self.graph.nodes[nid]
            raise MetalCompileError(
                f"Metal kernel {mk.name} ({mk.kind}) for node %{nid} ({node.op}"
                f"{' ' + repr(node.attrs.get('name')) if node.op == 'CustomOp' else ''}) failed: {e}; "
                f"its source is saved to {path}") from e

    def save_source(self, mk) -> str:
        os.makedirs(self.source_dir, exist_ok=True)
        path = os.path.join(self.source_dir, f"{mk.name}.metal")
        with open(path, "w") as f:
            f.write(mk.full_source())
        return path

    def describe(self) -> list:
        out = []
        for nid, mk in self.by_node.items():
            out.append(f"  --- %{nid} {mk.name} ({mk.kind}) inputs {', '.join(mk.input_names)} ---")
            out += ["    " + ln for ln in mk.body.split("\n")]
        return out


__all__ = ["MetalKernels", "MetalCompileError"]

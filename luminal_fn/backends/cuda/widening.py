"""Row kernels and the math kernels read a half-precision tensor where the graph widens it first.

``lf.nn.softmax`` of a bfloat16 array traces ``Cast(x, float32)`` before the formula (math in
float32, as XLA does), so the softmax_rows kernel the rule offers reads a float32 copy that an
elementwise kernel wrote just before: a 16384 x 4096 softmax moved three times the bytes it
needs (run S on the H200: 0.34 of the copy bandwidth, against 0.99 for float32 input). Widening
bfloat16 or float16 to float32 is exact, and these kernels widen what they load anyway
(``lf_ld``), so reading the narrow tensor directly gives the same bits.

A fused node is read through when its tree is exactly ``Cast(in0, float32)`` of a bfloat16 or
float16 input viewed contiguously from offset 0 (element i of the copy is element i of the
source, so every view of the copy is the same view of the source) and every node that reads it is a kernel in ``READS_NARROW`` (their lowerings take each input's
dtype from ``Planner.kernel_input``). The planner then skips the copy and resolves those
inputs to the source's buffer and dtype.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import same
from ..render import index as ix

READS_NARROW = ("softmax_rows", "rms_norm_rows", "attention_rows",
                "arctan2", "arcsin", "arccos")  # (mathkernels.py: elementwise, any float operand)


def read_through(graph) -> dict:
    """{id of a widening copy: id of the node it copies} for the copies the planner skips."""
    readers: dict = {}
    for n in graph.live_nodes():
        for src, _ in n.inputs:
            readers.setdefault(src, []).append(n)
    out = {}
    for n in graph.live_nodes():
        if not _is_exact_widening(graph, n):
            continue
        users = readers.get(n.id, [])
        if users and all(u.op == "CustomOp" and u.attrs.get("name") in READS_NARROW for u in users):
            out[n.id] = n.inputs[0][0]
    return out


def _is_exact_widening(graph, n) -> bool:
    if n.op != "CustomOp" or n.attrs.get("name") != "fused" or len(n.inputs) != 1:
        return False
    if n.attrs.get("expr") != ("Cast", "float32", ("in", 0)) or n.dtype.name != "float32":
        return False
    src, view = n.inputs[0]
    s = graph.nodes[src]
    v = s.attrs.get("value") if s.op == "Constant" else None
    if s.op == "Constant" and not (isinstance(v, np.ndarray) and v.ndim > 0):
        return False  # (a scalar literal has no buffer to read)
    return (s.dtype in dt.HALF and view.mask is None and view.is_contiguous
            and ix.is_zero(view.offset) and same(ix.numel(view.shape), ix.numel(s.shape))
            and same(ix.numel(n.shape), ix.numel(s.shape)))


__all__ = ["read_through", "READS_NARROW"]

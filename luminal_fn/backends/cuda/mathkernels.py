"""CUDA lowerings of the elementwise functions the front end names (ir/composites.py): arctan2,
arcsin and arccos, each one elementwise kernel calling the device's atan2f / asinf / acosf, where
the primitives lnp writes are about 40 passes (arctan's series, the quadrants, the axes, NaN).
The search times the kernel against the primitives and keeps the faster.

The kernel is the shared renderer's elementwise one (render/kernels.py) over a one-node tree
whose tag is the function (render/tree.py, LIBRARY_FUNCTIONS), so it reads its inputs through
their views as every generated kernel does: strides, broadcasts, masks, inlined scalar
constants, the vector path; float16 / bfloat16 operands are computed in float and rounded once
when stored. The device's functions keep C's values at the edges (signed zeros, infinities,
NaN; subnormals too, since the modules are compiled without flushing them) and are within 2-3
ulp elsewhere (CUDA's documented bounds: atan2f 3, asinf 2, acosf 2).
"""
from __future__ import annotations

from ..render.kernels import render_elementwise
from ..render.nodes import Rendered
from .plan import lowerer

TAGS = {"arctan2": "Atan2", "arcsin": "Asin", "arccos": "Acos"}
MATH_KINDS = tuple(TAGS)


def _math_tree(node) -> tuple:
    """The node's elementwise tree: its function of its inputs, in input order."""
    return (TAGS[node.attrs["name"]], node.dtype.name) + tuple(("in", k) for k in range(len(node.inputs)))


def _lower_math(pl, node):
    ins = [pl.kernel_input(node, k) for k in range(len(node.inputs))]
    src = render_elementwise(pl.lang, node.shape, node.dtype, _math_tree(node), ins, pl.dims_max, pl.symbols)
    pl.bind([Rendered(src, {f"in{k}": k for k in range(len(ins))})], node)


for _name in TAGS:
    lowerer(_name)(_lower_math)


__all__ = ["MATH_KINDS"]

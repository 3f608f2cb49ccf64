"""Elementwise functions the front end names (ir/composites.py) as MLX's own: one mx.arctan2 /
mx.arcsin / mx.arccos where the primitives lnp writes are about 40 passes. The search times the
call against the primitives and keeps the faster (as backends/numpy/math_kernels.py on NumPy).

name        inputs                          params
arctan2     y, x (the result's shape)       -           mx.arctan2(y, x)
arcsin      x                               -           mx.arcsin(x)
arccos      x                               -           mx.arccos(x)

Half-precision inputs are computed in float32 and the result is rounded to the node's dtype once
(ops.compute_dtype, as every MLX-ops node). MLX's values are within an ulp of the correctly
rounded ones (tests/test_mlx_math_kernels.py), NumPy's own within about three; the edges (signed
zeros, infinities, NaN, subnormals) are C's.
"""
from __future__ import annotations

import mlx.core as mx

from .ops import cast, compute_dtype, op

FUNCTIONS = {"arctan2": mx.arctan2, "arcsin": mx.arcsin, "arccos": mx.arccos}
MATH_KINDS = tuple(FUNCTIONS)


def _math_kernel(node, readers):
    fn = FUNCTIONS[node.attrs["name"]]
    ct = compute_dtype(node.dtype)

    def step(vals, dims):
        return cast(fn(*(r(vals, dims).astype(ct) for r in readers)), node.dtype)

    return step


for _name in FUNCTIONS:
    op(_name)(_math_kernel)


__all__ = ["MATH_KINDS"]

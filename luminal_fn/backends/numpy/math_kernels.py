"""Elementwise functions the front end names (ir/composites.py) that NumPy computes in one call:
arctan2 is about 40 primitive passes as lnp writes it (a scale for tiny pairs, the quotient,
arctan's series, the quadrants, the axes, NaN) and one np.arctan2, with NumPy's own values. The
search times the call against the primitives; it keeps the faster.

name        inputs                          params
arctan2     y, x (the result's shape)       -           np.arctan2(y, x) in the result's dtype
"""
from __future__ import annotations

import numpy as np

from .executor import kernel
from .model_kernels import _store

MATH_KERNELS = ("arctan2",)


@kernel("arctan2")
def _arctan2(node, readers):
    r_y, r_x = readers

    def step(vals, dims):
        return _store(node, np.arctan2(r_y(vals, dims), r_x(vals, dims)))

    return step


__all__ = ["MATH_KERNELS"]

"""Elementwise functions the front end names (ir/composites.py) that NumPy computes in one call:
arctan2 is about 40 primitive passes as lnp writes it (a scale for tiny pairs, the quotient,
arctan's series, the quadrants, the axes, NaN) and one np.arctan2, with NumPy's own values;
arcsin and arccos are arctan2 of a computed square root, two passes more. The search times the
call against the primitives; it keeps the faster.

name        inputs                          params
arctan2     y, x (the result's shape)       -           np.arctan2(y, x) in the result's dtype
arcsin      x                               -           np.arcsin(x)
arccos      x                               -           np.arccos(x)
"""
from __future__ import annotations

import numpy as np

from .executor import kernel
from .model_kernels import _store

UFUNCS = {"arctan2": np.arctan2, "arcsin": np.arcsin, "arccos": np.arccos}
MATH_KERNELS = tuple(UFUNCS)


def _ufunc_kernel(node, readers):
    ufunc = UFUNCS[node.attrs["name"]]

    def step(vals, dims):
        return _store(node, ufunc(*(r(vals, dims) for r in readers)))

    return step


for _name in UFUNCS:
    kernel(_name)(_ufunc_kernel)


__all__ = ["MATH_KERNELS"]

"""Model helpers (linear, norms, activations, attention, conv...), all plain traced code."""
from __future__ import annotations

from . import numpy as lnp

__all__ = ["softmax", "relu"]


def relu(x):
    return lnp.maximum(x, 0)


def softmax(x, axis=-1):
    m = lnp.max(x, axis=axis, keepdims=True)
    e = lnp.exp(x - m)
    return e / lnp.sum(e, axis=axis, keepdims=True)

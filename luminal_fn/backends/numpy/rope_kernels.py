"""The NumPy semantics of the RoPE kernel that optimize/rules/specialize_rope.egg adds: the
"rotate half" rotary embedding nn.rope traces, computed exactly as traced (the literal -1 of
rotate_half comes in as a 1-element input) in float32 and stored in the node's dtype.

name        inputs                                                  params
rope_half   x (a, b, D), cos (a, b, D), sin (a, b, D), neg (1,)     a b D
            with h = D / 2, x1 = x[.., :h], x2 = x[.., h:]:
            y[.., :h] = x1 * cos[.., :h] + (x2 * neg) * sin[.., :h]
            y[.., h:] = x2 * cos[.., h:] + x1 * sin[.., h:]
            cos and sin may instead be the half tables (a, b, h) whose concatenation with
            themselves the full-width ones are (Hugging Face's cat(freqs, freqs)): both halves
            of a row then read the same entry.
x may be stored narrower than float32 (the rule reads the tensor a Cast to float32 widens): it is
widened as it is read, which is that Cast.
"""
from __future__ import annotations

import numpy as np

from .executor import kernel
from .model_kernels import _as, _store

ROPE_KERNELS = ("rope_half",)


def rope_half_reference(x, cos, sin, neg=-1.0) -> np.ndarray:
    """The kernel's formula on float32 arrays (shared by the kernel and nothing else: the tests
    compare it with an independent float64 RoPE)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c1, c2 = (cos, cos) if cos.shape[-1] == h else (cos[..., :h], cos[..., h:])
    s1, s2 = (sin, sin) if sin.shape[-1] == h else (sin[..., :h], sin[..., h:])
    y1 = x1 * c1 + (x2 * neg) * s1
    y2 = x2 * c2 + x1 * s2
    return np.concatenate([y1, y2], axis=-1)


@kernel("rope_half")
def _rope_half(node, readers):
    r_x, r_cos, r_sin, r_neg = readers

    def step(vals, dims):
        x = _as(r_x(vals, dims), np.float32)
        cos = _as(r_cos(vals, dims), np.float32)
        sin = _as(r_sin(vals, dims), np.float32)
        neg = np.float32(_as(r_neg(vals, dims), np.float32).reshape(-1)[0])
        if x.shape[-1] % 2:
            raise ValueError(f"rope_half kernel: the last dim of x {x.shape} must be even")
        return _store(node, rope_half_reference(x, cos, sin, neg))

    return step


__all__ = ["ROPE_KERNELS", "rope_half_reference"]

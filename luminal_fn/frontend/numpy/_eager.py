"""Eager fallback: a namespace function called outside any trace runs right away."""
from __future__ import annotations

import functools

from .. import tracer as _tracer


def eager(fn, name: str):
    """Wrap ``fn`` so that, outside a jitted function, it traces itself once and runs on the
    NumPy backend, returning ``luminal_fn.Array`` values (like ``jax.numpy`` outside ``jit``)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _tracer.current() is not None or any(isinstance(a, _tracer.Tracer) for a in args):
            return fn(*args, **kwargs)
        from ..eager_run import run_eagerly

        return run_eagerly(fn, name, args, kwargs)

    wrapper.__luminal_raw__ = fn
    return wrapper

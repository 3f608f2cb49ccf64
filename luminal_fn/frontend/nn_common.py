"""Shared plumbing of the ``luminal_fn.nn`` modules: the public-function wrapper, shape checks and
the float32 upcast rule for half-precision inputs."""
from __future__ import annotations

from ..ir.expr import same
from . import numpy as lnp
from .errors import DTypeError, ShapeError
from .numpy._eager import eager

# Normalisations and softmaxes of float16/bfloat16 inputs are computed in float32 and cast back,
# as PyTorch and Hugging Face do: their sums lose too much in 8 or 11 mantissa bits.
_LOW_PRECISION = (lnp.float16, lnp.bfloat16)


def public(registry: list):
    """Decorator: list ``fn`` in ``registry`` (a module's ``__all__``) and let it run eagerly on
    the NumPy backend when called outside a jitted function, like the ``luminal_fn.numpy`` names."""

    def wrap(fn):
        registry.append(fn.__name__)
        return eager(fn, "nn." + fn.__name__)

    return wrap


def as_array(x, fn: str, what: str):
    """``x`` as a traced array; None stays None."""
    if x is None:
        return None
    try:
        return lnp.asarray(x)
    except TypeError as e:
        raise TypeError(f"nn.{fn}: {what} must be an array, got {type(x).__name__} ({e})") from None


def require_float(x, fn: str, what: str):
    if not x.dtype.is_float:
        raise DTypeError(f"nn.{fn}: {what} must be a float array, got dtype {x.dtype} "
                         f"(cast it with .astype(luminal_fn.numpy.float32))")


def require_int(x, fn: str, what: str):
    if not x.dtype.is_int:
        raise DTypeError(f"nn.{fn}: {what} must be an int32 array of indices, got dtype {x.dtype}")


def require_ndim(x, ndims, fn: str, what: str, layout: str):
    if x.ndim not in ndims:
        raise ShapeError(f"nn.{fn}: {what} must be {layout}, got shape {fmt(x.shape)}")


def same_dim(a, b) -> bool:
    return same(a, b)


def static(d, fn: str, what: str) -> int:
    """A dim that must be a plain int (not a symbolic dynamic dim)."""
    if isinstance(d, int):
        return d
    raise ShapeError(f"nn.{fn}: {what} must be static, got the symbolic dim {d} "
                     "(do not mark this axis dynamic)")


def fmt(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def upcast(x):
    """x in float32 when it is float16/bfloat16, else x."""
    return x.astype(lnp.float32) if x.dtype in _LOW_PRECISION else x


def softmax_last(x, axis=-1):
    """The numerically stable softmax (max subtracted) used by nn.softmax and attention."""
    m = lnp.max(x, axis=axis, keepdims=True)
    e = lnp.exp(x - m)
    return e / lnp.sum(e, axis=axis, keepdims=True)

"""NumPy 2's array-API functions with no NumPy 1 twin: matrix_transpose, unstack,
cumulative_sum and cumulative_prod (the NumPy 2 spellings of arccos & co. are aliases in
``__init__``)."""
from __future__ import annotations

from ..errors import ShapeError
from ..tracer import _ctx_of, lift, normalize_axis, static_int
from ._creation import full
from ._reduce import cumprod, cumsum
from ._shape import _slice_axis, concatenate, squeeze, swapaxes

__all__ = ["matrix_transpose", "unstack", "cumulative_sum", "cumulative_prod"]


def matrix_transpose(x):
    """The last two axes swapped (``x.mT``); x must be at least 2-D."""
    x = lift(x, _ctx_of(x))
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: x must be at least 2-D, got shape {x.shape}")
    return swapaxes(x, -1, -2)


def unstack(x, axis=0):
    """The arrays along ``axis`` as a tuple (the inverse of stack); the axis length is static."""
    x = lift(x, _ctx_of(x))
    if x.ndim == 0:
        raise ShapeError("unstack: x is 0-d; there is no axis to split along")
    ax = normalize_axis(axis, x.ndim, "unstack")
    n = static_int(x.shape[ax], f"unstack: the length of axis {ax}")
    return tuple(squeeze(_slice_axis(x, ax, k, k + 1), ax) for k in range(n))


def _cumulative(scan, name: str, initial, x, axis, dtype, include_initial):
    x = lift(x, _ctx_of(x))
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(f"{name}: x has shape {x.shape}; pass axis= for arrays of more than one dim")
        axis = 0
    if x.ndim == 0:
        raise ShapeError(f"{name}: x is 0-d; it needs at least one dim")
    ax = normalize_axis(axis, x.ndim, name)
    out = scan(x, axis=ax, dtype=dtype)
    if not include_initial:
        return out
    first = full(out.shape[:ax] + (1,) + out.shape[ax + 1:], initial, dtype=out.dtype)
    return concatenate([first, out], axis=ax)


def cumulative_sum(x, axis=None, dtype=None, include_initial=False):
    """NumPy 2's cumulative_sum: cumsum that keeps the dims (axis= is required above 1-D) and
    with ``include_initial`` starts from the 0 of the empty sum."""
    return _cumulative(cumsum, "cumulative_sum", 0, x, axis, dtype, include_initial)


def cumulative_prod(x, axis=None, dtype=None, include_initial=False):
    """NumPy 2's cumulative_prod: as cumulative_sum, from the 1 of the empty product."""
    return _cumulative(cumprod, "cumulative_prod", 1, x, axis, dtype, include_initial)

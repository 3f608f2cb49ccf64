"""Inlining an elementwise producer into a consumer that reads it through a view.

A consumer reads producer P's contiguous buffer through a view W. Computing P inside the
consumer's fused kernel instead means reading each of P's inputs at the element W selects, i.e.
through W composed with that input's own view. That composition stays a plain strided view when
W is "reshape, then slice, then broadcast" of P's buffer, and W's non-broadcast axes, in order, are axes of a row-major shape
Q of P's elements (stride 1 innermost), each read over an in-bounds range [start, start + n).
An input view composes as ``input_view.reshape(Q)`` (None when strides cannot say it: then no
inline), each sliced axis sliced, each broadcast axis (stride 0) expanded to W's size. A masked
(padded) W composes through its unmasked core and pads every input back; it is used only when
the computation gives 0 on zeros (a padded read gives 0 where P's op of 0 may not be 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np

from ..ir.expr import as_expr, same, to_int_or_expr
from ..ir.view import View


@dataclass(frozen=True)
class ViewThrough:
    """How a view in the producer's coordinates becomes one in the consumer's."""

    q: tuple  # P's elements as a row-major shape: W's axes before slicing, broadcast axes 1
    starts: tuple  # where each axis's range starts in q
    shape: tuple  # W's shape: the consumer's coordinates
    pads: tuple = ()  # (axis, before, after): W reads zeros there (a padded read)

    def apply(self, view: View) -> Optional[View]:
        """``view`` (shape = the producer's) as read at the consumer's element, or None when
        strides cannot express it."""
        return _composed(self, view)

    def _apply(self, view: View) -> Optional[View]:
        out = view.reshape(self.q)
        if out is None:
            return None
        for axis, (q, start, d) in enumerate(zip(self.q, self.starts, self.shape)):
            if same(q, d):
                continue
            if same(q, 1):
                out = out.expand(axis, d)
            else:
                out = out.slice(axis, start, to_int_or_expr(as_expr(start) + d))
        for axis, before, after in self.pads:
            out = out.pad(axis, before, after)
        return out


@lru_cache(maxsize=1 << 16)
def _composed(how: ViewThrough, view: View) -> Optional[View]:
    # Every genome the search extracts composes the same reads through the same views again;
    # symbolic bounds make one composition ~0.1-0.25 ms (a static scan's shifted reads: most of
    # its 100 extractions' time)
    return how._apply(view)


def through(w: View, producer_shape) -> Optional[ViewThrough]:
    """The transform for inlining a producer of ``producer_shape`` that is read through ``w``,
    or None when ``w`` is not an unmasked reshape-slice-broadcast of the producer's buffer."""
    if w.mask is not None:
        return _through_padded(w, producer_shape)
    q = [1] * w.ndim
    starts = [0] * w.ndim
    real = [k for k, (d, s) in enumerate(zip(w.shape, w.strides)) if not same(d, 1) and not same(s, 0)]
    extent = View.contiguous(producer_shape).numel()  # elements one step of the axis above spans
    rest = w.offset
    for k in real:
        stride = w.strides[k]
        size = _axis_size(w.shape[k], stride, extent)
        if size is None:
            return None
        q[k] = size
        if isinstance(rest, int) and isinstance(stride, int):
            starts[k], rest = divmod(rest, stride)
        elif not same(rest, 0):
            return None  # a symbolic offset: only whole reads
        if not _in_bounds(starts[k], w.shape[k], size):
            return None
        extent = stride
    if not same(extent, 1) or not same(rest, 0):
        return None  # an innermost stride > 1 (a strided or single-column read), or empty W
    return ViewThrough(tuple(q), tuple(starts), tuple(w.shape))


def _through_padded(w: View, producer_shape) -> Optional[ViewThrough]:
    """A masked read: its unmasked core (W sliced to the mask, concrete bounds) composes as
    usual, then every input is padded back, so the inlined computation reads zeros where W did.
    That equals W's zeros only when the computation maps zeros to zero (``maps_zero_to_zero``,
    checked on the built tree). A mask that keeps every element is no mask at all."""
    core, pads = w, []
    for axis, ((lo, hi), d) in enumerate(zip(w.mask, w.shape)):
        if w.axis_full(axis):
            continue
        if not all(isinstance(x, int) for x in (lo, hi, d)) or not 0 <= lo < hi <= d:
            return None
        core = core.slice(axis, lo, hi)
        pads.append((axis, lo, d - hi))
    core = core.drop_full_mask()
    if core.mask is not None:
        return None
    how = through(core, producer_shape)
    if how is None or not pads:
        return how
    return ViewThrough(how.q, how.starts, how.shape, tuple(pads))


def maps_zero_to_zero(tree) -> bool:
    """Whether a fused tree gives exactly 0 when every input it reads is 0 (its literals as
    they are): then computing it under a padded read gives the padding's zeros."""
    with np.errstate(all="ignore"):
        v = _at_zero(tree)
    return v is not None and v == 0.0


def _at_zero(t):
    tag = t[0]
    if tag == "in":
        return 0.0
    if tag == "const":
        return float(t[1])
    args = [_at_zero(a) for a in t[2:]]
    if any(a is None for a in args):
        return None
    x = np.float64(args[0])
    if tag == "Cast":
        d = t[1]
        return float(x != 0) if d == "bool" else (float(np.trunc(x)) if d.startswith("int") else float(x))
    fn = _AT_ZERO.get(tag)
    return None if fn is None else float(fn(x, *map(np.float64, args[1:])))


_AT_ZERO = {
    "Exp2": np.exp2, "Log2": np.log2, "Sin": np.sin, "Sqrt": np.sqrt, "Recip": lambda x: 1.0 / x,
    "Add": lambda a, b: a + b, "Mul": lambda a, b: a * b, "Mod": np.fmod,
    "LessThan": lambda a, b: float(a < b), "Select": lambda c, x, y: x if c != 0 else y,
}


def _axis_size(n, stride, extent):
    """The size q of an axis of ``stride`` under one of ``extent`` elements (q * stride ==
    extent): W's own size n when that holds (a whole axis, symbolic or not), else the integer
    quotient (a sliced axis; concrete only), else None."""
    if same(as_expr(n) * stride, extent):
        return n
    if isinstance(extent, int) and isinstance(stride, int) and stride > 0 and extent % stride == 0:
        return extent // stride
    return None


def _in_bounds(start, n, size) -> bool:
    """Provably 0 <= start and start + n <= size."""
    if all(isinstance(x, int) for x in (start, n, size)):
        return 0 <= start and start + n <= size
    return same(start, 0) and same(n, size)

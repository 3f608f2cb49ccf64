"""Views (shape trackers): how an op reads the contiguous buffer its producer wrote.

A view is ``shape``, ``strides`` and ``offset`` (all symbolic integers) plus an optional ``mask``
of per-dim valid intervals ``[lo, hi)``; reads outside the mask give zero (that is how padding is
expressed). Movement ops (permute, broadcast, slice, flip, pad, reshape, unfold) only edit views.
A movement that strides cannot express returns ``None`` and the caller materialises first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from .expr import Expr, IntLike, as_expr, ceildiv, maximum, minimum, render, same, to_int_or_expr


def _norm(x: IntLike) -> IntLike:
    return to_int_or_expr(x)


def _mul(a: IntLike, b: IntLike) -> IntLike:
    return _norm(as_expr(a) * b) if isinstance(a, Expr) or isinstance(b, Expr) else a * b


def _add(a: IntLike, b: IntLike) -> IntLike:
    return _norm(as_expr(a) + b) if isinstance(a, Expr) or isinstance(b, Expr) else a + b


def contiguous_strides(shape: Sequence[IntLike]) -> tuple:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc = _mul(acc, d)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    shape: tuple
    strides: tuple
    offset: IntLike = 0
    mask: Optional[tuple] = None  # per dim (lo, hi) or None for the whole view

    # ---- constructors ---------------------------------------------------------------------
    @staticmethod
    def contiguous(shape: Sequence[IntLike]) -> "View":
        shape = tuple(_norm(d) for d in shape)
        return View(shape, contiguous_strides(shape), 0, None)

    # ---- properties -----------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_contiguous(self) -> bool:
        return (
            self.mask is None
            and same(self.offset, 0)
            and all(same(s, c) or same(d, 1) for s, c, d in
                    zip(self.strides, contiguous_strides(self.shape), self.shape))
        )

    def numel(self) -> IntLike:
        n: IntLike = 1
        for d in self.shape:
            n = _mul(n, d)
        return n

    def key(self) -> tuple:
        """A hashable, order-stable description (for CSE and graph hashing)."""
        return (self.shape, self.strides, self.offset, self.mask)

    def __str__(self):
        def r(x):
            return str(x) if isinstance(x, int) else render(x)

        s = f"[{', '.join(r(d) for d in self.shape)}] strides [{', '.join(r(d) for d in self.strides)}]"
        if not same(self.offset, 0):
            s += f" +{r(self.offset)}"
        if self.mask is not None:
            s += " mask " + ",".join(f"{r(lo)}:{r(hi)}" for lo, hi in self.mask)
        return s

    # ---- movement -------------------------------------------------------------------------
    def permute(self, axes: Sequence[int]) -> "View":
        mask = tuple(self.mask[a] for a in axes) if self.mask is not None else None
        return View(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes),
                    self.offset, mask)

    def insert_axis(self, axis: int, size: IntLike = 1) -> "View":
        """A new broadcast (stride 0) axis of the given size at position ``axis``."""
        shape = self.shape[:axis] + (_norm(size),) + self.shape[axis:]
        strides = self.strides[:axis] + (0,) + self.strides[axis:]
        mask = None
        if self.mask is not None:
            mask = self.mask[:axis] + ((0, _norm(size)),) + self.mask[axis:]
        return View(shape, strides, self.offset, mask)

    def remove_axis(self, axis: int) -> "View":
        """Drop a size-1 axis (reading its index 0)."""
        mask = None
        if self.mask is not None:
            mask = self.mask[:axis] + self.mask[axis + 1:]
            lo, hi = self.mask[axis]
            if not (same(lo, 0) and not same(hi, 0)):
                # index 0 of that axis is padding: the whole view reads zero
                mask = tuple((0, 0) for _ in mask)
        return View(self.shape[:axis] + self.shape[axis + 1:],
                    self.strides[:axis] + self.strides[axis + 1:], self.offset, mask)

    def expand(self, axis: int, size: IntLike) -> "View":
        """Broadcast a size-1 axis to ``size``."""
        shape = list(self.shape)
        strides = list(self.strides)
        shape[axis] = _norm(size)
        strides[axis] = 0
        mask = None
        if self.mask is not None:
            mask = list(self.mask)
            lo, hi = mask[axis]
            mask[axis] = (0, _norm(size)) if same(lo, 0) and not same(hi, 0) else (0, 0)
            mask = tuple(mask)
        return View(tuple(shape), tuple(strides), self.offset, mask)

    def slice(self, axis: int, start: IntLike, stop: IntLike, step: int = 1) -> "View":
        """Elements start, start+step, ... < stop along an axis (step > 0; bounds already clamped)."""
        if step <= 0:
            raise ValueError("View.slice takes a positive step; flip first for negative steps")
        n = _norm(ceildiv(as_expr(stop) - start, step)) if step != 1 else _norm(as_expr(stop) - start)
        if isinstance(n, int) and n < 0:
            n = 0
        shape = list(self.shape)
        strides = list(self.strides)
        offset = _add(self.offset, _mul(start, self.strides[axis]))
        shape[axis] = n
        strides[axis] = _mul(self.strides[axis], step)
        mask = None
        if self.mask is not None:
            lo, hi = self.mask[axis]
            if step != 1 and not (same(lo, 0) and same(hi, self.shape[axis])):
                return None  # a stepped slice through padding: materialise first
            mask = list(self.mask)
            nlo = _norm(maximum(minimum(as_expr(lo) - start, n), 0))
            nhi = _norm(maximum(minimum(as_expr(hi) - start, n), 0))
            mask[axis] = (nlo, nhi) if step == 1 else (0, n)
            mask = tuple(mask)
        return View(tuple(shape), tuple(strides), offset, mask)

    def flip(self, axis: int) -> "View":
        n = self.shape[axis]
        strides = list(self.strides)
        offset = _add(self.offset, _mul(_add(n, -1), strides[axis]))
        strides[axis] = _mul(strides[axis], -1)
        mask = None
        if self.mask is not None:
            mask = list(self.mask)
            lo, hi = mask[axis]
            mask[axis] = (_add(n, _mul(hi, -1)), _add(n, _mul(lo, -1)))
            mask = tuple(mask)
        return View(self.shape, tuple(strides), offset, mask)

    def pad(self, axis: int, before: IntLike, after: IntLike) -> "View":
        """Zero padding (non-negative amounts) along an axis."""
        n = self.shape[axis]
        shape = list(self.shape)
        shape[axis] = _add(_add(n, before), after)
        offset = _add(self.offset, _mul(_mul(before, -1), self.strides[axis]))
        if self.mask is None:
            mask = [(0, d) for d in self.shape]
        else:
            mask = list(self.mask)
        lo, hi = mask[axis]
        mask[axis] = (_add(lo, before), _add(hi, before))
        mask = [(0, shape[i]) if i != axis and self.mask is None else m for i, m in enumerate(mask)]
        return View(tuple(shape), self.strides, offset, tuple(mask))

    def unfold(self, axis: int, window: IntLike, step: int = 1, dilation: int = 1) -> Optional["View"]:
        """Sliding windows: axis of size n becomes (windows, window) with the window axis last
        of the two. Returns None through padding (materialise first)."""
        if self.mask is not None and not (same(self.mask[axis][0], 0)
                                          and same(self.mask[axis][1], self.shape[axis])):
            return None
        n, st = self.shape[axis], self.strides[axis]
        span = _add(_mul(_add(window, -1), dilation), 1)
        count = _norm(as_expr(n) - span) if step == 1 else _norm((as_expr(n) - span) // step)
        count = _add(count, 1)
        shape = self.shape[:axis] + (count, _norm(window)) + self.shape[axis + 1:]
        strides = self.strides[:axis] + (_mul(st, step), _mul(st, dilation)) + self.strides[axis + 1:]
        mask = None
        if self.mask is not None:
            mask = self.mask[:axis] + ((0, count), (0, _norm(window))) + self.mask[axis + 1:]
        return View(shape, strides, self.offset, mask)

    def reshape(self, new_shape: Sequence[IntLike]) -> Optional["View"]:
        """The same elements in row-major order under a new shape, or None when strides
        cannot express it (the caller then materialises a contiguous copy)."""
        new_shape = tuple(_norm(d) for d in new_shape)
        if len(new_shape) == len(self.shape) and all(same(a, b) for a, b in zip(new_shape, self.shape)):
            return self
        if self.mask is not None:
            return self._reshape_unit_axes(new_shape)
        if self.is_contiguous:
            return View(new_shape, contiguous_strides(new_shape), self.offset, None)
        # Drop size-1 axes, then group old axes into runs that are contiguous with each other.
        old = [(d, s) for d, s in zip(self.shape, self.strides) if not same(d, 1)]
        new_strides = []
        oi = 0
        for d in new_shape:
            if same(d, 1):
                new_strides.append(0)
                continue
            if oi >= len(old):
                return None
            # merge old axes while their product divides into d
            od, os_ = old[oi]
            if same(od, d):
                new_strides.append(os_)
                oi += 1
                continue
            # split: d divides the current old axis
            if isinstance(od, int) and isinstance(d, int) and d < od and od % d == 0:
                old[oi] = (od // d, os_)
                new_strides.append(_mul(os_, od // d))
                continue
            # merge consecutive old axes: acc product must equal d exactly
            acc, stride = od, os_
            j = oi + 1
            ok = False
            while j < len(old):
                nd, ns = old[j]
                if not same(stride, _mul(ns, nd)):
                    return None
                acc, stride = _mul(acc, nd), ns
                j += 1
                if same(acc, d):
                    ok = True
                    break
            if not ok:
                return self._reshape_symbolic_split(new_shape)
            new_strides.append(stride)
            oi = j
        if oi != len(old):
            return None
        return View(new_shape, tuple(new_strides), self.offset, None)

    def _reshape_symbolic_split(self, new_shape) -> Optional["View"]:
        return None

    def _reshape_unit_axes(self, new_shape) -> Optional["View"]:
        """Reshapes of a padded view that only add or remove size-1 axes."""
        old_real = [i for i, d in enumerate(self.shape) if not same(d, 1)]
        new_real = [i for i, d in enumerate(new_shape) if not same(d, 1)]
        if len(old_real) != len(new_real) or not all(
                same(self.shape[a], new_shape[b]) for a, b in zip(old_real, new_real)):
            return None
        v = self
        for ax in reversed(range(len(self.shape))):
            if same(self.shape[ax], 1):
                v = v.remove_axis(ax)
        for ax, d in enumerate(new_shape):
            if same(d, 1):
                v = v.insert_axis(ax, 1)
        return v

    # ---- concrete values ----------------------------------------------------------------------
    def is_static(self) -> bool:
        vals = list(self.shape) + list(self.strides) + [self.offset]
        if self.mask is not None:
            vals += [x for m in self.mask for x in m]
        return all(isinstance(v, int) for v in vals)

    def evaluate(self, dims) -> "View":
        """The same view with every symbolic integer evaluated against ``dims``."""
        if self.is_static():
            return self

        def ev(x):
            return x if isinstance(x, int) else x.evaluate(dims)

        mask = None if self.mask is None else tuple((ev(lo), ev(hi)) for lo, hi in self.mask)
        return View(tuple(ev(d) for d in self.shape), tuple(ev(s) for s in self.strides),
                    ev(self.offset), mask)

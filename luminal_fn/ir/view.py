"""Views (shape trackers): how an op reads the contiguous buffer its producer wrote.

A view is ``shape``, ``strides`` and ``offset`` (all symbolic integers) plus an optional ``mask``
of per-dim valid intervals ``[lo, hi)``; reads outside the mask give zero (that is how padding is
expressed). Movement ops (permute, broadcast, slice, flip, pad, reshape, unfold) only edit views.
A movement that strides cannot express returns ``None`` and the caller materialises first.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Sequence

from .expr import (Expr, IntLike, as_expr, ceildiv, compare, floordiv, maximum, minimum, mod, py_function,
                   py_source, py_tuple_source, render, same, to_int_or_expr)


def _norm(x: IntLike) -> IntLike:
    return to_int_or_expr(x)


def _mul(a: IntLike, b: IntLike) -> IntLike:
    return _norm(as_expr(a) * b) if isinstance(a, Expr) or isinstance(b, Expr) else a * b


def _add(a: IntLike, b: IntLike) -> IntLike:
    return _norm(as_expr(a) + b) if isinstance(a, Expr) or isinstance(b, Expr) else a + b


def contiguous_strides(shape: Sequence[IntLike]) -> tuple:
    return _contiguous_strides(tuple(shape))  # (dims are ints and interned Exprs: hashable)


@functools.lru_cache(maxsize=4096)
def _contiguous_strides(shape: tuple) -> tuple:
    """(Kept: extraction and planning ask for the same shapes' strides thousands of times, each
    a product of symbolic dims.)"""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc = _mul(acc, d)
    return tuple(reversed(strides))


def _full(m, d) -> bool:
    """A mask interval that provably covers the whole axis."""
    lo, hi = as_expr(m[0]), as_expr(m[1])
    if lo.is_const and lo.value <= 0:
        if same(hi, d):
            return True
        if isinstance(d, int) and hi.is_const and hi.value >= d:
            return True
    return False


def _index0_valid(m) -> IntLike:
    """1 when index 0 lies inside the mask interval m, else 0 (an expression if symbolic)."""
    lo, hi = m
    return _norm(compare("le", lo, 0) * compare("lt", 0, hi))


def _slice_bound(b: IntLike, start: IntLike, step: int, n: IntLike) -> IntLike:
    """The first new index i with start + i*step >= b, clamped to [0, n]."""
    num = maximum(as_expr(b) - start, 0)
    return _norm(minimum(ceildiv(num, step) if step != 1 else num, n))


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

    def reads_whole(self, producer_shape) -> bool:
        """Whether this view reads its producer as it lies: every element once, in order, at the
        producer's own shape (a plain edge: nothing to encode, copy or index)."""
        return (self.is_contiguous and len(self.shape) == len(producer_shape)
                and all(a == b for a, b in zip(self.shape, producer_shape)))

    def numel(self) -> IntLike:
        n: IntLike = 1
        for d in self.shape:
            n = _mul(n, d)
        return n

    def flat_index(self, z: IntLike) -> Expr:
        """The buffer index this view reads at its own flat (row-major) index ``z``, ignoring
        the mask: offset + sum over dims of coordinate * stride."""
        idx: IntLike = self.offset
        inner: IntLike = 1
        for k in range(self.ndim - 1, -1, -1):
            d, st = self.shape[k], self.strides[k]
            if not (same(d, 1) or same(st, 0)):
                c = floordiv(z, inner) if k == 0 else mod(floordiv(z, inner), d)
                idx = _add(idx, _mul(c, st))
            inner = _mul(inner, d)
        return as_expr(idx)

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

    def remove_axis(self, axis: int) -> Optional["View"]:
        """Drop a size-1 axis (reading its index 0). None when the result is 0-d and that index
        may be padding (a 0-d view has no mask to say so; the caller materialises first)."""
        mask = None
        if self.mask is not None:
            mask = self.mask[:axis] + self.mask[axis + 1:]
            valid = _index0_valid(self.mask[axis])
            if not same(valid, 1):
                if not mask:
                    return None
                # index 0 of that axis may be padding: then the whole view reads zero
                shape = self.shape[:axis] + self.shape[axis + 1:]
                lo, hi = mask[0]
                mask = ((lo, _norm(minimum(hi, as_expr(shape[0]) * valid))),) + mask[1:]
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
            # every index reads old index 0: all valid or all padding
            mask[axis] = (0, _norm(as_expr(size) * _index0_valid(self.mask[axis])))
            mask = tuple(mask)
        return View(tuple(shape), tuple(strides), self.offset, mask)

    def slice(self, axis: int, start: IntLike, stop: IntLike, step: int = 1) -> "View":
        """Elements start, start+step, ... < stop along an axis (step > 0; bounds already clamped
        to [0, n] with start <= stop)."""
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
            mask = list(self.mask)
            # new index i reads old start + i*step: valid iff lo <= start + i*step < hi
            mask[axis] = (_slice_bound(lo, start, step, n), _slice_bound(hi, start, step, n))
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
        mask = list(self.mask) if self.mask is not None else [(0, d) for d in self.shape]
        lo, hi = mask[axis]
        mask[axis] = (_add(lo, before), _add(hi, before))
        return View(tuple(shape), self.strides, offset, tuple(mask))

    def axis_full(self, axis: int) -> bool:
        """Whether the mask, if any, keeps every element of one axis."""
        return self.mask is None or _full(self.mask[axis], self.shape[axis])

    def drop_full_mask(self) -> "View":
        """This view without its mask when the mask keeps every element (else itself)."""
        if self.mask is not None and all(self.axis_full(a) for a in range(len(self.shape))):
            return View(self.shape, self.strides, self.offset, None)
        return self

    def unfold(self, axis: int, window: IntLike, step: int = 1, dilation: int = 1) -> Optional["View"]:
        """Sliding windows: axis of size n becomes (windows, window) with the window axis last
        of the two. None through padding on that axis (validity would depend on the sum of two
        indices, which per-dim intervals cannot say; materialise first)."""
        if not self.axis_full(axis):
            return None
        n, st = self.shape[axis], self.strides[axis]
        span = _add(_mul(_add(window, -1), dilation), 1)
        count = _norm(as_expr(n) - span) if step == 1 else _norm((as_expr(n) - span) // step)
        count = _add(count, 1)
        if isinstance(count, int) and count < 0:
            count = 0
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
        if any(isinstance(d, int) and d == 0 for d in self.shape):
            return View.contiguous(new_shape)  # nothing is read
        if self._reads_nothing():
            if not new_shape:
                return None
            return View(new_shape, (0,) * len(new_shape), 0, tuple((0, 0) for _ in new_shape))
        groups = self._contiguous_groups()
        if groups is None:
            return None
        strides: list = [0] * len(new_shape)
        mask: list = [None] * len(new_shape)
        real = [i for i, d in enumerate(new_shape) if not same(d, 1)]
        k = 0
        for size, stride, gmask in groups:
            # the next new dims whose product is exactly this group's size
            members, acc = [], 1
            while not same(acc, size):
                if k >= len(real):
                    return None
                acc = _mul(acc, new_shape[real[k]])
                members.append(real[k])
                k += 1
                if isinstance(acc, int) and isinstance(size, int) and acc > size:
                    return None
            inner = stride
            for i in reversed(members):
                strides[i] = inner
                inner = _mul(inner, new_shape[i])
            if gmask is not None:
                lo, hi = gmask
                rest = _norm(as_expr(size) // new_shape[members[0]]) if len(members) > 1 else 1
                if not same(rest, 1):
                    if not all(isinstance(x, int) for x in (lo, hi, rest)) or lo % rest or hi % rest:
                        return None  # the padding boundary falls inside an inner new dim
                    lo, hi = lo // rest, hi // rest
                mask[members[0]] = (lo, hi)
        if k != len(real):
            return None
        out_mask = None
        if any(m is not None for m in mask):
            out_mask = tuple(m if m is not None else (0, d) for m, d in zip(mask, new_shape))
        return View(new_shape, tuple(strides), self.offset, out_mask)

    def _reads_nothing(self) -> bool:
        """True when a mask interval is provably empty (the view is all padding)."""
        if self.mask is None:
            return False
        for lo, hi in self.mask:
            e = as_expr(hi) - lo
            if e.is_const and e.value <= 0:
                return True
        return False

    def _contiguous_groups(self) -> Optional[list]:
        """Runs of axes that address one evenly strided range: (size, stride, mask or None).
        Size-1 axes are dropped; a masked axis may only be the outermost of its run."""
        groups: list = []
        for i, (d, s) in enumerate(zip(self.shape, self.strides)):
            m = self.mask[i] if self.mask is not None else None
            full = m is None or _full(m, d)
            if same(d, 1):
                if not full:
                    return None  # may be padding, and a dropped axis cannot say so
                continue
            if groups and full and same(groups[-1][1], _mul(s, d)):
                g = groups[-1]
                gm = None if g[2] is None else (_mul(g[2][0], d), _mul(g[2][1], d))
                groups[-1] = (_mul(g[0], d), s, gm)
            else:
                groups.append((d, s, None if full else (_norm(m[0]), _norm(m[1]))))
        return groups

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

    @staticmethod
    def mask_bounds(shape: tuple, mask) -> tuple:
        """(lo, hi) per axis of a concrete masked view: the unpadded index range of each axis,
        clipped to the axis (reads outside it are zeros)."""
        lo = [max(0, min(a, d)) for (a, _), d in zip(mask, shape)]
        hi = [max(lo_, min(b, d)) for lo_, (_, b), d in zip(lo, mask, shape)]
        return lo, hi

    @staticmethod
    def axis_part(shape: tuple, strides: tuple, offset: int, mask, axis: int, start: int, stop: int) -> tuple:
        """The parts (shape, strides, offset, mask) of a concrete view restricted to
        [start, stop) along ``axis``: the same reads, zeros where the view pads."""
        part = tuple(stop - start if i == axis else n for i, n in enumerate(shape))
        if mask is not None:
            mask = tuple((lo - start, hi - start) if i == axis else (lo, hi)
                         for i, (lo, hi) in enumerate(zip(*View.mask_bounds(shape, mask))))
        return part, strides, offset + start * strides[axis], mask

    def parts_function(self):
        """A function dims -> (shape, strides, offset, mask) of this view with every symbolic
        integer evaluated: one generated expression, built once (backends read a symbolic view
        each call; ``evaluate`` walks and rebuilds the view every time)."""
        mask = "None" if self.mask is None else (
            "(" + "".join(f"{py_tuple_source(m)}, " for m in self.mask) + ")")
        return py_function(f"({py_tuple_source(self.shape)}, {py_tuple_source(self.strides)}, "
                           f"{py_source(self.offset)}, {mask})")

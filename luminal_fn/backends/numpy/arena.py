"""Buffers a NumPy plan keeps from call to call instead of allocating them on every call.

Allocating a fresh array for every intermediate costs more than the arithmetic on it at the sizes
of a model layer: a 1 MB array is 256 pages the kernel maps and zeroes on first touch when the C
allocator has handed the memory back since the last call (measured on the 2-core CI machine: three
1 MB temporaries alive at once took 1.3 ms a call against 0.13 ms written in place). XLA assigns
buffers once at compile time; this is the same idea for the NumPy plan.

A step that can write into memory it is given says so with two attributes: ``requests``, one
``Request`` per buffer it wants (the value it leaves there, or None for scratch used only while
the step runs), and ``into(vals, dims, bufs)``, the step writing into those buffers. ``layout``
gives each request a slot in a few shared byte buffers by the lifetimes of the values (a greedy
interval assignment, largest reuse first), and an ``ArenaPool`` hands each call its own set of
those buffers, so threads calling one plan at once never share memory.

Lifetimes are conservative: a step that allocates for itself may return a view of its input
(a fused kernel whose tree is one of its inputs), so the value it returns keeps alive every arena
value it may view; a value a plan output may view is never put in the arena.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class Request:
    shape: tuple
    dtype: np.dtype
    value: int | None = None  # the value id the buffer holds after the step; None: scratch

    @property
    def nbytes(self) -> int:
        return max(1, math.prod(self.shape)) * np.dtype(self.dtype).itemsize


_FOREVER = math.inf


def lifetimes(steps, outputs) -> dict:
    """``value id -> index of the last step that needs it``. ``steps``: per step, ``(value ids
    it produces, value ids it reads, writes_into)``. A value read by a step that allocates its own
    result lives as long as that result (it may be a view); a plan output and everything it may
    view lives forever."""
    last: dict = {}
    views: dict = {}  # value -> the values it may be a view of
    for k, (produced, reads, writes_into) in enumerate(steps):
        for v in reads:
            last[v] = k
        seen = set()
        if not writes_into:
            for v in reads:
                seen.add(v)
                seen |= views.get(v, set())
        for v in produced:
            views[v] = seen
            last.setdefault(v, k)
    end = dict(last)
    for v in outputs:
        end[v] = _FOREVER
    for w, seen in views.items():
        for v in seen:
            end[v] = max(end.get(v, -1), end.get(w, -1))
    return end


class Layout:
    """Slots of the plan's buffers: ``per_step[k]`` is None for a step that allocates, else a tuple
    of ``(buffer index, request)`` in its request order; ``sizes`` are the buffers' byte sizes."""

    def __init__(self, requests, end: dict):
        self.sizes: list[int] = []
        free_at: list[float] = []  # buffer -> the last step index its current value needs it
        self.per_step: list = []
        for k, reqs in enumerate(requests):
            ends = None if reqs is None else [k if r.value is None else end.get(r.value, k) for r in reqs]
            if reqs is None or any(e == _FOREVER for e in ends):
                self.per_step.append(None)
                continue
            taken, slots = set(), []
            for r, e in zip(reqs, ends):
                b = self._pick(r.nbytes, k, free_at, taken)
                taken.add(b)
                free_at[b] = e
                slots.append((b, r))
            self.per_step.append(tuple(slots))

    def _pick(self, nbytes, k, free_at, taken) -> int:
        """The free buffer closest in size (grown if all free ones are smaller), or a new one."""
        free = [b for b, t in enumerate(free_at) if t < k and b not in taken]
        fits = [b for b in free if self.sizes[b] >= nbytes]
        if fits:
            return min(fits, key=lambda b: self.sizes[b])
        if free:
            b = max(free, key=lambda b: self.sizes[b])
            self.sizes[b] = nbytes
            return b
        self.sizes.append(nbytes)
        free_at.append(-1)
        return len(self.sizes) - 1

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    def new_arena(self) -> list:
        """Per step, the tuple of arrays its ``into`` writes (None where the step allocates)."""
        buffers = [np.empty(n, np.uint8) for n in self.sizes]
        return [None if slots is None else tuple(
            buffers[b][:r.nbytes].view(r.dtype).reshape(r.shape) for b, r in slots)
            for slots in self.per_step]


class ArenaPool:
    """Arenas for concurrent calls: each call takes one (a new one when all are in use) and gives
    it back; list pop and append are atomic under the GIL."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self._idle: list = []

    def take(self) -> list:
        try:
            return self._idle.pop()
        except IndexError:
            return self.layout.new_arena()

    def give(self, arena: list) -> None:
        self._idle.append(arena)


__all__ = ["ArenaPool", "Layout", "Request", "lifetimes"]

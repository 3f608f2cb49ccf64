"""Peak-memory estimate of a candidate from its buffers' lifetimes, checked before it runs.

A bad candidate (say, a matmul lowered as broadcast multiply + sum) can materialise a huge
intermediate. The search asks for this estimate at the bucket's largest dims and rejects the
candidate with `CandidateRejected` instead of letting it exhaust the device.
"""
from __future__ import annotations

from typing import Iterable

from ..frontend.errors import LuminalError


class CandidateRejected(LuminalError):
    """Raised by a search's evaluate function for a candidate that must not win: over the memory
    budget, NaN/Inf outputs, ... The search drops it and records `reason`."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def estimate_peak_bytes(buffers: Iterable[tuple[int, int, int]]) -> int:
    """The most bytes live at once, given each buffer as ``(size_bytes, first_use_step,
    last_use_step)`` with both steps inclusive. Buffers whose lifetimes only touch (one ends at
    step k, the next starts at k + 1) do not overlap."""
    events = []
    for i, buf in enumerate(buffers):
        try:
            size, first, last = buf
        except (TypeError, ValueError):
            raise ValueError(
                f"estimate_peak_bytes: buffer {i} must be (size_bytes, first_use_step, "
                f"last_use_step), got {buf!r}") from None
        if size < 0 or first > last:
            raise ValueError(
                f"estimate_peak_bytes: buffer {i} = {buf!r} needs size_bytes >= 0 and "
                f"first_use_step <= last_use_step")
        if size:
            events.append((first, 1, size))
            events.append((last + 1, 0, -size))  # frees sort before allocations of that step
    peak = live = 0
    for _, _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return int(peak)


def check_memory_budget(peak_bytes: int, max_memory: int | None, what: str = "candidate",
                        budget: str = "max_memory budget") -> None:
    """Raise `CandidateRejected` when ``peak_bytes`` exceeds ``max_memory`` (None: no budget);
    ``budget`` names where the limit came from."""
    if max_memory is not None and peak_bytes > max_memory:
        raise CandidateRejected(
            f"{what} needs about {format_bytes(peak_bytes)} at its largest dims, over the "
            f"{budget} of {format_bytes(max_memory)}")

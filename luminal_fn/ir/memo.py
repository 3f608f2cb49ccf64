"""A bounded memo for results that a search computes candidate after candidate.

Each of a search's candidates is planned from mostly the same kernels, so the planner keeps
pieces of work (rendered kernels, wrapped texts, joined trees) by what they depend on. The memos
forget the least recently used entry past their size, so a long-lived process stays bounded."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable


_MISSING = object()


class Memo:
    """``memo.get(key, make)``: ``make()``'s result, made once per key while the key is among the
    last ``size`` used. A key that names an object by ``id`` must keep that object alive in the
    value (an id is reused once its object is gone). Safe to share between threads (two jitted
    functions planned at once): ``make`` runs outside the lock, so two threads may both make a
    missing key's value, and the later one is kept."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"Memo: size must be at least 1, got {size}")
        self.size = size
        self._kept: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable):
        kept = self._kept
        with self._lock:
            value = kept.get(key, _MISSING)
            if value is not _MISSING:
                kept.move_to_end(key)
                return value
        value = make()
        with self._lock:
            kept[key] = value
            kept.move_to_end(key)
            if len(kept) > self.size:
                kept.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._kept)

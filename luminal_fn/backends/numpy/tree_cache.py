"""Caches of work done on kernel trees, keyed by the tree's value: a search builds a plan for each
of its candidates, and most of their kernels' trees are the same (a gcd's 48 Euclid steps: 99% of
the tree programs compiled were compiled before). Trees are nested tuples, but equal tuples are
not always the same tree: 0.0 == -0.0 (and 1 == 1.0), so the key tells literals apart by their
repr, type and sign bit (repr writes every NaN alike)."""
from __future__ import annotations

import functools
import math


def value_key(tree):
    """A hashable key equal for equal trees: a flat table of the tree's distinct nodes (children
    as row numbers), each literal with its type and sign bit. Flat, because a tree shares
    subtrees (x * x, a value read at every level), and hashing or comparing the nested tuples
    walks them as trees: exponential in the depth of such sharing."""
    rows: list = []
    index: dict = {}  # id(subtree) -> its row

    def row(t):
        if not isinstance(t, tuple):
            return t
        k = index.get(id(t))
        if k is None:
            if t and t[0] == "const":
                v = t[1]
                entry = ("const", repr(v), type(v).__name__,
                         math.copysign(1.0, v) if isinstance(v, float) else 0, t[2:])
            else:
                entry = tuple(("#", row(c)) if isinstance(c, tuple) else c for c in t)
            rows.append(entry)
            k = index[id(t)] = len(rows) - 1
        return k

    row(tree)
    return tuple(rows)


def cached_on_trees(maxsize: int):
    """Decorator: ``fn(*args)`` cached on the value keys of its arguments (trees, or tuples of
    them, and plain hashable values)."""
    def wrap(fn):
        @functools.lru_cache(maxsize=maxsize)
        def cached(key, box):
            return fn(*box.args)

        @functools.wraps(fn)
        def call(*args):
            return cached(value_key(args), _Args(args))

        call.cache_info = cached.cache_info
        call.cache_clear = cached.cache_clear
        return call

    return wrap


class _Args:
    """Carries the arguments themselves to the function past the cache's key (these all compare
    equal, so the key alone decides a hit)."""

    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args

    def __eq__(self, other):
        return isinstance(other, _Args)

    def __hash__(self):
        return 0


__all__ = ["cached_on_trees", "value_key"]

"""Dim buckets: ranges of a dynamic dimension's values that share one searched implementation.

``buckets={"s": [(1, 1), (2, 2048, 16)]}`` gives the dim ``s`` two buckets: exactly 1 (decode)
and 2..2048 searched at s = 16. Each combination of buckets over all dims is searched once, at
its representative values; at run time `BucketSet.select` maps a call's dims to the combination
that holds them (a bisect per dim: this is on the dispatch path). A dim without a spec gets one
unbounded bucket whose representative is the value of the call that compiles it.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..frontend.errors import LuminalError

UNBOUNDED_MAX = 2**31 - 1


class BucketError(LuminalError, ValueError):
    """A malformed bucket spec, or a call whose dim value lies outside every bucket."""


@dataclass(frozen=True)
class DimBucket:
    """Values ``lo..hi`` (inclusive) of one dim; `representative` None means "the call's value"."""

    dim: str
    lo: int
    hi: int
    representative: int | None
    unbounded: bool = False

    def contains(self, value: int) -> bool:
        return self.lo <= value <= self.hi

    def describe(self) -> str:
        if self.unbounded:
            return f"{self.dim}=any"
        rng = f"{self.lo}" if self.lo == self.hi else f"{self.lo}..{self.hi}"
        return f"{self.dim}={rng}@{self.representative}"


@dataclass(frozen=True)
class Bucket:
    """One combination: a DimBucket per dim, numbered `index` as `BucketSet.select` returns."""

    index: int
    parts: tuple  # DimBucket per symbol, in BucketSet.symbols order

    @property
    def needs_call_dims(self) -> bool:
        return any(p.representative is None for p in self.parts)

    def _fill(self, which: str, call_dims: Mapping | None) -> dict:
        out = {}
        for p in self.parts:
            v = p.hi if which == "max" and not p.unbounded else p.representative
            if v is None:
                if call_dims is None or p.dim not in call_dims:
                    raise BucketError(
                        f"dim '{p.dim}' has no bucket, so its {which} value is the compiling "
                        f"call's value: pass call_dims, or give jit(..., buckets={{'{p.dim}': "
                        f"[(min, max, representative)]}})")
                v = int(call_dims[p.dim])
            out[p.dim] = v
        return out

    def representative(self, call_dims: Mapping | None = None) -> dict:
        """Dims to search this combination at; dims without a spec take `call_dims`' value."""
        return self._fill("representative", call_dims)

    def max_dims(self, call_dims: Mapping | None = None) -> dict:
        """The largest dims of this combination (for arena sizes and memory budgets); an
        unbounded dim takes `call_dims`' value."""
        return self._fill("max", call_dims)

    def contains(self, dims: Mapping) -> bool:
        return all(p.contains(dims[p.dim]) for p in self.parts)

    def describe(self, call_dims: Mapping | None = None) -> str:
        """A stable text for cache keys and messages (unbounded dims show the value searched)."""
        items = []
        for p in self.parts:
            d = p.describe()
            if p.unbounded and call_dims is not None and p.dim in call_dims:
                d += f"@{int(call_dims[p.dim])}"
            items.append(d)
        return ",".join(items) if items else "static"


def _parse_one(dim: str, item) -> DimBucket:
    where = f"buckets['{dim}']"
    if isinstance(item, bool):
        raise BucketError(f"{where}: a bucket must be (min, max) or (min, max, representative), "
                          f"got {item!r}")
    if isinstance(item, int):
        item = (item, item)
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise BucketError(f"{where}: a bucket must be (min, max) or (min, max, representative), "
                          f"got {item!r}")
    for v in item:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise BucketError(f"{where}: bucket {tuple(item)!r} must hold ints, got {v!r}")
    lo, hi = int(item[0]), int(item[1])
    if lo < 0:
        raise BucketError(f"{where}: bucket {tuple(item)!r} has a negative min")
    if lo > hi:
        raise BucketError(f"{where}: bucket {tuple(item)!r} has min {lo} > max {hi}")
    rep = int(item[2]) if len(item) == 3 else (lo + hi) // 2
    if not lo <= rep <= hi:
        raise BucketError(f"{where}: bucket {tuple(item)!r}: representative {rep} is outside "
                          f"[{lo}, {hi}]")
    return DimBucket(dim, lo, hi, rep)


def parse_dim_buckets(dim: str, items) -> list:
    """Validated, sorted DimBuckets of one dim's spec."""
    if isinstance(items, (tuple, list)) and len(items) in (2, 3) and \
            all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise BucketError(
            f"buckets['{dim}'] = {items!r} is one bucket, not a list of them: write "
            f"buckets={{'{dim}': [{tuple(items)!r}]}} (exact values: one (v, v) tuple each)")
    if not isinstance(items, (tuple, list)) or not items:
        raise BucketError(f"buckets['{dim}'] must be a non-empty list of (min, max[, "
                          f"representative]) tuples, got {items!r}")
    parsed = sorted((_parse_one(dim, it) for it in items), key=lambda b: b.lo)
    for a, b in zip(parsed, parsed[1:]):
        if b.lo <= a.hi:
            raise BucketError(f"buckets['{dim}']: buckets [{a.lo}, {a.hi}] and [{b.lo}, {b.hi}] "
                              f"overlap; each value must belong to one bucket")
    return parsed


class BucketSet:
    """All dims' buckets; combination `i` of `combinations()` is what `select` returns."""

    def __init__(self, spec: Mapping | None, symbols: Sequence[str]):
        spec = {} if spec is None else spec
        if not isinstance(spec, Mapping):
            raise BucketError(f"buckets must be a dict of dim name -> list of (min, max[, "
                              f"representative]), got {type(spec).__name__} {spec!r}")
        self.symbols = tuple(symbols)
        unknown = [k for k in spec if k not in self.symbols]
        if unknown:
            known = ", ".join(repr(s) for s in self.symbols) or "none (no dynamic_axes)"
            raise BucketError(f"buckets: {', '.join(repr(k) for k in unknown)} "
                              f"{'is not a' if len(unknown) == 1 else 'are not'} dynamic dim"
                              f"{'' if len(unknown) == 1 else 's'} of this function; its dims "
                              f"are {known}")
        self.per_dim: dict = {}
        for s in self.symbols:
            if s in spec:
                self.per_dim[s] = parse_dim_buckets(s, spec[s])
            else:
                self.per_dim[s] = [DimBucket(s, 0, UNBOUNDED_MAX, None, unbounded=True)]
        # Mixed-radix strides (the first symbol varies slowest, like itertools.product).
        stride, strides = 1, {}
        for s in reversed(self.symbols):
            strides[s] = stride
            stride *= len(self.per_dim[s])
        self._n = stride
        self._lookup = [(s, [b.lo for b in self.per_dim[s]], [b.hi for b in self.per_dim[s]],
                         strides[s]) for s in self.symbols]
        self._combos = [Bucket(i, tuple(parts)) for i, parts in
                        enumerate(itertools.product(*(self.per_dim[s] for s in self.symbols)))]

    def __len__(self) -> int:
        return self._n

    def combinations(self) -> list:
        return list(self._combos)

    def __getitem__(self, index: int) -> Bucket:
        return self._combos[index]

    def select(self, dims: Mapping) -> int:
        """The index of the combination holding `dims` (a dim name -> int map)."""
        index = 0
        for name, los, his, stride in self._lookup:
            try:
                v = dims[name]
            except KeyError:
                raise BucketError(f"dispatch: no value for dynamic dim '{name}' (got dims "
                                  f"{dict(dims)!r})") from None
            j = bisect.bisect_right(los, v) - 1
            if j < 0 or v > his[j]:
                raise BucketError(self._outside_message(name, v))
            index += j * stride
        return index

    def _outside_message(self, name: str, value) -> str:
        ranges = ", ".join(f"[{b.lo}, {b.hi}]" for b in self.per_dim[name])
        return (f"dim '{name}' = {value} is outside every bucket ({ranges}); add a bucket that "
                f"holds it to jit(..., buckets={{'{name}': [...]}})")

    def describe(self) -> str:
        return ";".join(",".join(b.describe() for b in self.per_dim[s]) for s in self.symbols)

    def __repr__(self) -> str:
        return f"BucketSet({self.describe() or 'static'})"

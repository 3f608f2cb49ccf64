"""Search options: how many candidates the genetic search times and how it breeds them.

The defaults are the seed's (Luminal's `SearchOptions::new`): generations of 10 offspring, up to
10 mutations each, 3 timing trials per candidate, 1 parent kept, a 1 s profiling timeout.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import asdict, dataclass, fields, replace

from ..frontend.errors import LuminalError


class SearchOptionsError(LuminalError, ValueError):
    """A search option with a wrong type or value."""


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_bytes(value, what: str = "max_memory") -> int:
    """An int of bytes, or a string such as "512MiB" / "8 GB" / "1.5e9"."""
    if isinstance(value, bool):
        raise SearchOptionsError(f"SearchOptions: {what} must be a number of bytes, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if not m or m.group(2).lower() not in _UNITS:
            raise SearchOptionsError(
                f"SearchOptions: cannot read {what}={value!r}; give bytes as an int or a string "
                f"like '512MiB', '8GB' (units: {', '.join(u for u in _UNITS if u)})")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    else:
        raise SearchOptionsError(
            f"SearchOptions: {what} must be an int of bytes or a string like '8GB', got "
            f"{type(value).__name__} {value!r}")
    if n <= 0:
        raise SearchOptionsError(f"SearchOptions: {what} must be positive, got {value!r}")
    return n


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SearchOptionsError(
            f"SearchOptions: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise SearchOptionsError(f"SearchOptions: {name} must be >= {minimum}, got {value}")


def _check_seconds(name: str, value) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SearchOptionsError(
            f"SearchOptions: {name} must be a number of seconds or None, got "
            f"{type(value).__name__} {value!r}")
    if not value > 0 or value != value or value == float("inf"):
        raise SearchOptionsError(
            f"SearchOptions: {name} must be a positive, finite number of seconds (or None for "
            f"no limit), got {value!r}")


LIMIT_ENV = "LUMINAL_SEARCH_LIMIT"


def default_limit() -> int:
    """The candidate limit when none is given: $LUMINAL_SEARCH_LIMIT (CI, quick iteration), else
    the seed's 100."""
    text = os.environ.get(LIMIT_ENV)
    if not text:
        return 100
    try:
        value = int(text)
    except ValueError:
        raise SearchOptionsError(f"${LIMIT_ENV}={text!r} is not an int of candidates") from None
    if value < 1:
        raise SearchOptionsError(f"${LIMIT_ENV} must be >= 1, got {value}")
    return value


@dataclass(frozen=True)
class SearchOptions:
    """Options of the genetic search over implementations (``lf.jit(..., search=...)``).

    limit: the most candidates timed per bucket, failures included (default 100, or
        $LUMINAL_SEARCH_LIMIT when set).
    generation_size: offspring bred per generation.
    mutations: each offspring flips between 1 and ``mutations`` genes of its parent.
    trials: timing runs per candidate (the backend reports their aggregate); one for a candidate
        whose first runs are over 4x the fastest so far.
    keep_best: how many of the fastest candidates are parents of the next generation.
    profile_timeout: seconds one candidate may take; slower ones are dropped (None: no limit).
    group_timeout: wall-clock seconds for the whole search of one bucket (None: no limit).
    patience: stop a bucket's search once this many candidates in a row brought no gain over
        the fastest so far (failures count too; None: always time ``limit`` candidates). A
        gain is a time more than ``min_gain`` (a fraction) below the fastest: smaller ones are
        within the timing noise. Llama-1B's four buckets on an H100 (run FA, 2026-12-07): three
        found their fastest (within 1%) among the first four candidates; with patience 30 the
        search times 41% of the candidates and loses at most 0.08%.
    min_gain: see ``patience``.
    seed: makes the search repeatable.
    max_memory: bytes a candidate may use at its bucket's largest dims (int or "8GB"; None:
        the backend's default, which for NumPy and MLX is 60% of the host memory available when the
        search starts, and none on GPUs, whose running out is an error the search drops the
        candidate for); candidates estimated above it are rejected before they run.
    progress: show a progress bar; None shows it only when stderr is a terminal.
    cache: read and write the on-disk search cache.
    cache_dir: the cache's folder (default $LUMINAL_CACHE_DIR, else the user cache dir).
    """

    limit: int = -1  # -1: $LUMINAL_SEARCH_LIMIT if set, else 100 (the seed's default)
    generation_size: int = 10
    mutations: int = 10
    trials: int = 3
    keep_best: int = 1
    profile_timeout: float | None = 1.0
    group_timeout: float | None = None
    patience: int | None = 30
    min_gain: float = 0.01
    seed: int = 0
    max_memory: int | None = None
    progress: bool | None = None
    cache: bool = True
    cache_dir: str | None = None

    def __post_init__(self):
        if self.limit == -1:
            object.__setattr__(self, "limit", default_limit())
        _check_int("limit", self.limit, 1)
        _check_int("generation_size", self.generation_size, 1)
        _check_int("mutations", self.mutations, 1)
        _check_int("trials", self.trials, 1)
        _check_int("keep_best", self.keep_best, 1)
        _check_int("seed", self.seed, -(2**63))
        _check_seconds("profile_timeout", self.profile_timeout)
        _check_seconds("group_timeout", self.group_timeout)
        if self.patience is not None:
            _check_int("patience", self.patience, 1)
        if (isinstance(self.min_gain, bool) or not isinstance(self.min_gain, (int, float))
                or not 0 <= self.min_gain < 1):
            raise SearchOptionsError(
                f"SearchOptions: min_gain must be a fraction in [0, 1) (0.01: a candidate must be "
                f"1% faster than the fastest so far to count as a gain), got {self.min_gain!r}")
        if self.max_memory is not None:
            # Normalise "8GB" to an int once, so the rest of the library sees bytes.
            object.__setattr__(self, "max_memory", parse_bytes(self.max_memory))
        if self.progress is not None and not isinstance(self.progress, bool):
            raise SearchOptionsError(
                f"SearchOptions: progress must be True, False or None (auto), got {self.progress!r}")
        if not isinstance(self.cache, bool):
            raise SearchOptionsError(f"SearchOptions: cache must be True or False, got {self.cache!r}")
        if self.cache_dir is not None:
            if not isinstance(self.cache_dir, (str, os.PathLike)):
                raise SearchOptionsError(
                    f"SearchOptions: cache_dir must be a path or None, got {self.cache_dir!r}")
            object.__setattr__(self, "cache_dir", os.fspath(self.cache_dir))

    @classmethod
    def from_user(cls, value) -> "SearchOptions":
        """What ``lf.jit(search=...)`` accepts: None (defaults), an int (the candidate limit), a
        dict of option names, or a SearchOptions."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            raise SearchOptionsError(
                f"search={value!r}: give None (defaults), an int (the candidate limit, e.g. "
                f"search=1 to take the first valid candidate), a dict or lf.SearchOptions(...)")
        if isinstance(value, int):
            return cls(limit=value)
        if isinstance(value, dict):
            known = [f.name for f in fields(cls)]
            for key in value:
                if key not in known:
                    close = difflib.get_close_matches(str(key), known, n=1)
                    hint = f" (did you mean '{close[0]}'?)" if close else ""
                    raise SearchOptionsError(
                        f"search: unknown option {key!r}{hint}; options are {', '.join(known)}")
            return cls(**value)
        raise SearchOptionsError(
            f"search= must be None, an int (the candidate limit), a dict or lf.SearchOptions, "
            f"got {type(value).__name__} {value!r}")

    def replace(self, **changes) -> "SearchOptions":
        """A copy with some options changed (validated like the constructor)."""
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return asdict(self)

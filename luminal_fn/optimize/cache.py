"""On-disk cache of search results, so a second process compiling the same function skips search.

An entry is one JSON file named by its key (a sha256 of the graph hash, bucket, backend, device,
library version and rules version). It records the chosen genome and the genes' names (and
option counts) it was chosen over; an entry that does not parse, or whose key or genes differ
from the caller's, is ignored (and later overwritten), never trusted. Writes go to a temporary
file in the same folder and are moved into place with `os.replace`, so a reader never sees half
an entry. A cache that cannot be written (read-only disk) only costs a warning.

An entry may also hold the LLIR the genome extracted (ir/serialize.py, base64 in the JSON), with
a digest of the code that extracts it (`extraction_code_version`): a process whose every bucket
finds one runs without building the e-graph at all. That LLIR is used only when the digest
matches this library's code and the bytes read back as a graph (and, program.py checks, the
backend still offers its kernels); otherwise the genome is.
"""
from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Mapping, Sequence

from ..ir.graph import Graph
from ..ir.serialize import GraphFormatError, graph_from_bytes, graph_to_bytes

ENV_VAR = "LUMINAL_CACHE_DIR"
FORMAT = 1  # bump when the entry layout changes; old entries then read as misses
_SUBDIR = "search"


def default_cache_dir() -> Path:
    """$LUMINAL_CACHE_DIR, else the user cache dir (platformdirs, else $XDG_CACHE_HOME or
    ~/.cache) joined with luminal_fn."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("luminal_fn", appauthor=False))
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "luminal_fn"


def library_version() -> str:
    from .. import __version__  # late: the package imports this module while initialising

    return str(__version__)


@functools.lru_cache(maxsize=1)
def extraction_code_version() -> str:
    """A short hash of the sources an extracted LLIR depends on (the IR and the optimizer,
    rule files included): a stored LLIR from other code is not reused, even at the same
    library version (a development checkout)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(library_version().encode())
    for sub in ("ir", "optimize"):
        for p in sorted((root / sub).rglob("*")):
            if p.suffix in (".py", ".egg") and p.is_file():
                h.update(str(p.relative_to(root)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


def make_key(graph_hash: str, bucket: str, backend: str, device: str,
             version: str | None = None, rules_version: str = "") -> str:
    """The cache key of one search: sha256 over every input that can change its outcome."""
    fields = {"format": FORMAT, "graph": str(graph_hash), "bucket": str(bucket),
              "backend": str(backend), "device": str(device),
              "version": library_version() if version is None else str(version),
              "rules": str(rules_version)}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _gene_signature(genes: Sequence) -> tuple[list, list | None]:
    """Names, and option counts when Gene objects (not bare names) are given."""
    names = [g if isinstance(g, str) else g.name for g in genes]
    counts = None if all(isinstance(g, str) for g in genes) else [
        None if isinstance(g, str) else int(g.n_options) for g in genes]
    return names, counts


class SearchCache:
    """Search results under ``directory`` (default `default_cache_dir()`)."""

    def __init__(self, directory: str | os.PathLike | None = None):
        root = default_cache_dir() if directory is None else Path(directory).expanduser()
        self.directory = root / _SUBDIR
        self.last_miss_reason: str | None = None  # why the latest lookup missed (diagnostics)
        self._warned = False

    def path_for(self, key: str) -> Path:
        if not key or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"SearchCache: key must be a hex digest from make_key, got {key!r}")
        return self.directory / f"{key}.json"

    def lookup(self, key: str, genes: Sequence) -> tuple | None:
        """The cached genome for `key`, or None when absent, unreadable or made for other genes.
        `genes`: gene names, or Gene objects (then option counts are checked too)."""
        names, counts = _gene_signature(genes)
        entry = self._read(key)
        if entry is None:
            return None
        genome = self._validate(entry, key, names, counts)
        if genome is None:
            return None
        self.last_miss_reason = None
        return genome

    def lookup_llir(self, key: str) -> Graph | None:
        """The LLIR stored with `key`'s entry, or None when there is none, it was extracted by
        other code, or its bytes do not read back as a graph (`last_miss_reason` says which)."""
        entry = self._read(key)
        if entry is None:
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
            return self._miss("wrong format or key")
        llir = entry.get("llir")
        if not isinstance(llir, dict) or not isinstance(llir.get("data"), str):
            return self._miss("no LLIR stored")
        if llir.get("code") != extraction_code_version():
            return self._miss("LLIR from other code")
        try:
            data = base64.b64decode(llir["data"], validate=True)
            if hashlib.sha256(data).hexdigest() != llir.get("sha256"):
                return self._miss("LLIR digest mismatch")
            graph = graph_from_bytes(data)
        except (binascii.Error, GraphFormatError) as e:
            return self._miss(f"unreadable LLIR ({e})")
        self.last_miss_reason = None
        return graph

    def _read(self, key: str):
        """The parsed entry, or None (the reason in `last_miss_reason`)."""
        try:
            with open(self.path_for(key), "r", encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return self._miss("absent")
        except (OSError, ValueError) as e:  # unreadable or not JSON (truncated, garbage)
            return self._miss(f"unreadable entry ({type(e).__name__})")

    def _miss(self, reason: str):
        self.last_miss_reason = reason
        return None

    def _validate(self, entry, key, names, counts):
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return self._miss("wrong format")
        if entry.get("key") != key:
            return self._miss("key mismatch")
        if entry.get("gene_names") != names:
            return self._miss("genes changed")
        genome = entry.get("genome")
        if not isinstance(genome, list) or len(genome) != len(names) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in genome):
            return self._miss("bad genome")
        stored = entry.get("gene_options")
        if stored is None:
            stored = [None] * len(names)
        elif not isinstance(stored, list) or len(stored) != len(names):
            return self._miss("bad gene_options")
        if counts is not None:
            for v, n, was in zip(genome, counts, stored):
                if n is not None and (v >= n or (was is not None and was != n)):
                    return self._miss("genes changed")
        return tuple(genome)

    def store(self, key: str, genome: Sequence[int], genes: Sequence,
              meta: Mapping | None = None, llir: Graph | None = None) -> bool:
        """Write an entry atomically; returns False (with one warning) if the disk refuses.
        ``llir``: the graph the genome extracts, stored so a later process needs no e-graph."""
        names, counts = _gene_signature(genes)
        genome = [int(v) for v in genome]
        if len(genome) != len(names):
            raise ValueError(f"SearchCache.store: genome has {len(genome)} choices for "
                             f"{len(names)} genes")
        entry = {"format": FORMAT, "key": key, "gene_names": names, "gene_options": counts,
                 "genome": genome, "meta": dict(meta or {}), "created": time.time()}
        if llir is not None:
            data = graph_to_bytes(llir)
            entry["llir"] = {"code": extraction_code_version(), "sha256": hashlib.sha256(data).hexdigest(),
                             "data": base64.b64encode(data).decode("ascii")}
        path = self.path_for(key)
        tmp = None
        try:
            text = json.dumps(entry, sort_keys=True, default=str)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)  # no fsync: a torn entry after a crash reads as a miss
            os.replace(tmp, path)
            return True
        except OSError as e:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if not self._warned:
                self._warned = True
                warnings.warn(f"luminal_fn: cannot write the search cache in {self.directory} "
                              f"({e}); searches will not be reused. Set {ENV_VAR} or "
                              f"SearchOptions(cache_dir=...) to a writable folder, or "
                              f"cache=False.", RuntimeWarning, stacklevel=2)
            return False

    def read_meta(self, key: str) -> dict | None:
        """The metadata stored with an entry (no validation of genes), for diagnostics."""
        try:
            with open(self.path_for(key), "r", encoding="utf-8") as f:
                entry = json.load(f)
            return entry.get("meta") if isinstance(entry, dict) else None
        except (OSError, ValueError):
            return None

    def clear(self) -> int:
        """Delete every entry; returns how many were removed."""
        n = 0
        if self.directory.is_dir():
            for p in self.directory.glob("*.json"):
                try:
                    p.unlink()
                    n += 1
                except OSError:
                    pass
        return n

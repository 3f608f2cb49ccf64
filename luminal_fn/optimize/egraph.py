"""Build the e-graph of a traced graph with egglog, run the rule schedule, read it back.

The HLIR is written as egglog terms (encode.py), the rules of ``rules/*.egg`` plus the backend's
own (``Backend.rule_sources()``) run in a fixed, bounded schedule, and the saturated e-graph is
serialized into plain Python structures (:class:`EGraph`): e-classes holding e-nodes whose
children are e-class ids. Extraction (extract.py) and search never touch egglog again.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from importlib import resources

from .encode import ENCODING_VERSION, encode

# The fixed schedule: (ruleset, how to run it). ``saturate`` stages only hold terminating
# rewrites over integers; the others run a bounded number of iterations.
SCHEDULE = (
    ("expr", "saturate"),
    ("specialize", 40),
    ("fuse", 1),
    ("expr", "saturate"),
    ("cleanup", 1),
)
RULESETS = ("expr", "fuse", "specialize", "cleanup")
# egglog 13.2 needs memory quadratic in the size of one parse_program call: feed it in chunks.
CHUNK = 50
# Sorts whose e-nodes are not data (functions and relations read only on the Python side).
BOOKKEEPING = {"NodeOf", "OutputOf", "Elementwise"}


@dataclass(frozen=True)
class ENode:
    op: str  # constructor name, or a literal's text for primitive nodes
    children: tuple  # e-class ids
    cost: float
    subsumed: bool


@dataclass
class EGraph:
    """The read-back: e-classes (id -> sort, nodes) and where HLIR nodes/outputs landed."""

    classes: dict = field(default_factory=dict)  # class id -> list[ENode]
    sorts: dict = field(default_factory=dict)  # class id -> sort name
    node_of: dict = field(default_factory=dict)  # HLIR node id -> class id
    output_of: dict = field(default_factory=dict)  # output index -> class id
    stats: dict = field(default_factory=dict)
    _literals: dict = field(default_factory=dict, repr=False, compare=False)  # class id -> value

    def literal(self, cls: str):
        """The Python value of a primitive class (i64 or String)."""
        try:
            return self._literals[cls]
        except KeyError:
            pass
        (node,) = self.classes[cls][:1]
        text = node.op
        value = self._literals[cls] = json.loads(text) if self.sorts[cls] == "String" else int(text)
        return value

    def n_nodes(self) -> int:
        return sum(len(v) for v in self.classes.values())


def rule_texts(extra=()) -> list:
    """base.egg first, then every other rule file of the package (sorted), then ``extra``."""
    return list(_package_rules()) + list(extra)


@functools.lru_cache(maxsize=1)
def _package_rules() -> tuple:
    folder = resources.files("luminal_fn.optimize").joinpath("rules")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".egg"))
    texts = [folder.joinpath("base.egg").read_text()]
    texts += [folder.joinpath(n).read_text() for n in names if n != "base.egg"]
    return tuple(texts)


@functools.lru_cache(maxsize=16)
def _rules_version(extra: tuple) -> str:
    text = "\n".join([f"encoding {ENCODING_VERSION}"] + rule_texts(extra))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rules_version(extra=()) -> str:
    """A short hash of every rule text and the encoding's version (part of the search cache
    key)."""
    return _rules_version(tuple(extra))


# Each build gets an egglog e-graph of its own with the rules loaded (the rule files parsed once
# per rule set). One shared e-graph, each build between (push) and (pop), was faster (~0.45 s of
# rule loading saved a build) but not isolated: after a long run of other builds in one process
# (the CPU test suite in file order), a Scatter's index child read back as another input's class,
# while a fresh e-graph gave the right term (2026-12-04; egglog 13.2). That was most likely the
# global-name aliasing that encode.global_name now avoids (egglog's name counters live as long as
# the e-graph, so a shared one met it sooner); the fresh e-graph stays until that is measured.
_PARSED: dict = {}
_LOCK = threading.Lock()


def _new_egglog():
    from egglog.bindings import EGraph as Egglog

    try:
        return Egglog(no_decomp=True)  # egglog >= 14: much faster multi-premise rules
    except TypeError:  # egglog 13.2 (Python 3.11)
        return Egglog()


def _rules_loaded(extra: tuple):
    """A new egglog e-graph with every rule file of the set run into it (parsed by the first;
    egglog 13.2 and 14 run commands another e-graph parsed)."""
    eg = _new_egglog()
    with _LOCK:
        parsed = _PARSED.get(extra)
        if parsed is None:
            parsed = _PARSED[extra] = [_egglog(eg.parse_program, f"rule file {k}", text)
                                       for k, text in enumerate(rule_texts(extra))]
    for k, commands in enumerate(parsed):
        _egglog(eg.run_program, f"rule file {k}", *commands)
    return eg


class EGraphBuildError(RuntimeError):
    """egglog refused the program: a rule file or the encoded graph is malformed."""


def _egglog(call, what: str, *args):
    """``call(*args)``, egglog's refusal raised as EGraphBuildError naming ``what``."""
    from egglog.bindings import EggSmolError

    try:
        return call(*args)
    except EggSmolError as e:
        raise EGraphBuildError(f"egglog rejected {what}: {e}") from None


def _run(eg, text: str, what: str):
    return _egglog(eg.run_program, what, *_egglog(eg.parse_program, what, text))


def build_egraph(graph, backend_rules=(), *, max_nodes: int = 2_000_000,
                 time_limit: float | None = 60.0, progress=None) -> EGraph:
    """Encode ``graph``, run the schedule (each stage skipped once the e-graph holds more than
    ``max_nodes`` rows or ``time_limit`` seconds have passed; primitives always remain, so the
    result still extracts) and read the e-graph back."""
    return _build(_rules_loaded(tuple(backend_rules)), graph, max_nodes, time_limit, progress)


def _build(eg, graph, max_nodes, time_limit, progress) -> EGraph:
    t0 = time.perf_counter()
    stats = {"stages": {}, "rules": {}}
    enc = encode(graph)
    cmds = enc.commands
    for i in range(0, len(cmds), CHUNK):
        _run(eg, "\n".join(cmds[i:i + CHUNK]), "the encoded graph")
    stats["load_s"] = time.perf_counter() - t0
    if progress is not None:
        progress.step("load")
    skipped = []
    for name, how in SCHEDULE:
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            skipped.append(name)
            continue
        t1 = time.perf_counter()
        cmd = f"(run-schedule (saturate (run {name})))" if how == "saturate" else f"(run {name} {how})"
        _collect_rule_times(_run(eg, cmd, f"the {name} rules"), stats["rules"])
        stats["stages"][name] = stats["stages"].get(name, 0.0) + time.perf_counter() - t1
        if progress is not None:
            progress.step(name)
        size = _size(eg)
        if size > max_nodes:
            skipped.append(f"after {name}: {size} rows > max_nodes")
            break
    stats["skipped"] = skipped
    t1 = time.perf_counter()
    out = read_back(eg)
    stats["readback_s"] = time.perf_counter() - t1
    stats["total_s"] = time.perf_counter() - t0
    stats["classes"] = len(out.classes)
    stats["nodes"] = out.n_nodes()
    out.stats = stats
    if progress is not None:
        progress.step("read back")
    return out


def _collect_rule_times(outputs, into: dict) -> None:
    """Add egglog's per-rule search-and-apply seconds and match counts to ``into``
    (rule text -> [seconds, matches])."""
    for out in outputs or ():
        report = getattr(out, "report", None)
        if report is None:
            continue
        matches = report.num_matches_per_rule
        for rule, dt in report.search_and_apply_time_per_rule.items():
            row = into.setdefault(" ".join(rule.split()), [0.0, 0])
            row[0] += dt.total_seconds()
            row[1] += int(matches.get(rule, 0))


def rule_report(stats: dict, top: int = 15) -> str:
    """The slowest rules of a build as text (``Lowered.rule_report()``)."""
    rows = sorted(stats.get("rules", {}).items(), key=lambda kv: -kv[1][0])[:top]
    lines = [f"{'seconds':>9} {'matches':>8}  rule"]
    for rule, (sec, n) in rows:
        text = rule if len(rule) <= 120 else f"{rule[:55]} ... {rule[-60:]}"  # head and actions
        lines.append(f"{sec:9.4f} {n:8d}  {text}")
    return "\n".join(lines)


def _size(eg) -> int:
    """Rows in the e-graph's tables (egglog's own count)."""
    (out,) = eg.run_program(*eg.parse_program("(print-size)"))
    return sum(n for _, n in out.sizes)


def read_back(eg) -> EGraph:
    """Serialize an egglog e-graph into an :class:`EGraph`."""
    data = json.loads(eg.serialize([]).to_json())
    nodes = data["nodes"]
    node_class = {nid: n["eclass"] for nid, n in nodes.items()}
    out = EGraph()
    for cid, info in data["class_data"].items():
        out.sorts[cid] = info["type"]
    for nid, n in nodes.items():
        op = n["op"]
        cls = n["eclass"]
        children = tuple(node_class[c] for c in n["children"])
        if op in BOOKKEEPING:
            if op == "NodeOf":
                out.node_of[int(nodes[n["children"][0]]["op"])] = cls
            elif op == "OutputOf":
                out.output_of[int(nodes[n["children"][0]]["op"])] = cls
            continue
        out.classes.setdefault(cls, []).append(
            ENode(op, children, float(n.get("cost", 1.0)), bool(n.get("subsumed", False))))
    return out

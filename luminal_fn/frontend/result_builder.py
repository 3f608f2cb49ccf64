"""The result of a compiled call, built by code generated for its output structure.

A call's outputs come back from the backend as a flat list of buffers; the user gets Arrays in
the pytree the traced function returned. Walking the TreeDef and wrapping each buffer in a loop
costs about 0.5 us an output in Python: a Llama step returning its token and 32 cache arrays
paid 19 us a call for it. Here the structure is turned once into one expression (a tuple, list
and dict display with an ``Array(...)`` call per leaf), 6.5 us for the same step on the same CPU
(benchmarks/dispatch.py measures the small case).

Every Array takes its shape from its buffer, not from the graph, so a backend that returned a
buffer of another shape could not hide behind the traced one.
"""
from __future__ import annotations

from typing import Callable

from . import pytree
from .array import Array

# nesting deeper than this is built by pytree.unflatten: one expression per level would reach
# the Python parser's nesting limit
MAX_GENERATED_DEPTH = 40


def _depth(td: pytree.TreeDef) -> int:
    return 1 + max((_depth(c) for c in td.children), default=0)


def result_builder(td: pytree.TreeDef, backend, dtypes: list) -> Callable:
    """A function of the backend's output buffers (in flatten order) returning the result
    pytree of Arrays; ``dtypes`` the luminal_fn dtype of each output."""
    if td.num_leaves != len(dtypes):
        raise ValueError(f"result_builder: the output structure {td!r} has {td.num_leaves} leaves "
                         f"but {len(dtypes)} output dtypes were given")
    if _depth(td) > MAX_GENERATED_DEPTH:
        def build(outs, td=td, dtypes=tuple(dtypes), be=backend):
            return pytree.unflatten(td, [Array(b, be, tuple(b.shape), d) for b, d in zip(outs, dtypes)])
        return build
    consts: dict = {"Array": Array, "BE": backend, "node": pytree.node_from_children}
    leaf = iter(range(len(dtypes)))

    def const(v) -> str:
        name = f"c{len(consts)}"
        consts[name] = v
        return name

    def expr(t: pytree.TreeDef) -> str:
        kind = t.kind
        if kind == "leaf":
            k = next(leaf)
            return f"Array(o[{k}], BE, tuple(o[{k}].shape), {const(dtypes[k])})"
        if kind == "none":
            return "None"
        kids = [expr(c) for c in t.children]
        if kind == "tuple":
            return f"({', '.join(kids)}{',' if len(kids) == 1 else ''})"
        if kind == "list":
            return f"[{', '.join(kids)}]"
        if kind == "dict":  # keys in the TreeDef's order, as pytree.unflatten builds them
            keys = [repr(k) if type(k) in (str, int) else const(k) for k in t.meta]
            return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, kids)) + "}"
        # namedtuple, dataclass, other mappings: built one level at a time as unflatten does
        return f"node({const(t)}, ({', '.join(kids)}{',' if len(kids) == 1 else ''}))"

    source = f"def build(o):\n  return {expr(td)}\n"
    exec(compile(source, "<luminal_fn result builder>", "exec"), consts)  # noqa: S102
    build = consts["build"]
    build.source = source
    return build


__all__ = ["result_builder", "MAX_GENERATED_DEPTH"]

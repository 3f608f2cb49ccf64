"""Pytrees: nested dict / list / tuple / namedtuple / dataclass / None containers of leaves.

``flatten`` gives the leaves in a fixed order (dict keys sorted, as in JAX) and a hashable
``TreeDef``; ``unflatten`` rebuilds the container from new leaves. Paths name leaves in errors
and in ``dynamic_axes`` (``"params/w1"``, ``"cache/0/k"``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable


class TreeDef:
    """A hashable description of a container structure (leaves are ``*``)."""

    __slots__ = ("kind", "meta", "children", "num_leaves", "_hash")

    def __init__(self, kind: str, meta: Any, children: tuple):
        self.kind = kind
        self.meta = meta
        self.children = children
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in children)
        self._hash = hash((kind, meta, children))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return (isinstance(other, TreeDef) and self._hash == other._hash and self.kind == other.kind
                and self.meta == other.meta and self.children == other.children)

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children))
            return "{" + inner + "}"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "tuple":
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        return f"{getattr(self.meta[0], '__name__', self.kind)}({inner})"


LEAF = TreeDef("leaf", None, ())
NONE = TreeDef("none", None, ())


# Types that are always leaves, checked first so flattening arrays costs one set lookup each
# (arrays are by far the most common leaves; the front end registers Array and Tracer).
_LEAF_TYPES: set = {float, int, bool, complex, str, bytes}


def register_leaf_type(t: type) -> None:
    _LEAF_TYPES.add(t)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree, is_leaf: Callable | None = None) -> tuple[list, TreeDef]:
    leaves: list = []
    td = _flatten(tree, leaves, is_leaf)
    return leaves, td


def _flatten(x, leaves: list, is_leaf) -> TreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    t = type(x)
    if t in _LEAF_TYPES:
        leaves.append(x)
        return LEAF
    if t is tuple or t is list:
        kids = tuple(_flatten(c, leaves, is_leaf) for c in x)
        return TreeDef("tuple" if t is tuple else "list", None, kids)
    if t is dict:
        keys = sorted(x, key=_key_order)
        kids = tuple(_flatten(x[k], leaves, is_leaf) for k in keys)
        return TreeDef("dict", tuple(keys), kids)
    if x is None:
        return NONE
    if _is_namedtuple(x):
        kids = tuple(_flatten(c, leaves, is_leaf) for c in x)
        return TreeDef("namedtuple", (t,), kids)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = tuple(f.name for f in dataclasses.fields(x))
        kids = tuple(_flatten(getattr(x, f), leaves, is_leaf) for f in fields)
        return TreeDef("dataclass", (t, fields), kids)
    if isinstance(x, dict):  # OrderedDict and other mappings keep their own order
        keys = tuple(x.keys())
        kids = tuple(_flatten(x[k], leaves, is_leaf) for k in keys)
        return TreeDef("mapping", (t, keys), kids)
    leaves.append(x)
    return LEAF


def _key_order(k):
    return (type(k).__name__, k) if not isinstance(k, str) else ("str", k)


def unflatten(td: TreeDef, leaves) -> Any:
    it = iter(leaves)
    out = _build(td, it)
    return out


def _build(td: TreeDef, it):
    k = td.kind
    if k == "leaf":
        return next(it)
    if k == "none":
        return None
    return node_from_children(td, [_build(c, it) for c in td.children])


def node_from_children(td: TreeDef, kids):
    """One container of kind ``td`` around its already built children."""
    k = td.kind
    if k == "tuple":
        return tuple(kids)
    if k == "list":
        return list(kids)
    if k == "dict":
        return dict(zip(td.meta, kids))
    if k == "namedtuple":
        return td.meta[0](*kids)
    if k == "dataclass":
        cls, fields = td.meta
        obj = cls.__new__(cls)
        for f, v in zip(fields, kids):
            object.__setattr__(obj, f, v)
        return obj
    if k == "mapping":
        cls, keys = td.meta
        return cls(zip(keys, kids))
    raise ValueError(f"unknown tree kind {k}")


def leaf_paths(td: TreeDef, prefix: str = "") -> list[str]:
    """The path string of every leaf, in flatten order."""
    out: list[str] = []
    _paths(td, prefix, out)
    return out


def _paths(td: TreeDef, prefix: str, out: list):
    k = td.kind
    if k == "leaf":
        out.append(prefix)
        return
    if k == "none":
        return
    if k in ("dict", "mapping"):
        keys = td.meta if k == "dict" else td.meta[1]
    elif k == "dataclass":
        keys = td.meta[1]
    elif k == "namedtuple":
        keys = td.meta[0]._fields
    else:
        keys = range(len(td.children))
    for key, c in zip(keys, td.children):
        _paths(c, f"{prefix}/{key}" if prefix else str(key), out)


def tree_map(fn: Callable, tree, *rest, is_leaf: Callable | None = None):
    leaves, td = flatten(tree, is_leaf)
    others = [flatten(r, is_leaf)[0] for r in rest]
    return unflatten(td, [fn(x, *xs) for x, *xs in zip(leaves, *others)])


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    return flatten(tree, is_leaf)[0]

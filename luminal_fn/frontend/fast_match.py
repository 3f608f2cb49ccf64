"""A matcher generated for one call's argument structure: the dispatch path of a jitted function
that is called again and again with the same kind of arguments (a model's weights dict, a batch).

``fast_key`` (signature.py) walks any structure of dicts, lists and tuples and builds a hashable
key per call; for a DLRM with 32 tables that walk dominates the host time of a call. Here the
structure seen last is turned into straight-line Python (no recursion, no key tuple to build and
hash): it checks every container's type, length and keys and every leaf's type, dtype and the
static axes of its shape against constants, and returns the leaves in ``pytree.flatten`` order,
or None at the first difference (the caller then takes the general path). Dynamic axes are not
compared, so a new sequence length still matches. When every leaf was an Array of the compiled
function's backend, the matcher also hands back their buffers (checking each is still live and
on that backend), so the call skips the per-leaf conversion.
"""
from __future__ import annotations

import numpy as np

from .array import Array
from .signature import foreign_array

SCALARS = (float, int, bool)


class ArgumentMatcher:
    """``match(args)`` -> (leaves, buffers or None) when ``args`` has the structure (and leaf
    shapes/dtypes) of the call this was built from, else None; ``compiled`` is what that call
    ran, ``backend`` the backend whose Arrays give their buffers directly."""

    __slots__ = ("match", "compiled", "source")

    def __init__(self, args, dynamic, compiled, backend):
        self.compiled = compiled
        consts: dict = {"Array": Array, "ndarray": np.ndarray, "BE": backend}
        direct = [True]  # every leaf an Array (its buffer checked and taken at match time)
        lines = ["def match(args):", f"  if len(args) != {len(args)}: return None"]
        names: list = []

        def const(v) -> str:
            name = f"c{len(consts)}"
            consts[name] = v
            return name

        def emit(expr: str, x):
            t = type(x)
            foreign = t is not Array and t is not np.ndarray and foreign_array(t)
            if t is Array or t is np.ndarray or foreign:  # foreign: CuPy, PyTorch, JAX (converted later)
                k = len(names)
                v = f"v{k}"
                names.append(v)
                lines.append(f"  {v} = {expr}")
                axes = (dynamic or {}).get(k)
                shape = tuple(x.shape)
                # one test a leaf where it can be (a statement each costs as much again); an
                # Array's dtype is a singleton, compared by identity; a foreign shape may be a list
                kind = "Array" if t is Array else "ndarray" if t is np.ndarray else const(t)
                same_dtype = f"{v}.dtype {'is not' if t is Array else '!='} {const(x.dtype)}"
                got = f"tuple({v}.shape)" if foreign else f"{v}.shape"
                same_shape = "" if axes else f" or {got} != {const(shape)}"
                lines.append(f"  if type({v}) is not {kind} or {same_dtype}{same_shape}: return None")
                if t is Array:
                    lines.append(f"  b{k} = {v}._buf if {v}._backend is BE and not {v}._deleted else None")
                else:
                    direct[0] = False
                if axes:
                    lines.append(f"  s = {v}.shape")
                    lines.append(f"  if len(s) != {len(shape)}: return None")
                    for a, d in enumerate(shape):
                        if a not in axes:
                            lines.append(f"  if s[{a}] != {int(d)}: return None")
            elif t in SCALARS:
                direct[0] = False
                v = f"v{len(names)}"
                names.append(v)
                lines.append(f"  {v} = {expr}")
                lines.append(f"  if type({v}) is not {t.__name__}: return None")
            elif t is dict:
                c = f"d{len(lines)}"
                lines.append(f"  {c} = {expr}")
                lines.append(f"  if type({c}) is not dict or {c}.keys() != {const(frozenset(x))}: return None")
                for key in sorted(x):
                    emit(f"{c}[{key!r}]", x[key])
            elif t is list or t is tuple:
                c = f"l{len(lines)}"
                lines.append(f"  {c} = {expr}")
                lines.append(f"  if type({c}) is not {t.__name__} or len({c}) != {len(x)}: return None")
                for j, item in enumerate(x):
                    emit(f"{c}[{j}]", item)
            else:
                raise TypeError(f"no fast matcher for a {t.__name__} argument")

        for i, a in enumerate(args):
            emit(f"args[{i}]", a)
        leaves = f"[{', '.join(names)}]"
        if direct[0] and names:
            bufs = [f"b{n[1:]}" for n in names]
            lines.append(f"  if {' is None or '.join(bufs)} is None: return {leaves}, None")
            lines.append(f"  return {leaves}, [{', '.join(bufs)}]")
        else:
            lines.append(f"  return {leaves}, None")
        self.source = "\n".join(lines)
        exec(compile(self.source, "<luminal_fn argument matcher>", "exec"), consts)  # noqa: S102
        self.match = consts["match"]


def matcher_for(args, dynamic, compiled, backend):
    """An ArgumentMatcher for ``args`` (plain positional arguments of arrays, Python scalars,
    dicts with str keys, lists and tuples), or None for anything else."""
    try:
        return ArgumentMatcher(args, dynamic, compiled, backend)
    except TypeError:
        return None

"""Rendering an LLIR expression tree (see luminal_fn/ir/llir.py) as C statements.

The tree is written as SSA temporaries in compute types (float for every float dtype, int,
bool), matching the NumPy reference: half-precision intermediates stay in float32 and are
rounded only when stored or where the tree casts to a half type (x.astype(bfloat16) rounds).
Reads of inputs, gathers and iota values come from callbacks so the same renderer serves
elementwise kernels, vector kernels and reductions.
"""
from __future__ import annotations

import math
from typing import Callable

from ...ir import dtypes as dt
from ...ir.llir import exp_argument, quotient
from .lang import Language, as_stored, compute_type, convert

Leaf = Callable[[int], tuple]  # input index -> (C expression, compute type)
GatherFn = Callable[[int, str], tuple]  # (input index, C int index expression) -> (expr, type)
IotaFn = Callable[[object], str]  # Expr -> C int expression
# tree tags no HLIR primitive has: a language's library function of float arguments, written by a
# backend that lowers a named kernel (ir/composites.py) as one elementwise tree
LIBRARY_FUNCTIONS = ("Atan2", "Asin", "Acos")


def literal(lang: Language, value, dtype_name: str) -> tuple:
    """A scalar literal in the compute type of ``dtype_name``."""
    ct = compute_type(dt.BY_NAME[dtype_name])
    if ct == "bool":
        return ("true" if bool(value) else "false"), "bool"
    if ct == "int":
        v = int(value)
        return (f"({v})" if v >= 0 else f"(-{-v})") if v != -2**31 else "(-2147483647 - 1)", "int"
    v = float(value)
    if math.isnan(v):
        return lang.nan, "float"
    if math.isinf(v):
        return (lang.inf if v > 0 else f"(-{lang.inf})"), "float"
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    # float32 literal (the value was already rounded to float32 by the tracer where it matters)
    return f"{s}f" if not s.startswith("-") else f"({s}f)", "float"


class TreeRenderer:
    """Emits statements for trees; ``lines`` collects them, temporaries are prefixed."""

    def __init__(self, lang: Language, leaf: Leaf, gather: GatherFn | None = None,
                 iota: IotaFn | None = None, prefix: str = "t"):
        self.lang = lang
        self.leaf = leaf
        self.gather = gather
        self.iota = iota
        self.prefix = prefix
        self.lines: list[str] = []
        self._n = 0
        # a subtree met again (an input, or a value read twice: x * x) is the temporary already
        # emitted; the lines are one scope, and without it a value reused at every level
        # doubles the text
        self._done: dict = {}

    def _tmp(self, ctype: str, expr: str) -> str:
        name = f"{self.prefix}{self._n}"
        self._n += 1
        self.lines.append(f"const {ctype} {name} = {expr};")
        return name

    def render(self, tree) -> tuple:
        """Returns (name or expression, compute type) of the tree's value."""
        hit = self._done.get(tree)
        if hit is None:
            hit = self._done[tree] = self._render(tree)
        return hit

    def _render(self, tree) -> tuple:
        tag = tree[0]
        lang = self.lang
        if tag == "in":
            expr, ct = self.leaf(tree[1])
            return self._tmp(ct, expr), ct
        if tag == "const":
            return literal(lang, tree[1], tree[2])
        if tag == "iota":
            if self.iota is None:
                raise NotImplementedError("iota is not available in this kernel")
            return self._tmp("int", self.iota(tree[1])), "int"
        d = dt.BY_NAME[tree[1]]
        ct = compute_type(d)
        if tag == "Cast":
            a, at = self.render(tree[2])
            return self._tmp(ct, as_stored(lang, d, a, at)), ct  # (a cast to half precision rounds, even here)
        x = exp_argument(tree) if "Exp" in lang.math else None
        if x is not None:  # exp(x) as the device's exp, not exp2 of a rounded product
            a, at = self.render(x)
            e = f"{lang.math['Exp']}({convert(lang, a, at, 'float')})"
            return self._tmp(ct, convert(lang, e, "float", ct)), ct
        if tag in ("Exp2", "Log2", "Sin", "Sqrt", "Recip"):
            a, at = self.render(tree[2])
            if ct == "float" or tag != "Recip":
                a = convert(lang, a, at, "float")
                if tag == "Recip":
                    e = f"1.0f / {a}"
                else:
                    e = f"{lang.math[tag]}({a})"
                return self._tmp(ct, convert(lang, e, "float", ct)), ct
            # integer reciprocal: the reference computes 1.0 / x in float and truncates
            return self._tmp(ct, convert(lang, f"1.0f / (float)({a})", "float", ct)), ct
        if tag in LIBRARY_FUNCTIONS:  # a named kernel's own function (backends/cuda/mathkernels.py)
            if tag not in lang.math:
                raise NotImplementedError(f"{lang.name} has no {tag} function")
            args = [convert(lang, *self.render(c), "float") for c in tree[2:]]
            return self._tmp(ct, convert(lang, f"{lang.math[tag]}({', '.join(args)})", "float", ct)), ct
        q = quotient(tree)
        if q is not None:  # a * recip(b): one correctly rounded division (IEEE without fast math)
            a, at = self.render(q[0])
            b, bt = self.render(q[1])
            e = f"{convert(lang, a, at, 'float')} / {convert(lang, b, bt, 'float')}"
            return self._tmp(ct, convert(lang, e, "float", ct)), ct
        if tag in ("Add", "Mul", "Mod", "LessThan"):
            a, at = self.render(tree[2])
            b, bt = self.render(tree[3])
            if tag == "LessThan":
                # compare in the operands' common compute type
                common = "float" if "float" in (at, bt) else ("int" if "int" in (at, bt) else "bool")
                if common == "bool":
                    common = "int"
                a, b = convert(lang, a, at, common), convert(lang, b, bt, common)
                return self._tmp("bool", f"{a} < {b}"), "bool"
            a, b = convert(lang, a, at, ct), convert(lang, b, bt, ct)
            if tag == "Add":
                e = f"{a} + {b}" if ct != "bool" else f"{a} || {b}"
            elif tag == "Mul":
                e = f"{a} * {b}" if ct != "bool" else f"{a} && {b}"
            elif ct == "float":
                e = f"{lang.math['fmod']}({a}, {b})"
            elif ct == "int":
                e = f"lf_imod({a}, {b})"
            else:
                e = "false"  # bool fmod: a % b is 0 for b in {0, 1} (and the reference's b == 0 case)
            return self._tmp(ct, e), ct
        if tag == "Select":
            c, cty = self.render(tree[2])
            x, xt = self.render(tree[3])
            y, yt = self.render(tree[4])
            c = convert(lang, c, cty, "bool")
            return self._tmp(ct, f"{c} ? {convert(lang, x, xt, ct)} : {convert(lang, y, yt, ct)}"), ct
        if tag == "Gather":
            if self.gather is None:
                raise NotImplementedError("Gather is not available in this kernel")
            i, it = self.render(tree[3])
            i = convert(lang, i, it, "int")
            expr, gt = self.gather(tree[2], i)
            return self._tmp(gt, expr), gt
        raise NotImplementedError(f"fused tree op {tag!r} has no rendering")


def tree_has(tree, tags) -> bool:
    tag = tree[0]
    if tag in tags:
        return True
    if tag in ("in", "const", "iota"):
        return False
    if tag == "Gather":
        return tree_has(tree[3], tags)
    return any(tree_has(c, tags) for c in tree[2:])


def leaf_inputs(tree) -> set:
    """Inputs read as plain leaves (at the kernel's own index, not through Gather)."""
    tag = tree[0]
    if tag == "in":
        return {tree[1]}
    if tag in ("const", "iota"):
        return set()
    if tag == "Gather":
        return leaf_inputs(tree[3])
    out: set = set()
    for c in tree[2:]:
        out |= leaf_inputs(c)
    return out


def gather_inputs(tree) -> set:
    tag = tree[0]
    if tag in ("in", "const", "iota"):
        return set()
    if tag == "Gather":
        return {tree[2]} | gather_inputs(tree[3])
    out: set = set()
    for c in tree[2:]:
        out |= gather_inputs(c)
    return out


def substitute_inputs(tree, mapping: dict):
    """Replace ("in", k) leaves by trees (used to inline scalar constants)."""
    tag = tree[0]
    if tag == "in":
        return mapping.get(tree[1], tree)
    if tag in ("const", "iota"):
        return tree
    if tag == "Gather":
        return (tag, tree[1], tree[2], substitute_inputs(tree[3], mapping))
    return (tag, tree[1]) + tuple(substitute_inputs(c, mapping) for c in tree[2:])

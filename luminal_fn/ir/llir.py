"""The LLIR: the graph of kernels a backend runs, chosen by the optimizer's extraction.

An LLIR is an :class:`~luminal_fn.ir.graph.Graph` whose nodes are HLIR primitives (each its own
kernel) or ``CustomOp`` nodes whose ``attrs["name"]`` names a kernel kind. The generic kinds below
are implemented by every backend; a backend may add its own (registered with the optimizer with
the rules that create them).

Generic kernel kinds
--------------------
``fused``        an elementwise region. Every input edge's view has the node's output shape.
                 attrs: ``expr`` (a tree, below) evaluated at each output index.
``fused_reduce`` a reduction with its elementwise prologue. Every input edge's view has the
                 pre-reduction shape ``attrs["in_shape"]``; ``attrs["expr"]`` is evaluated over that
                 space, then reduced over ``attrs["axis"]`` with ``attrs["reduce"]`` ("sum" or "max").
``matmul``       inputs A with view shape (..., M, K) and B with view shape (..., K, N) (batch dims
                 already broadcast; transposed operands are just strides); output (..., M, N).
                 attrs: ``m``, ``n``, ``k`` (ints or Exprs).
``select``       (not a node: a tree op) ``x if c else y``.

Expression trees (nested tuples; dtypes by name)
    ("in", k)                      input edge k read at the current index through its view
    ("const", value, dtype)        a scalar literal
    ("iota", expr)                 the int32 value of a symbolic Expr at the flat index ``z``
    (op, dtype, a)                 op in Cast, Exp2, Log2, Sin, Sqrt, Recip
    (op, dtype, a, b)              op in Add, Mul, Mod, LessThan (LessThan's dtype is "bool")
    ("Select", dtype, c, x, y)     x where c else y
    ("Gather", dtype, k, idx)      input edge k read as its logical flat array at int index idx
                                   (clamped to range), idx itself a tree
"""
from __future__ import annotations

import math
from typing import Iterator

UNARY_TREE_OPS = ("Cast", "Exp2", "Log2", "Sin", "Sqrt", "Recip")
BINARY_TREE_OPS = ("Add", "Mul", "Mod", "LessThan")
GENERIC_KINDS = ("fused", "fused_reduce", "matmul")


_FLOAT_NAMES = ("float32", "float64", "float16", "bfloat16")


def quotient(tree):
    """``(a, b)`` when ``tree`` is the float ``a * recip(b)`` (either order), else None.

    The front end writes ``a / b`` so (HLIR has no division, and the rules match that form);
    every backend evaluates it as one correctly rounded division, as NumPy's ``divide`` does,
    rather than two roundings (``41 * (1 / 41)`` is 0.99999994)."""
    if tree[0] != "Mul" or tree[1] not in _FLOAT_NAMES:
        return None
    a, b = tree[2], tree[3]
    if b[0] == "Recip" and b[1] in _FLOAT_NAMES:
        return a, b[2]
    if a[0] == "Recip" and a[1] in _FLOAT_NAMES:
        return b, a[2]
    return None


LOG2E = 1.4426950408889634  # the front end's exp(x) is exp2(x * LOG2E)


def exp_argument(tree):
    """x when ``tree`` is the float exp2(x * log2(e)) (either order), the front end's exp, else
    None. A backend with an accurate exp (CUDA's expf) evaluates it as that: the product rounds
    x * log2(e) to float32 first, a relative error of up to |x| * 6e-8 in the result (3.6e-6
    near 88). (MLX's CPU exp is less accurate than the product form and overflows below 88.7.)"""
    if tree[0] != "Exp2" or tree[1] not in _FLOAT_NAMES or tree[2][0] != "Mul":
        return None
    a, b = tree[2][2], tree[2][3]
    for c, x in ((b, a), (a, b)):
        if c[0] == "const" and isinstance(c[1], float) and math.isclose(c[1], LOG2E, rel_tol=1e-12):
            return x
    return None


def literal_tree(value, dtype: str) -> tuple:
    """The tree of a scalar literal. -0.0 is written 0.0 * -1.0: Python's -0.0 == 0.0 (and
    hashes alike), so a ("const", -0.0) would be taken for a 0.0 met elsewhere in the tree by
    every cache keyed by subtrees; the product is -0.0 on every backend."""
    if isinstance(value, float) and value == 0.0 and math.copysign(1.0, value) < 0:
        return ("Mul", dtype, ("const", 0.0, dtype), ("const", -1.0, dtype))
    return ("const", value, dtype)


def literal_value(tree):
    """The value of a literal_tree, else None."""
    if tree[0] == "const":
        return tree[1]
    if tree[0] == "Mul" and tree[2] == ("const", 0.0, tree[1]) and tree[3] == ("const", -1.0, tree[1]):
        return -0.0
    return None


def tree_inputs(tree) -> Iterator[int]:
    """The input indices a tree reads (directly or as gather sources)."""
    tag = tree[0]
    if tag == "in":
        yield tree[1]
    elif tag in ("const", "iota"):
        return
    elif tag == "Gather":
        yield tree[2]
        yield from tree_inputs(tree[3])
    else:
        for child in tree[2:]:
            yield from tree_inputs(child)


def tree_size(tree) -> int:
    tag = tree[0]
    if tag in ("in", "const", "iota"):
        return 1
    if tag == "Gather":
        return 1 + tree_size(tree[3])
    return 1 + sum(tree_size(c) for c in tree[2:])


def tree_text(tree) -> str:
    """A readable one-line rendering (used in Compiled.as_text())."""
    tag = tree[0]
    if tag == "in":
        return f"in{tree[1]}"
    if tag == "const":
        return repr(tree[1])
    if tag == "iota":
        return f"iota({tree[1]})"
    if tag == "Gather":
        return f"in{tree[2]}[{tree_text(tree[3])}]"
    args = ", ".join(tree_text(c) for c in tree[2:])
    return f"{tag}({args})"

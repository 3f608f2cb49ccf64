"""NumPy-side rewrites of fused expression trees before they are compiled.

The front end writes transcendental functions in HLIR primitives (``exp(x)`` is
``Exp2(x * log2 e)``, ``tanh(x)`` is ``1 - 2 / (exp(2x) + 1)``, ``log(x)`` is ``Log2(x) * ln 2``).
A GPU kernel evaluates those trees in registers for free; NumPy evaluates every node as a pass over
memory, so one ``np.tanh`` is several times cheaper than its eight-node expansion. These rewrites
recognise the forms ``luminal_fn.numpy`` writes, whole, and leave everything else alone. The
private tags they produce (``"np.exp"``, ``"np.log"``, ``"np.tanh"``) exist only inside this backend.
"""
from __future__ import annotations

import math

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
_TOL = 1e-12


def _const(t, value) -> bool:
    return t[0] == "const" and isinstance(t[1], float) and math.isclose(t[1], value, rel_tol=_TOL)


def _split(t, tag, value):
    """For ``(tag, d, a, b)`` with one side the constant ``value``: the other side, else None."""
    if t[0] != tag:
        return None
    a, b = t[2], t[3]
    if _const(b, value):
        return a
    if _const(a, value):
        return b
    return None


def _exp_arg(t):
    """x when t is exp(x) (after rewriting), else None."""
    return t[2] if t[0] == "np.exp" else None


def _tanh_arg(t):
    """x when t is 1 + (2 * recip(exp(2x) + 1)) * -1, the front end's tanh, else None."""
    rest = _split(t, "Add", 1.0)
    if rest is None:
        return None
    two_recip = _split(rest, "Mul", -1.0)
    if two_recip is None:
        return None
    recip = _split(two_recip, "Mul", 2.0)
    if recip is None or recip[0] != "Recip":
        return None
    e = _split(recip[2], "Add", 1.0)
    if e is None:
        return None
    inner = _exp_arg(e)
    if inner is None:
        return None
    return _split(inner, "Mul", 2.0)


# the Taylor coefficients of x^3 .. x^11 the front end's tanh uses below |x| = 0.3
# (frontend/numpy/_trig.py; not imported: backends do not import the front end)
_TANH_SERIES = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925)


def _other(t, tag, operand):
    """For ``(tag, d, a, b)`` with one side ``operand``: the other side, else None."""
    if t[0] != tag:
        return None
    if t[2] == operand:
        return t[3]
    return t[2] if t[3] == operand else None


def _is_tanh_series(t, x) -> bool:
    """t is x * (1 + z * (c1 + z * (c2 + ... z * c5))) with z = x * x and tanh's coefficients."""
    if t[0] != "Mul":
        return False
    z = ("Mul", t[1], x, x)
    rest = _other(t, "Mul", x)
    rest = _split(rest, "Add", 1.0) if rest is not None else None
    for c in _TANH_SERIES[:-1]:
        inner = _other(rest, "Mul", z) if rest is not None else None
        rest = _split(inner, "Add", c) if inner is not None else None
        if rest is None:
            return False
    return _split(rest, "Mul", _TANH_SERIES[-1]) == z


def rewrite(tree, memo: dict | None = None):
    """The tree with recognised exp / log / tanh subtrees replaced (bottom-up). A subtree met
    twice is one object (x * x), rewritten once (``memo``, by id) into one object again."""
    tag = tree[0]
    if tag in ("in", "const", "iota"):
        return tree
    memo = {} if memo is None else memo
    done = memo.get(id(tree))
    if done is None:
        done = memo[id(tree)] = _rewrite_node(tree, memo)
    return done


def _rewrite_node(tree, memo):
    tag = tree[0]
    if tag == "Gather":
        return (tag, tree[1], tree[2], rewrite(tree[3], memo))
    kids = tuple(rewrite(c, memo) for c in tree[2:])
    t = (tag, tree[1]) + kids
    d = t[1]
    if tag == "Exp2":
        x = _split(kids[0], "Mul", LOG2E) if kids[0][0] == "Mul" else None
        if x is not None:
            return ("np.exp", d, x)
    if tag == "Mul":
        lg = _split(t, "Mul", LN2)
        if lg is not None and lg[0] == "Log2":
            return ("np.log", d, lg[2])
    if tag == "Add":
        x = _tanh_arg(t)
        if x is not None:
            return ("np.tanh", d, x)
    if tag == "Select":  # tanh's series for small |x|, its exp form elsewhere: both np.tanh
        for a, b in ((kids[1], kids[2]), (kids[2], kids[1])):
            if b[0] == "np.tanh" and _is_tanh_series(a, b[2]):
                return b
    return t

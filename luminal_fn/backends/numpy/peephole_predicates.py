"""The front end's float tests as NumPy's own: ``np.isnan``, ``np.isinf``, ``np.isfinite`` and
``np.signbit``, one pass each where the front end's forms take three to nine.

lnp.isnan(x) is ``not (x < inf) and not (-inf < x)``, isinf ``(not (x < inf) and -inf < x) or
(not (-inf < x) and x < inf)``, isfinite ``x < inf and -inf < x``, signbit ``x < 0 or (x == 0 and
1 / x < 0)``. These are the last pass of tree_peephole.rewrite: the whole-function matchers read
the tests in those forms (sign's NaN select, sinh's signbit, log1p's isposinf), so a test is
replaced only where no whole function took it. The values are NumPy's, the same as the forms'
except np.signbit of a NaN whose sign bit is set (True; the form gives False: a NaN is neither
below nor equal to zero); the other backends keep the form.
"""
from __future__ import annotations

import math

from .tree_peephole import _is_signbit_test, _less, _operands

PREDICATE_NAMES = {"np.isnan": "isnan", "np.isinf": "isinf", "np.isfinite": "isfinite",
                   "np.signbit": "signbit"}


def with_predicates(tree, memo: dict | None = None):
    """The tree with the float tests it contains replaced by NumPy's (bottom-up; a subtree met
    twice is one object, rewritten once into one object again)."""
    if tree[0] in ("in", "const", "iota"):
        return tree
    memo = {} if memo is None else memo
    done = memo.get(id(tree))
    if done is None:
        if tree[0] == "Gather":
            done = (tree[0], tree[1], tree[2], with_predicates(tree[3], memo))
        else:
            t = tree[:2] + tuple(with_predicates(c, memo) for c in tree[2:])
            done = _predicate(t) or t
        memo[id(tree)] = done
    return done


def _predicate(t):
    """("np.isnan" / "np.isinf" / "np.isfinite" / "np.signbit", "bool", x) for the test t, else None."""
    if t[1] != "bool" or t[0] not in ("Mul", "Add"):
        return None
    for p, q in _operands(t, t[0], "bool"):
        if t[0] == "Mul":
            x = _below_inf_arg(p)
            if x is not None and _less(q, -math.inf, x):
                return ("np.isfinite", "bool", x)
            x = _below_inf_arg(p[2]) if p[0] == q[0] == "np.not" else None
            if x is not None and _less(q[2], -math.inf, x):
                return ("np.isnan", "bool", x)
            continue
        x = p[2] if p[0] == "LessThan" and _less(p, p[2], 0.0) else None
        if x is not None and _is_signbit_test(t, x):
            return ("np.signbit", "bool", x)
        for a, _ in _operands(p, "Mul", "bool"):
            x = _below_inf_arg(a[2]) if a[0] == "np.not" else None
            if x is not None and is_inf_test(t, x):
                return ("np.isinf", "bool", x)
    return None


def _below_inf_arg(t):
    """x when t is x < inf, else None."""
    return t[2] if t[0] == "LessThan" and _less(t, t[2], math.inf) else None


def is_inf_test(c, u) -> bool:
    """c is the front end's isinf(u): (not u < inf and -inf < u) or (not -inf < u and u < inf)
    (or np.isinf(u))."""
    if c == ("np.isinf", "bool", u):
        return True

    def both(t, first, second):  # t is first and second, in either order
        return any(first(p) and second(q) for p, q in _operands(t, "Mul", "bool"))

    def negated(test):
        return lambda t: t[0] == "np.not" and test(t[2])

    below_inf, above_minus_inf = (lambda t: _less(t, u, math.inf)), (lambda t: _less(t, -math.inf, u))
    return any(both(hi, negated(below_inf), above_minus_inf) and both(lo, negated(above_minus_inf), below_inf)
               for hi, lo in _operands(c, "Add", "bool"))

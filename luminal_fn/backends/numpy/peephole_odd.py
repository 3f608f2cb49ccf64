"""Odd functions the front end writes through |x| and the sign of x, as one NumPy call each:
``np.arctan``, ``np.arcsinh``, ``np.cbrt`` and ``np.sign`` (float32 / float64; sign in int32 too),
and ``np.log1p``.

lnp.arctan, lnp.arcsinh and lnp.cbrt compute their value m at a = |x| and give it x's sign with
odd_from_magnitude, ``where(x < 0, m * -1, where(x == 0, x, m))`` (a zero x is returned as it is:
f(-0.0) is -0.0). lnp.sign is ``(0 < x) - (x < 0)`` in x's dtype, and x itself where x is NaN.
NumPy evaluates every node as a pass over memory (arctan is about 40 of them, arcsinh 50, sign
12), where NumPy's own call is one and gives NumPy's values, signs of zeros and NaNs included.
Only these whole forms are replaced; tree_peephole hands ``odd_function`` the Adds and Selects it
does not recognise itself, bottom-up, so m is already ``np.arctan(np.abs(x))`` when its select
is met. lnp.log1p, which arcsinh's small branch contains, is ``np.log1p`` too (its select of
``log(1 + y) * y / ((1 + y) - 1)``, the rounding of 1 + y corrected, and its edge cases).

arctan's pieces are four kernels, and tree_merge writes one into another only while the merged
tree stays small once rewritten. |x| has two readers until the reduction's kernel is merged into
the series', so arctan's magnitude is also recognised on a bare input a, as
``where(a < 0, series(a), np.arctan(a))``: NumPy's arctan where the tree computes arctan
(a >= 0, NaN), the tree's own series below zero (the reductions do nothing there).
"""
from __future__ import annotations

import math

from ...ir import series
from .peephole_predicates import is_inf_test
from .tree_peephole import (LN2, _const, _is_equal_test, _is_horner, _is_nan_test, _less, _operands, _other,
                            _split)

FLOATS = ("float32", "float64")
SQRT3 = math.sqrt(3.0)
ARCTAN_POLY = (1.0,) + series.ARCTAN
ARCSINH_LOG_ABOVE = 2.0 ** 28  # lnp.arcsinh's switch to log(a) + ln 2 (frontend/numpy/_trig.py)


def odd_function(t):
    """The NumPy call the Add or Select t is (sign, arctan, arcsinh, cbrt, log1p, or arctan /
    arcsinh of a magnitude), else None."""
    d = t[1]
    if t[0] == "Add":  # int sign has no NaN select: the difference is the whole function
        x = _sign_difference_arg(t) if d == "int32" else None
        return ("np.sign", d, x) if x is not None else None
    if t[0] != "Select" or d not in FLOATS:
        return None
    if _is_nan_test(t[2], t[3]) and _sign_difference_arg(t[4]) == t[3]:
        return ("np.sign", d, t[3])
    y = _log1p_arg(t)
    if y is not None:
        return ("np.log1p", d, y)
    parts = _odd_parts(t)
    if parts is not None:
        x, m = parts
        for f in ("np.arctan", "np.arcsinh"):
            if m == (f, d, ("np.abs", d, x)):
                return (f, d, x)
        if _cube_root_arg(m) == ("np.abs", d, x):
            return ("np.cbrt", d, x)
    a = _arcsinh_magnitude_arg(t)
    if a is not None and a[0] == "np.abs":  # (the front end's form is exact only at a >= 0)
        return ("np.arcsinh", d, a)
    a = _arctan_magnitude_arg(t)
    if a is None:
        return None
    if a[0] == "np.abs":
        return ("np.arctan", d, a)
    below = ("LessThan", "bool", a, ("const", 0.0, d))
    return ("Select", d, below, _arctan_series(a, d), ("np.arctan", d, a))


def _cube_root_arg(m):
    """a when m is the front end's cube root of a magnitude, exp2(log2(a) * (1/3)), else None."""
    if m[0] != "Exp2":
        return None
    lg = _split(m[2], "Mul", 1.0 / 3.0)
    return lg[2] if lg is not None and lg[0] == "Log2" else None


def _is_literal(t, value, d) -> bool:
    return t[0] == "const" and t[2] == d and t[1] == value


def _sign_difference_arg(t):
    """x when t is (0 < x) - (x < 0) in t's dtype, written Cast(0 < x) + Cast(x < 0) * -1 with
    zeros of that dtype (so x is of it too), else None."""
    d = t[1]
    for pos, neg in _operands(t, "Add", d):
        for below, m in _operands(neg, "Mul", d):
            if not (_is_literal(m, -1, d) and pos[0] == below[0] == "Cast" and pos[1] == below[1] == d):
                continue
            gt, lt = pos[2], below[2]
            if (gt[0] == lt[0] == "LessThan" and _is_literal(gt[2], 0, d) and _is_literal(lt[3], 0, d)
                    and gt[3] == lt[2]):
                return lt[2]
    return None


def _odd_parts(t):
    """(x, m) when the select t is where(x < 0, m * -1, where(x == 0, x, m)), else None."""
    below, neg, rest = t[2], t[3], t[4]
    if below[0] != "LessThan" or rest[0] != "Select" or rest[3] != below[2]:
        return None
    x, m = below[2], rest[4]
    if not _less(below, x, 0) or not _is_equal_test(rest[2], x, 0.0) or _split(neg, "Mul", -1.0) != m:
        return None
    return x, m


def _arctan_magnitude_arg(t):
    """a when the select t is the front end's arctan at a >= 0, else None: with inv = 1 < a,
    r = where(inv, 1 / where(inv, a, 1), a), big = tan(pi/12) < r and
    s = where(big, (r sqrt3 - 1) / (r + sqrt3), r), p = s * series(s * s) and
    q = where(big, p + pi/6, p), t is where(inv, pi/2 - q, q)."""
    inv, q = t[2], t[4]
    if inv[0] != "LessThan" or not _const(inv[2], 1.0) or q[0] != "Select":
        return None
    flipped = _split(t[3], "Add", math.pi / 2)
    if flipped is None or _split(flipped, "Mul", -1.0) != q:
        return None
    big, p = q[2], q[4]
    if big[0] != "LessThan" or not _const(big[2], series.ARCTAN_REDUCED_BELOW):
        return None
    a, r = inv[3], big[3]
    if _split(q[3], "Add", math.pi / 6) != p or not _is_reciprocal_above_one(r, inv, a):
        return None
    for s, poly in _operands(p, "Mul", t[1]):
        if (s[0] == "Select" and s[2] == big and s[4] == r and _is_shifted_by_pi_6(s[3], r)
                and _is_horner(poly, ("Mul", t[1], s, s), ARCTAN_POLY)):
            return a
    return None


def _is_reciprocal_above_one(r, inv, a) -> bool:
    """r is where(inv, 1 / where(inv, a, 1), a)."""
    if r[0] != "Select" or r[2] != inv or r[4] != a or r[3][0] != "Recip":
        return False
    s = r[3][2]
    return s[0] == "Select" and s[2] == inv and s[3] == a and _const(s[4], 1.0)


def _is_shifted_by_pi_6(q, r) -> bool:
    """q is (r sqrt3 - 1) / (r + sqrt3), written (r * sqrt3 + -1) * recip(r + sqrt3):
    tan(arctan(r) - pi/6)."""
    for num, den in _operands(q, "Mul", q[1]):
        if den[0] == "Recip" and _split(den[2], "Add", SQRT3) == r:
            m = _split(num, "Add", -1.0)
            if m is not None and _split(m, "Mul", SQRT3) == r:
                return True
    return False


def _arctan_series(a, d):
    """a * (1 + z * (c1 + ...)), z = a * a: arctan's form where a < 0 (neither reduction fires),
    the same operations as the tree's."""
    z = ("Mul", d, a, a)
    p = ("const", ARCTAN_POLY[-1], d)
    for c in reversed(ARCTAN_POLY[:-1]):
        p = ("Add", d, ("const", c, d), ("Mul", d, z, p))
    return ("Mul", d, a, p)


def _arcsinh_magnitude_arg(t):
    """a when the select t is where(2^28 < a, log(a) + ln 2, log1p(a + a^2 / (1 + sqrt(a^2 + 1)))),
    the front end's arcsinh at a >= 0, else None."""
    c, d = t[2], t[1]
    if c[0] != "LessThan" or not _const(c[2], ARCSINH_LOG_ABOVE):
        return None
    a = c[3]
    y = _log1p_arg(t[4])
    if _split(t[3], "Add", LN2) != ("np.log", d, a) or y is None:
        return None
    sq = ("Mul", d, a, a)
    r = _other(_other(y, "Add", a), "Mul", sq)  # y is a + sq * recip(1 + sqrt(sq + 1))
    if r is None or r[0] != "Recip":
        return None
    root = _split(r[2], "Add", 1.0)
    return a if root is not None and root[0] == "Sqrt" and _split(root[2], "Add", 1.0) == sq else None


def _log1p_arg(t):
    """y when t is the front end's log1p(y), else None: with u = y + 1 and e = u - 1 (1 + y
    rounded, and its rounding corrected by y / e),
    where(u == 1, y, where(isposinf(u), u, where(e == 0, y, log(u) * (y / where(e == 0, 1, e))))),
    or np.log1p(y), its form once rewritten (arcsinh's small branch reads either)."""
    if t[0] == "np.log1p":
        return t[2]
    if t[0] != "Select" or t[4][0] != "Select":
        return None
    y, inner = t[3], t[4]
    u, exact = inner[3], inner[4]
    if (_split(u, "Add", 1.0) != y or not _is_equal_test(t[2], u, 1.0) or not _is_posinf_test(inner[2], u)
            or exact[0] != "Select" or exact[3] != y):
        return None
    for lg, q in _operands(exact[4], "Mul", t[1]):
        r = _other(q, "Mul", y)
        if lg != ("np.log", t[1], u) or r is None or r[0] != "Recip" or r[2][0] != "Select":
            continue
        s = r[2]
        if (s[2] == exact[2] and _const(s[3], 1.0) and _split(s[4], "Add", -1.0) == u
                and _is_equal_test(exact[2], s[4], 0.0)):
            return y
    return None


def _is_posinf_test(c, u) -> bool:
    """c is the front end's isposinf(u): isinf(u) and 0 < u."""
    return any(_less(pos, 0, u) and is_inf_test(inf, u) for inf, pos in _operands(c, "Mul", "bool"))

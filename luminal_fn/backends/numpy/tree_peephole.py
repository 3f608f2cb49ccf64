"""NumPy-side rewrites of fused expression trees before they are compiled.

The front end writes transcendental functions in HLIR primitives (``exp(x)`` is
``Exp2(x * log2 e)``, ``tanh(x)`` is ``1 - 2 / (exp(2x) + 1)``, ``log(x)`` is ``Log2(x) * ln 2``).
A GPU kernel evaluates those trees in registers for free; NumPy evaluates every node as a pass over
memory, so one ``np.tanh`` is several times cheaper than its eight-node expansion. These rewrites
recognise the forms ``luminal_fn.numpy`` writes, whole, and leave everything else alone. The
private tags they produce (``"np.exp"``, ``"np.log"``, ``"np.tanh"``, ``"np.expm1"``, ``"np.cos"``,
``"np.not"``, ``"np.trunc"``, ``"np.floor"``, ``"np.maximum"``, ``"np.minimum"``, ``"np.abs"``,
``"np.rint"``, ``"np.cosh"``, ``"np.sinh"``, ``"np.ceil"``, ``"np.tan"``, from peephole_odd.py
``"np.arctan"``, ``"np.arcsinh"``, ``"np.cbrt"``, ``"np.sign"``, ``"np.log1p"``, and from
peephole_predicates.py the float tests) exist only inside this backend; a function written across
several kernels is one tree here after tree_merge. A select whose two branches are forms
of one function of the same x (tanh's series and exp form, expm1's, cos's half- and double-angle
forms) is that function; the front end's logic in int32 casts is NumPy's boolean operations.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir import series
from ...ir.llir import exp_argument, literal_value
from .tree_cache import cached_on_trees

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


def _other(t, tag, operand):
    """For ``(tag, d, a, b)`` with one side ``operand``: the other side, else None."""
    if t is None or t[0] != tag:
        return None
    if t[2] == operand:
        return t[3]
    return t[2] if t[3] == operand else None


def _is_horner(p, var, coefs) -> bool:
    """p is c0 + var * (c1 + var * (... + var * cn)), the front end's Horner form."""
    for c in coefs[:-1]:
        p = _other(_split(p, "Add", c) if p is not None else None, "Mul", var)
    return p is not None and _const(p, coefs[-1])


def _is_series(t, x, coefs) -> bool:
    """t is x * P, P the series ``coefs`` in x (expm1's) or, for tanh's, 1 + z * (...) in
    z = x * x (ir/series.py)."""
    if t[0] != "Mul":
        return False
    if coefs is series.TANH:
        return _is_horner(_other(t, "Mul", x), ("Mul", t[1], x, x), (1.0,) + coefs)
    return _is_horner(_other(t, "Mul", x), x, coefs)


def _expm1_arg(t):
    """x when t is exp(x) - 1 (after rewriting), else None."""
    e = _split(t, "Add", -1.0)
    return e[2] if e is not None and e[0] == "np.exp" else None


def _half_angle_cos_arg(t):
    """x when t is 1 - 2 sin(x/2)^2, else None."""
    rest = _split(t, "Add", 1.0)
    sq2 = _split(rest, "Mul", -1.0) if rest is not None else None
    sq = _split(sq2, "Mul", 2.0) if sq2 is not None else None
    if sq is None or sq[0] != "Mul" or sq[2] != sq[3] or sq[2][0] != "Sin":
        return None
    return _split(sq[2][2], "Mul", 0.5)


def _double_angle_cos_arg(t):
    """x when t is sin(2x) / (2 sin x), written sin(2x) * recip(sin(x) * 2), else None."""
    if t[0] != "Mul":
        return None
    for num, den in ((t[2], t[3]), (t[3], t[2])):
        if num[0] == "Sin" and den[0] == "Recip":
            x = _split(num[2], "Mul", 2.0)
            s = _split(den[2], "Mul", 2.0)
            if x is not None and s == ("Sin", t[1], x):
                return x
    return None


def _select_of_one_function(t):
    """("np.tanh" / "np.expm1" / "np.cos", x) when both branches of the select t are forms the
    front end writes for that function of the same x (each exact for it where it is taken, and
    the function itself everywhere), else None."""
    a, b = t[3], t[4]
    for p, q in ((a, b), (b, a)):
        if q[0] == "np.tanh" and _is_series(p, q[2], series.TANH):
            return "np.tanh", q[2]
        x = _expm1_arg(q)
        if x is not None and _is_series(p, x, series.EXPM1):
            return "np.expm1", x
        x = _half_angle_cos_arg(q)
        if x is not None and _double_angle_cos_arg(p) == x:
            return "np.cos", x
    return None


@cached_on_trees(maxsize=8192)  # a search rewrites mostly the same trees in each candidate
def rewrite(tree):
    """The tree with recognised whole functions replaced (bottom-up), then the float tests no
    function took (peephole_predicates). A subtree met twice is one object (x * x), rewritten
    once into one object again."""
    from .peephole_predicates import with_predicates  # (here: it matches with this module's helpers)
    return with_predicates(_rewrite(tree, {}))


def _rewrite(tree, memo: dict):
    tag = tree[0]
    if tag in ("in", "const", "iota"):
        return tree
    done = memo.get(id(tree))
    if done is None:
        done = memo[id(tree)] = _rewrite_node(tree, memo)
    return done


def _rewrite_node(tree, memo):
    tag = tree[0]
    if tag == "Gather":
        return (tag, tree[1], tree[2], _rewrite(tree[3], memo))
    kids = tuple(_rewrite(c, memo) for c in tree[2:])
    t = (tag, tree[1]) + kids
    d = t[1]
    if tag == "Exp2":
        x = exp_argument(t)
        if x is not None:
            return ("np.exp", d, x)
    if tag == "Mul":
        lg = _split(t, "Mul", LN2)
        if lg is not None and lg[0] == "Log2":
            return ("np.log", d, lg[2])
        hit = _ceil_or_tan(t)
        if hit is not None:
            return hit
    if tag == "Add":
        x = _tanh_arg(t)
        if x is not None:
            return ("np.tanh", d, x)
        hit = _odd_function(t)  # (int sign)
        if hit is not None:
            return hit
    if tag == "Select":  # (tanh's series and exp forms, expm1's, cos's two angle forms)
        hit = _select_of_one_function(t)
        if hit is not None:
            return (hit[0], d, hit[1])
        if kids[0][0] == "np.not":  # where(not c, p, q) is where(c, q, p)
            t = (tag, d, kids[0][2], kids[2], kids[1])
        hit = _whole_select(t)
        if hit is not None:
            return hit
    return _boolean(t) or t


def _ceil_or_tan(t):
    """("np.ceil", d, x) when the product t is the front end's ceil, floor(x * -1) * -1;
    ("np.tan", d, x) when it is its tan, sin(x) * recip(cos(x)); else None."""
    d = t[1]
    if d not in ("float32", "float64"):
        return None
    f = _split(t, "Mul", -1.0)
    if f is not None and f[0] == "np.floor":
        x = _split(f[2], "Mul", -1.0)
        if x is not None:
            return ("np.ceil", d, x)
    for s, r in _operands(t, "Mul", d):
        if s[0] == "Sin" and r == ("Recip", d, ("np.cos", d, s[2])):
            return ("np.tan", d, s[2])
    return None


def _whole_select(t):
    """The NumPy call the select t is (trunc, floor, maximum / minimum, abs, rint, cosh, sinh, and
    peephole_odd's sign, arctan, arcsinh, cbrt, log1p; fmax / fmin as one select), else None.
    The forms are exclusive: the order tried does not matter."""
    for tag, arg in (("np.trunc", _trunc_arg), ("np.floor", _floor_arg), ("np.abs", _abs_arg),
                     ("np.rint", _rint_arg)):
        x = arg(t)
        if x is not None:
            return (tag, t[1], x)
    return _max_min(t) or _fmax_fmin(t) or _cosh_or_sinh(t) or _odd_function(t)


def _odd_function(t):
    """peephole_odd's NumPy call for the Add or Select t (sign, arctan, arcsinh, cbrt, log1p),
    else None."""
    from .peephole_odd import odd_function  # (here, not above: it matches with this module's helpers)
    return odd_function(t)


TRUNC_EXACT_SQUARE = 2.0 ** 46  # the front end's |x| < 2^23 test, read as x * x < 2^46


def _trunc_arg(t):
    """x when t is where(x * x < 2^46, where(x * x < 1, x * 0, x - fmod(x, 1)), x), the front
    end's trunc, else None. np.trunc is that, signs of zeros included (trunc(-0.5) is -0.0)."""
    c, p, x = t[2], t[3], t[4]
    sq = ("Mul", t[1], x, x)
    if c[0] != "LessThan" or c[2] != sq or not _const(c[3], TRUNC_EXACT_SQUARE):
        return None
    if p[0] != "Select" or p[2][0] != "LessThan" or p[2][2] != sq or not _const(p[2][3], 1.0):
        return None
    if _split(p[3], "Mul", 0.0) != x or math.copysign(1.0, _other(p[3], "Mul", x)[1]) < 0:
        return None  # (x * -0.0 has the other sign)
    m = _other(p[4], "Add", x)
    f = _split(m, "Mul", -1.0) if m is not None else None
    if f is None or f[0] != "Mod" or f[2] != x or not _const(f[3], 1.0):
        return None
    return x


def _ties_give_the_second() -> bool:
    """Whether np.maximum / np.minimum return their second operand where the two compare equal
    (+0.0 and -0.0), as this NumPy does in its scalar and vector loops; a select keeps x there."""
    ok = True
    for d in (np.float32, np.float64):
        for n in (1, 67):
            pos, neg = np.zeros(n, d), np.full(n, -0.0, d)
            for a, b in ((pos, neg), (neg, pos), (d(0.0), neg), (pos, d(-0.0))):
                for f in (np.maximum, np.minimum):
                    ok &= bool((np.signbit(f(a, b)) == np.signbit(np.broadcast_to(b, (n,)))).all())
    return ok


TIES_GIVE_THE_SECOND = _ties_give_the_second()


def _max_min(t):
    """("np.maximum" / "np.minimum", d, y, x) when t is the front end's maximum(x, y) (where(x < y
    or isnan(y), y, x)) or minimum (y < x), the NaN test dropped only for a non-NaN literal y.
    NumPy's call takes the NaN either side, as the select does, and ties (+-0) go to x, its
    second operand here (checked once against this NumPy: else only a nonzero literal y, whose
    ties are the same bits)."""
    c, y, x = t[2], t[3], t[4]
    if t[1] not in ("float32", "float64"):
        return None
    value = literal_value(y)
    literal = value is not None and not math.isnan(value)
    if not literal:
        if c[0] != "Add" or c[1] != "bool":
            return None
        c, nan = (c[2], c[3]) if _is_nan_test(c[3], y) else (c[3], c[2])
        if not _is_nan_test(nan, y):
            return None
    if not TIES_GIVE_THE_SECOND and not (literal and value != 0.0):
        return None
    if c == ("LessThan", "bool", x, y):
        return ("np.maximum", t[1], y, x)
    if c == ("LessThan", "bool", y, x):
        return ("np.minimum", t[1], y, x)
    return None


def _fmax_fmin(t):
    """The front end's fmax(x, y), where(isnan(x), y, where(isnan(y), x, where(x < y, y, x))), as
    the one select where(x < y or isnan(x), y, x) (fmin: y < x), else None. The same value in
    every case (x NaN: y; y NaN: x; ties: x) in 6 passes for 12; np.fmax itself is not: which
    operand it returns at +-0 ties and for two NaNs varies with its loop."""
    d, nan_x, y, mid = t[1], t[2], t[3], t[4]
    if d not in ("float32", "float64") or mid[0] != "Select" or mid[1] != d:
        return None
    x, inner = mid[3], mid[4]
    if not (_is_nan_test(nan_x, x) and _is_nan_test(mid[2], y)):
        return None
    if inner[0] != "Select" or inner[3] != y or inner[4] != x:
        return None
    if inner[2] in (("LessThan", "bool", x, y), ("LessThan", "bool", y, x)):
        return ("Select", d, ("Add", "bool", inner[2], nan_x), y, x)
    return None


def _abs_arg(t):
    """x when the select t is the front end's absolute(x): where(x < 0, -x, x) for int32, and
    for floats where(x == 0, +0.0, that) (abs(-0.0) is +0.0), else None. np.abs is that, and
    clears a NaN's sign bit as NumPy's own abs does (the select keeps it)."""
    if t[1] == "int32":
        return _negated_below_zero(t)
    if t[1] not in ("float32", "float64") or not _const(t[3], 0.0) or math.copysign(1.0, t[3][1]) < 0:
        return None
    x = _negated_below_zero(t[4])
    return x if x is not None and _is_equal_test(t[2], x, 0.0) else None


def _is_number(t, value) -> bool:
    """t is the constant ``value`` (a float constant close to it, an int32 one equal to it)."""
    return _const(t, float(value)) or (t[0] == "const" and t[2] == "int32" and t[1] == value)


def _less(t, a, b) -> bool:
    """t is a < b, where a number stands for a constant of that value and a tuple for itself."""
    if t[0] != "LessThan":
        return False
    return all(_is_number(u, w) if isinstance(w, (int, float)) else u == w
               for u, w in ((t[2], a), (t[3], b)))


def _negated_below_zero(t):
    """x when t is where(x < 0, x * -1, x), else None."""
    if t[0] != "Select" or t[2][0] != "LessThan":
        return None
    x = t[2][2]
    if not _less(t[2], x, 0) or t[4] != x or t[3][0] != "Mul" or t[3][2] != x or not _is_number(t[3][3], -1):
        return None
    return x


def _is_equal_test(c, x, value: float) -> bool:
    """c is the front end's equal(x, value) for a float x and a finite literal value: not
    (x < value or value < x), and x < inf (NaN compares false both ways)."""
    for p, q in _operands(c, "Mul", "bool"):
        if _less(q, x, math.inf) and p[0] == "np.not":
            if any(_less(lo, x, value) and _less(hi, value, x) for lo, hi in _operands(p[2], "Add", "bool")):
                return True
    return False


def _operands(t, tag, d):
    """Both orders of a commutative (tag, d, a, b)'s operands; none when t is not one."""
    if t[0] != tag or t[1] != d:
        return ()
    return ((t[2], t[3]), (t[3], t[2]))


def _rint_arg(t):
    """x when the select t is the front end's rint(x), else None: with f = floor(x) and
    diff = x - f, r = f + (diff > 0.5 or (diff == 0.5 and fmod(f, 2) != 0)), then
    where(r == 0, x * 0, r) (a zero keeps x's sign). np.rint is that: half to even."""
    d = t[1]
    if d not in ("float32", "float64") or not _is_equal_test(t[2], t[4], 0.0):
        return None
    for f, bump in _operands(t[4], "Add", d):
        if f[0] != "np.floor" or bump[0] != "Cast" or bump[1] != d:
            continue
        x = f[2]
        if _split(t[3], "Mul", 0.0) == x and _is_rint_bump(bump[2], x, f):
            return x
    return None


def _is_rint_bump(b, x, f) -> bool:
    """b is diff > 0.5 or (diff == 0.5 and not fmod(f, 2) == 0), diff = x - f."""
    for up, tie_odd in _operands(b, "Add", "bool"):
        diff = up[3] if up[0] == "LessThan" and _const(up[2], 0.5) else None
        minus_f = _other(diff, "Add", x)  # diff is x + f * -1
        if minus_f is None or _split(minus_f, "Mul", -1.0) != f:
            continue
        for tie, odd in _operands(tie_odd, "Mul", "bool"):
            if _is_equal_test(tie, diff, 0.5) and odd[0] == "np.not" and _is_even_test(odd[2], f):
                return True
    return False


def _is_even_test(c, f) -> bool:
    """c is equal(fmod(f, 2), 0)."""
    for _, q in _operands(c, "Mul", "bool"):
        mod = q[2] if q[0] == "LessThan" else None
        if mod is not None and mod[0] == "Mod" and mod[2] == f and _const(mod[3], 2.0):
            return _is_equal_test(c, mod, 0.0)
    return False


def _cosh_or_sinh(t):
    """("np.cosh" / "np.sinh", d, x) when the select t is the front end's cosh(x) or sinh(x),
    else None. With a = |x|, both are where(88 < a, exp(a/2) / 2 * exp(a/2), small): cosh's
    small is (e + 1/e) / 2 with e = exp(a); sinh's magnitude r has (e + e / (e + 1)) / 2 with
    e = expm1(a), and its sign is copysign's, where(signbit(x), -|r|, |r|)."""
    d = t[1]
    if d not in ("float32", "float64"):
        return None
    x = _two_sided_arg(t, _is_cosh_small)
    if x is not None:
        return "np.cosh", d, x
    r = t[4]
    if r[0] != "np.abs" or _split(t[3], "Mul", -1.0) != r:
        return None
    x = _two_sided_arg(r[2], _is_sinh_small)
    return ("np.sinh", d, x) if x is not None and _is_signbit_test(t[2], x) else None


def _two_sided_arg(t, small_ok):
    """x when t is where(88 < |x|, exp(|x|/2) / 2 * exp(|x|/2), small) and small_ok(small, |x|)."""
    if t[0] != "Select" or t[2][0] != "LessThan" or not _const(t[2][2], 88.0) or t[2][3][0] != "np.abs":
        return None
    a, d = t[2][3], t[1]
    for p, h in _operands(t[3], "Mul", d):
        if (h[0] == "np.exp" and _split(h[2], "Mul", 0.5) == a and _split(p, "Mul", 0.5) == h
                and small_ok(t[4], a)):
            return a[2]
    return None


def _half_of_sum(t, first, second_ok) -> bool:
    """t is (first + s) * 0.5 with second_ok(s)."""
    s = _split(t, "Mul", 0.5)
    q = _other(s, "Add", first)
    return q is not None and second_ok(q)


def _is_cosh_small(t, a) -> bool:
    """t is (e + 1 / e) / 2 with e = exp(a)."""
    e = ("np.exp", t[1], a)
    return _half_of_sum(t, e, lambda q: q == ("Recip", t[1], e))


def _is_sinh_small(t, a) -> bool:
    """t is (e + e / (e + 1)) / 2 with e = expm1(a)."""
    d = t[1]
    e = ("np.expm1", d, a)

    def over_e_plus_1(q):  # e * recip(e + 1)
        r = _other(q, "Mul", e)
        return r is not None and r[0] == "Recip" and _split(r[2], "Add", 1.0) == e

    return _half_of_sum(t, e, over_e_plus_1)


def _is_signbit_test(c, x) -> bool:
    """c is the front end's signbit(x): x < 0, or x == 0 and 1 / x < 0 (or np.signbit(x), its
    form after a first rewrite)."""
    if c == ("np.signbit", "bool", x):
        return True

    def reciprocal_below_zero(t):
        return t[0] == "LessThan" and t[2][0] == "Recip" and t[2][2] == x and _const(t[3], 0.0)

    return any(_less(below, x, 0.0) and any(_is_equal_test(eq, x, 0.0) and reciprocal_below_zero(neg)
                                            for eq, neg in _operands(zero, "Mul", "bool"))
               for below, zero in _operands(c, "Add", "bool"))


def _is_nan_test(c, y) -> bool:
    """c is the front end's isnan(y): not (y < inf) and not (-inf < y) (or np.isnan(y))."""
    if c == ("np.isnan", "bool", y):
        return True

    def not_less(t, a, b):  # not (a < b), a or b the constant given, the other y
        if t[0] != "np.not" or t[2][0] != "LessThan":
            return False
        lhs, rhs = t[2][2], t[2][3]
        return (lhs == y and _const(rhs, b)) if a is None else (rhs == y and _const(lhs, a))

    if c[0] != "Mul" or c[1] != "bool":
        return False
    return any(not_less(p, None, math.inf) and not_less(q, -math.inf, None)
               for p, q in ((c[2], c[3]), (c[3], c[2])))


def _floor_arg(t):
    """x when the select t is where(x < trunc(x), trunc(x) - 1, trunc(x)), the front end's
    floor, else None."""
    c, below, tr = t[2], t[3], t[4]
    if tr[0] != "np.trunc" or c != ("LessThan", "bool", tr[2], tr) or _split(below, "Add", -1.0) != tr:
        return None
    return tr[2]


def _bool_of_int(t):
    """b when t is Cast(int32, b) of a bool b, else None."""
    return t[2] if t[0] == "Cast" and t[1] == "int32" and t[2][1] == "bool" else None


def _boolean(t):
    """The front end's logic in int32 (not b: int(b) < 1; a and b: bool(int(a) * int(b)); a or
    b: 0 < int(a) + int(b)) as NumPy's boolean ops, else None: one pass each instead of three."""
    tag, d = t[0], t[1]
    if tag == "LessThan":
        a, b = t[2], t[3]
        x = _bool_of_int(a)
        if x is not None and b == ("const", 1, "int32"):
            return x[2] if x[0] == "np.not" else ("np.not", "bool", x)
        if a == ("const", 0, "int32"):
            x = _bool_of_int(b)
            if x is not None:
                return x  # 0 < int(x)
            if b[0] == "Add" and b[1] == "int32":
                p, q = _bool_of_int(b[2]), _bool_of_int(b[3])
                if p is not None and q is not None:
                    return ("Add", "bool", p, q)
    if tag == "Cast" and d == "bool":
        a = t[2]
        if a[1] == "bool":
            return a
        if a[0] == "Mul" and a[1] == "int32":
            p, q = _bool_of_int(a[2]), _bool_of_int(a[3])
            if p is not None and q is not None:
                return ("Mul", "bool", p, q)
    return None

"""Symbolic integer expressions over named dims (``s``, ``c``...) and the index variable ``z``.

Expressions are hash-consed: building the same expression twice returns the same object, so
``is``/``==`` comparisons and dict lookups are cheap. Sums and products are kept in a canonical
polynomial form at construction time, which is what makes shape arithmetic such as
``(s * 64) // 64 -> s`` or ``z * 2 + z -> 3 * z`` simplify without a separate pass.

Semantics follow Python: ``//`` and ``%`` floor. Rendered C assumes non-negative operands for
``/`` and ``%`` (index arithmetic is non-negative by construction).
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Union

IntLike = Union[int, "Expr"]

_INTERN: dict = {}
_CMP_OPS = ("lt", "le", "eq", "ne")


class Expr:
    """An immutable, interned symbolic integer expression."""

    __slots__ = ("op", "args", "_hash", "_py", "__weakref__")

    def __new__(cls, op: str, args: tuple):
        key = (op, args)
        hit = _INTERN.get(key)
        if hit is not None:
            return hit
        self = object.__new__(cls)
        self.op = op
        self.args = args
        self._hash = hash(key)
        self._py = None
        _INTERN[key] = self
        return self

    # ---- identity -------------------------------------------------------------------------
    def __hash__(self):
        return self._hash

    def __eq__(self, other):  # structural equality is identity because of interning
        if isinstance(other, Expr):
            return self is other
        if isinstance(other, (int, bool)):
            return self.op == "const" and self.args[0] == int(other)
        return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __reduce__(self):
        return (_rebuild, (self.op, self.args))

    # ---- queries --------------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return self.op == "const"

    @property
    def value(self) -> int:
        if self.op != "const":
            raise ValueError(f"expression {self} is not a constant")
        return self.args[0]

    def free_symbols(self) -> frozenset:
        if self.op == "var":
            return frozenset((self.args[0],))
        if self.op == "const":
            return frozenset()
        out = frozenset()
        for a in self.args:
            if isinstance(a, Expr):
                out |= a.free_symbols()
        return out

    # ---- arithmetic -----------------------------------------------------------------------
    def __add__(self, o):
        return add(self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return add(self, mul(o, -1))

    def __rsub__(self, o):
        return add(o, mul(self, -1))

    def __mul__(self, o):
        return mul(self, o)

    __rmul__ = __mul__

    def __neg__(self):
        return mul(self, -1)

    def __floordiv__(self, o):
        return floordiv(self, o)

    def __rfloordiv__(self, o):
        return floordiv(o, self)

    def __mod__(self, o):
        return mod(self, o)

    def __rmod__(self, o):
        return mod(o, self)

    def __lt__(self, o):
        return compare("lt", self, o)

    def __le__(self, o):
        return compare("le", self, o)

    def __gt__(self, o):
        return compare("lt", o, self)

    def __ge__(self, o):
        return compare("le", o, self)

    def __bool__(self):
        if self.op == "const":
            return bool(self.args[0])
        raise TypeError(
            f"the symbolic expression {self} has no truth value until its dims are known; "
            "compare dims with luminal_fn.ir.expr helpers or make the axis static"
        )

    def __int__(self):
        if self.op == "const":
            return self.args[0]
        raise TypeError(f"the symbolic dim {self} has no concrete value at trace time")

    __index__ = __int__

    # ---- evaluation and rendering ---------------------------------------------------------
    def evaluate(self, dims: Mapping[str, int], z: int | None = None) -> int:
        """Value of the expression given concrete dims (and the index variable ``z``)."""
        fn = self._py
        if fn is None:
            fn = self._py = compile_py(self)
        env = dims if z is None else {**dims, "z": z}
        try:
            return fn(env)
        except KeyError as e:
            raise KeyError(f"dim {e.args[0]!r} needed to evaluate {self} is not bound") from None

    def __repr__(self):
        return render(self, "py")

    __str__ = __repr__


def _rebuild(op, args):
    return Expr(op, args)


def const(v: int) -> Expr:
    return Expr("const", (int(v),))


def var(name: str) -> Expr:
    return Expr("var", (name,))


Z = var("z")


def as_expr(x: IntLike) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return const(int(x))
    if isinstance(x, int):
        return const(x)
    try:
        import numpy as _np

        if isinstance(x, _np.integer):
            return const(int(x))
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"expected an int or a symbolic dim, got {type(x).__name__}: {x!r}")


def to_int_or_expr(x: IntLike) -> IntLike:
    """Plain int when the expression is constant, else the expression (used for shapes)."""
    e = as_expr(x)
    return e.args[0] if e.op == "const" else e


# ---- polynomial normal form -------------------------------------------------------------------
# A polynomial is {monomial: coefficient}; a monomial is a sorted tuple of atom expressions
# (vars and non-polynomial nodes such as floordiv or min). The constant term has monomial ().


def _sort_key(e: Expr):
    return (e.op, repr(e.args))


def _to_poly(e: Expr) -> dict:
    if e.op == "const":
        return {(): e.args[0]} if e.args[0] else {}
    if e.op == "add":
        out: dict = {}
        for a in e.args:
            for m, c in _to_poly(a).items():
                out[m] = out.get(m, 0) + c
        return {m: c for m, c in out.items() if c}
    if e.op == "mul":
        coeff, atoms = 1, []
        for a in e.args:
            if a.op == "const":
                coeff *= a.args[0]
            else:
                atoms.append(a)
        return {tuple(sorted(atoms, key=_sort_key)): coeff} if coeff else {}
    return {(e,): 1}


def _from_poly(p: dict) -> Expr:
    terms = []
    for mono, c in sorted(p.items(), key=lambda mc: [_sort_key(a) for a in mc[0]]):
        if c == 0:
            continue
        if not mono:
            terms.append(const(c))
        elif c == 1 and len(mono) == 1:
            terms.append(mono[0])
        else:
            args = tuple(mono) if c == 1 else (const(c),) + tuple(mono)
            terms.append(Expr("mul", args))
    if not terms:
        return const(0)
    if len(terms) == 1:
        return terms[0]
    # constant last so that "s + 1" reads naturally
    terms.sort(key=lambda t: (t.op == "const",))
    return Expr("add", tuple(terms))


def _poly_mul(a: dict, b: dict) -> dict:
    out: dict = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb, key=_sort_key))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def add(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.op == "const" and b.op == "const":
        return const(a.args[0] + b.args[0])
    p = _to_poly(a)
    for m, c in _to_poly(b).items():
        p[m] = p.get(m, 0) + c
    return _from_poly({m: c for m, c in p.items() if c})


def mul(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.op == "const" and b.op == "const":
        return const(a.args[0] * b.args[0])
    return _from_poly(_poly_mul(_to_poly(a), _to_poly(b)))


def _const_content(p: dict) -> int:
    g = 0
    for c in p.values():
        g = math.gcd(g, c)
    return g


def floordiv(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b.op == "const":
        d = b.args[0]
        if d == 0:
            raise ZeroDivisionError(f"symbolic floor division of {a} by zero")
        if a.op == "const":
            return const(a.args[0] // d)
        if d == 1:
            return a
        if d > 0:
            # floor((d*q + r) / d) == q + floor(r / d) for integer q: split off the divisible part
            p = _to_poly(a)
            div = {m: c // d for m, c in p.items() if c % d == 0}
            rest = {m: c for m, c in p.items() if c % d != 0}
            if div:
                base = _from_poly(div)
                return add(base, floordiv(_from_poly(rest), b)) if rest else base
            if a.op == "floordiv" and a.args[1].op == "const" and a.args[1].args[0] > 0:
                return floordiv(a.args[0], a.args[1].args[0] * d)
    if a == b:
        return const(1)
    return Expr("floordiv", (a, b))


def ceildiv(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.op == "const" and b.op == "const":
        return const(-(-a.args[0] // b.args[0]))
    if b.op == "const" and b.args[0] == 1:
        return a
    if b.op == "const" and b.args[0] > 0:
        p = _to_poly(a)
        d = b.args[0]
        if all(c % d == 0 for c in p.values()):
            return _from_poly({m: c // d for m, c in p.items()})
    return floordiv(add(a, add(b, -1)), b)


def mod(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b.op == "const":
        d = b.args[0]
        if d == 0:
            raise ZeroDivisionError(f"symbolic modulo of {a} by zero")
        if a.op == "const":
            return const(a.args[0] % d)
        if d == 1:
            return const(0)
        if d > 0:
            p = _to_poly(a)
            rest = {m: c % d for m, c in p.items() if c % d}
            if len(rest) != len(p) or any(rest[m] != p[m] for m in rest):
                return mod(_from_poly(rest), b)
            if a.op == "mod" and a.args[1] == b:
                return a
    if a == b:
        return const(0)
    return Expr("mod", (a, b))


def minimum(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.op == "const" and b.op == "const":
        return const(min(a.args[0], b.args[0]))
    if a is b:
        return a
    diff = add(a, mul(b, -1))
    if diff.op == "const":
        return a if diff.args[0] <= 0 else b
    if b.op == "min" and any(a == x for x in b.args):  # min(a, min(a, y)) = min(a, y)
        return b
    if a.op == "min" and any(b == x for x in a.args):
        return a
    if (a.op == "const" and a.args[0] <= 0 and nonnegative(b)) or (
            b.op == "const" and b.args[0] <= 0 and nonnegative(a)):
        return a if a.op == "const" else b
    return Expr("min", tuple(sorted((a, b), key=_sort_key)))


def maximum(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.op == "const" and b.op == "const":
        return const(max(a.args[0], b.args[0]))
    if a is b:
        return a
    diff = add(a, mul(b, -1))
    if diff.op == "const":
        return a if diff.args[0] >= 0 else b
    if b.op == "max" and any(a == x for x in b.args):  # max(a, max(a, y)) = max(a, y)
        return b
    if a.op == "max" and any(b == x for x in a.args):
        return a
    if (a.op == "const" and a.args[0] <= 0 and nonnegative(b)) or (
            b.op == "const" and b.args[0] <= 0 and nonnegative(a)):
        return b if a.op == "const" else a  # max(0, n) of a size n is n
    return Expr("max", tuple(sorted((a, b), key=_sort_key)))


def nonnegative(e: Expr) -> bool:
    """Provably >= 0. Variables are sizes and the index variable, never negative."""
    op = e.op
    if op == "const":
        return e.args[0] >= 0
    if op == "var":
        return True
    if op in ("add", "mul", "min", "floordiv", "mod"):
        return all(nonnegative(x) for x in e.args)
    if op == "max":
        return any(nonnegative(x) for x in e.args)
    return op in ("lt", "le", "eq", "ne")  # comparisons are 0 or 1


_PY_CMP = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
           "eq": lambda x, y: x == y, "ne": lambda x, y: x != y}


def compare(op: str, a: IntLike, b: IntLike) -> Expr:
    """A 0/1-valued comparison expression."""
    a, b = as_expr(a), as_expr(b)
    diff = add(a, mul(b, -1))
    if diff.op == "const":
        return const(int(_PY_CMP[op](diff.args[0], 0)))
    return Expr(op, (a, b))


def substitute(e: Expr, mapping: Mapping[str, IntLike]) -> Expr:
    """Replace variables by expressions (or ints); rebuilds through the simplifying builders."""
    if e.op == "var":
        return as_expr(mapping[e.args[0]]) if e.args[0] in mapping else e
    if e.op == "const":
        return e
    args = [substitute(a, mapping) for a in e.args]
    return _BUILD[e.op](*args)


def _add_all(*xs):
    out = const(0)
    for x in xs:
        out = add(out, x)
    return out


def _mul_all(*xs):
    out = const(1)
    for x in xs:
        out = mul(out, x)
    return out


_BUILD: dict[str, Callable] = {
    "add": _add_all, "mul": _mul_all, "floordiv": floordiv, "mod": mod,
    "min": minimum, "max": maximum,
    **{op: (lambda o: (lambda x, y: compare(o, x, y)))(op) for op in _CMP_OPS},
}


# ---- rendering ---------------------------------------------------------------------------------
_C_CMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!="}


def render(e: IntLike, lang: str = "py", names: Mapping[str, str] | None = None) -> str:
    """Render as source text: ``"py"`` (Python ints), ``"np"`` (NumPy arrays allowed for
    variables), ``"c"`` (C/CUDA/Metal integer code). ``names`` maps variables to source names."""
    e = as_expr(e)
    op, args = e.op, e.args
    if op == "const":
        v = args[0]
        return f"({v})" if v < 0 else str(v)
    if op == "var":
        return names.get(args[0], args[0]) if names else args[0]
    r = [render(a, lang, names) for a in args]
    if op == "add":
        s = r[0]
        for a, t in zip(args[1:], r[1:]):
            if a.op == "const" and a.args[0] < 0:
                s += f" - {-a.args[0]}"
            else:
                s += f" + {t}"
        return f"({s})"
    if op == "mul":
        return "(" + " * ".join(r) + ")"
    if op in ("floordiv", "mod") and lang == "c" and not nonnegative(args[0]):
        # C's / and % truncate toward zero; these are Python's (and NumPy's) floored forms, for
        # the positive divisors dims give (a possibly negative numerator: a roll's shift)
        a, b = r
        m = f"((({a} % {b}) + {b}) % {b})"
        return m if op == "mod" else f"(({a} - {m}) / {b})"
    if op == "floordiv":
        return f"({r[0]} / {r[1]})" if lang == "c" else f"({r[0]} // {r[1]})"
    if op == "mod":
        return f"({r[0]} % {r[1]})"
    if op in ("min", "max"):
        if lang == "np":
            return f"np.{op}imum({r[0]}, {r[1]})"
        return f"{op}({r[0]}, {r[1]})"
    if op in _C_CMP:
        if lang == "np":
            return f"({r[0]} {_C_CMP[op]} {r[1]}).astype(np.int64)"
        if lang == "c":
            return f"(int)({r[0]} {_C_CMP[op]} {r[1]})"
        return f"int({r[0]} {_C_CMP[op]} {r[1]})"
    raise ValueError(f"cannot render expression op {op}")


def compile_py(e: Expr) -> Callable[[Mapping[str, int]], int]:
    """A Python function env -> value for the expression (built once per expression)."""
    return py_function(py_source(e))


def py_source(x: IntLike) -> str:
    """Python source of an int or expression reading its dims from a mapping named ``_d``
    (for generated functions that evaluate many expressions of one call's dims at once)."""
    if isinstance(x, int):
        return str(x)
    return render(x, "py", {s: f"_d[{s!r}]" for s in sorted(x.free_symbols())})


def py_function(body: str) -> Callable[[Mapping[str, int]], object]:
    """``lambda _d: body``: ``body`` Python source built from ``py_source`` pieces."""
    return eval(f"lambda _d: {body}", {"min": min, "max": max, "int": int})  # noqa: S307


def py_tuple_source(xs) -> str:
    """Python source of the tuple of ``xs`` (ints and expressions), as ``py_source``."""
    return "(" + "".join(f"{py_source(x)}, " for x in xs) + ")"


def compile_py_tuple(xs) -> Callable[[Mapping[str, int]], tuple]:
    """A function env -> the tuple of ``xs`` (ints and expressions) evaluated, generated once."""
    return py_function(py_tuple_source(xs))


def compile_np(e: Expr) -> Callable:
    """A function env -> value where env values may be NumPy integer arrays (used for iota)."""
    import numpy as np

    syms = sorted(e.free_symbols())
    names = {s: f"_d[{s!r}]" for s in syms}
    src = render(e, "np", names)
    return eval(f"lambda _d: {src}", {"np": np})


def coordinate_axis(e: Expr):
    """For an iota expression (z // stride) % size (either part may be absent): a function
    (shape, dims) -> the axis of the row-major ``shape`` whose coordinate it is at the flat
    index z (None when no axis fits); None when the expression is not of that form. Backends
    then build one row along that axis instead of the expression over every element."""
    e, size, stride = as_expr(e), None, None
    if e.op == "mod":
        e, size = e.args
    if e.op == "floordiv":
        e, stride = e.args
    if e.op != "var" or e.args[0] != "z" or (size is None and stride is None):
        return None

    def axis_of(shape, dims):
        s = evaluate(stride, dims) if stride is not None else 1
        m = evaluate(size, dims) if size is not None else None
        inner = 1
        for axis in range(len(shape) - 1, -1, -1):
            if inner == s and (shape[axis] == m or (m is None and axis == 0)):
                return axis
            inner *= shape[axis]
        return None

    return axis_of


def evaluate(x: IntLike, dims: Mapping[str, int]) -> int:
    if isinstance(x, int):
        return x
    return x.evaluate(dims)


def prod(xs) -> IntLike:
    out: IntLike = 1
    for x in xs:
        out = out * x if isinstance(out, Expr) or isinstance(x, Expr) else out * x
    return to_int_or_expr(out)


def same(a: IntLike, b: IntLike) -> bool:
    """True when two dims are provably equal (after simplification)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return as_expr(a) is as_expr(b)

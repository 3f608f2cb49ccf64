"""Random int32/bool programs for tests/test_program_fuzz.py: exact results, bit for bit.

The float fuzz (program_gen.py) judges values within a tolerance and keeps integers small. Here
every value is an int32 or a bool, the inputs are small integers or the whole int32 range, and
the jitted result must equal NumPy's on int32 exactly, wraparound included (NumPy's int32
arithmetic wraps; so must ours). Where NumPy widens to int64 (sum, cumsum, prod, argmax,
count_nonzero) both sides ask for int32.
"""
from __future__ import annotations

import numpy as np

import program_gen as pg
from program_gen import _broadcasts, _matmuls, _partner, draw_steps

KINDS = ("arith", "const", "bits", "shift", "unary", "compare", "logic", "where", "reduce",
         "boolreduce", "argmax", "cumsum", "cummax", "reshape", "transpose", "slice", "flip",
         "roll", "pad", "concat", "tile", "repeat", "sort", "argsort", "take", "take_along",
         "scatter", "matmul", "astype", "clip", "onehot", "triu", "broadcast")
SHARED = ("reshape", "transpose", "slice", "flip", "roll", "concat", "tile", "repeat", "triu",
          "broadcast", "sort")  # drawn and run by program_gen, for any dtype
ARITH = ("add", "sub", "mul", "max", "min", "floordiv", "mod", "pow")
CONSTS = (1, 2, 3, -3, 7, 16, -64, 1000003, 2**24 + 1, -2**30)


def _i32(xp):
    return np.int32 if xp is np else xp.int32


def _pick(rng, kind, i, pool):
    x = pool[i]
    nd, isint = x.ndim, x.dtype != np.bool_
    ax = int(rng.integers(nd)) if nd else None
    both = lambda y: _broadcasts(x.shape, y.shape)  # noqa: E731
    ints = lambda y: y.dtype != np.bool_ and both(y)  # noqa: E731
    if nd == 0 and kind not in ("arith", "const", "bits", "shift", "unary", "compare", "logic",
                                "where", "astype", "clip", "broadcast"):
        return None
    if kind in ("arith", "bits", "compare") and isint:
        ops = {"arith": ARITH, "bits": ("and", "or", "xor"), "compare": ("lt", "le", "eq", "ne")}[kind]
        return (_partner(rng, pool, ints), str(rng.choice(ops)))
    if kind == "const" and isint:
        return (str(rng.choice(("add", "mul", "floordiv", "mod", "and", "or", "xor"))),
                int(rng.choice(CONSTS)))
    if kind == "shift" and isint:
        return (str(rng.choice(("left", "right"))), int(rng.choice([0, 1, 3, 8, 31, 33])),
                bool(rng.integers(2)))
    if kind == "unary" and isint:
        return (str(rng.choice(("neg", "abs", "sign", "square", "invert"))),)
    if kind == "logic":
        return (_partner(rng, pool, lambda y: y.dtype == np.bool_ and both(y)),
                str(rng.choice(("and", "or", "xor", "not")))) if not isint else None
    if kind == "where":
        c = _partner(rng, pool, lambda y: y.dtype == np.bool_ and both(y))
        return (c, _partner(rng, pool, lambda y: y.dtype == x.dtype and both(y)))
    if kind == "reduce" and isint:
        return (str(rng.choice(("sum", "max", "min", "prod"))), int(rng.integers(-nd, nd)),
                bool(rng.integers(2)))
    if kind == "boolreduce":
        return (str(rng.choice(("any", "all", "count"))), ax)
    if kind in ("argmax", "cumsum", "cummax", "argsort") and (isint or kind == "argmax"):
        return (ax,)
    if kind in SHARED:  # views and sorts: program_gen's parameters, a concat partner of x's dtype
        params = pg._pick(rng, kind, i, pool)
        if kind == "concat" and params[0] is not None and pool[params[0]].dtype != x.dtype:
            return None
        return params
    if kind == "pad":
        return (tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(nd)),
                int(rng.choice([0, -7, 2**31 - 1])))
    if kind in ("take", "take_along"):
        return (ax,)
    if kind == "scatter" and isint:
        n = x.shape[0]
        rows = tuple(int(v) for v in rng.integers(-n, n, size=int(rng.integers(1, min(n, 3) + 1))))
        return (rows, str(rng.choice(["set", "add", "max", "min", "multiply"])))
    if kind == "matmul" and isint:
        j = _partner(rng, pool, lambda y: y.dtype != np.bool_ and _matmuls(x.shape, y.shape))
        return (j,)
    if kind == "astype":
        return (str(rng.choice(("bool", "int", "via_float"))),)
    if kind == "clip" and isint:
        lo = int(rng.integers(-50, 10))
        return (lo, lo + int(rng.integers(0, 60)))
    if kind == "onehot" and isint:
        return (int(rng.integers(2, 6)),)
    return None


def apply(xp, step, pool):
    kind, i, *p = step
    x, i32 = pool[i], _i32(xp)
    if kind in SHARED:
        return pg.apply(xp, step, pool)
    if kind in ("arith", "bits", "compare"):
        y, how = pool[p[0]], p[1]
        return {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                "max": lambda: xp.maximum(x, y), "min": lambda: xp.minimum(x, y),
                "floordiv": lambda: x // y, "mod": lambda: x % y, "pow": lambda: x ** (y % 16), "and": lambda: x & y,
                "or": lambda: x | y, "xor": lambda: x ^ y, "lt": lambda: x < y,
                "le": lambda: x <= y, "eq": lambda: x == y, "ne": lambda: x != y}[how]()
    if kind == "const":
        how, c = p
        return {"add": lambda: x + c, "mul": lambda: x * c, "floordiv": lambda: x // c,
                "mod": lambda: x % c, "and": lambda: x & c, "or": lambda: c | x,
                "xor": lambda: x ^ c}[how]()
    if kind == "shift":
        how, k, by_array = p
        kk = xp.full_like(x, k) if by_array else k
        return (x << kk) if how == "left" else (x >> kk)
    if kind == "unary":
        return {"neg": lambda: -x, "abs": lambda: xp.abs(x), "sign": lambda: xp.sign(x),
                "square": lambda: x * x, "invert": lambda: ~x}[p[0]]()
    if kind == "logic":
        if p[1] == "not":
            return ~x
        y = pool[p[0]]
        return {"and": lambda: x & y, "or": lambda: x | y, "xor": lambda: x ^ y}[p[1]]()
    if kind == "where":
        return xp.where(pool[p[0]], x, pool[p[1]])
    if kind == "reduce":
        how, axis, keep = p
        if how in ("sum", "prod"):
            return getattr(xp, how)(x, axis=axis, keepdims=keep, dtype=i32)
        return getattr(xp, how)(x, axis=axis, keepdims=keep)
    if kind == "boolreduce":
        how, axis = p
        if how == "count":
            return xp.count_nonzero(x, axis=axis).astype(i32)
        return getattr(xp, how)(x, axis=axis)
    if kind == "argmax":
        return xp.argmax(x, axis=p[0]).astype(i32)
    if kind == "cumsum":
        return xp.cumsum(x, axis=p[0], dtype=i32)
    if kind == "cummax":
        return np.maximum.accumulate(x, axis=p[0]) if xp is np else xp.cummax(x, axis=p[0])
    if kind == "argsort":
        return xp.argsort(x, axis=p[0], kind="stable").astype(i32)
    if kind == "pad":
        value = p[1] if x.dtype != np.bool_ and getattr(x.dtype, "name", "") != "bool" else bool(p[1])
        return xp.pad(x, p[0], constant_values=value)
    if kind in ("take", "take_along"):
        axis = p[0]
        idx = xp.abs(x.astype(i32) % 7) % x.shape[axis]
        if kind == "take_along":
            return xp.take_along_axis(x, idx, axis=axis)
        return xp.take(x, xp.reshape(idx, (-1,))[:5], axis=axis)
    if kind == "scatter":
        rows, how = p
        upd = x[:len(rows)] * 3 - 1
        if xp is np:
            out = x.copy()
            if how == "set":
                out[np.array(rows)] = upd
            else:
                getattr(np, {"add": "add", "max": "maximum", "min": "minimum",
                             "multiply": "multiply"}[how]).at(out, np.array(rows), upd)
            return out
        return getattr(x.at[xp.asarray(np.array(rows, np.int32))], how)(upd)
    if kind == "matmul":
        return xp.matmul(x, pool[p[0]])
    if kind == "astype":
        if p[0] == "bool":
            return x.astype(xp.bool_)
        if p[0] == "int":
            return x.astype(i32)
        # int -> float32 -> int: exact below 2^24, the nearest float32 above (ties to even);
        # clipped first, as 2^31 has no int32
        return xp.clip(x, -2**30, 2**30).astype(xp.float32).astype(i32) if x.dtype != np.bool_ else x.astype(i32)
    if kind == "clip":
        return xp.clip(x, p[0], p[1])
    if kind == "onehot":
        return (xp.abs(x % p[0]))[..., None] == xp.arange(p[0])
    raise KeyError(kind)


class IntProgram(pg.Program):
    """Like program_gen.Program, over int32 and bool values compared exactly."""

    apply_step = staticmethod(apply)

    def __init__(self, seed: int, n_steps: int = 10):
        rng = np.random.default_rng(seed)
        self.seed = seed
        n_in = int(rng.integers(1, 4))
        self.shapes = [tuple(int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 4))))
                       for _ in range(n_in)]
        self.kinds = [str(rng.choice(["small", "wide", "bool"], p=[0.5, 0.3, 0.2])) for _ in range(n_in)]
        pool = self.inputs()
        self.steps = draw_steps(rng, pool, KINDS, _pick, apply, n_steps)
        made = list(range(n_in, len(pool))) or [0]
        self.outputs = sorted({int(v) for v in rng.choice(made, size=min(2, len(made)))})

    def inputs(self, lead=None) -> list:
        """The inputs (the first one's axis 0 of length ``lead`` when given)."""
        r = np.random.default_rng([self.seed, 7] if lead is None else [self.seed, 7, lead])
        out = []
        shapes = [((lead,) + s[1:]) if (lead is not None and j == 0) else s
                  for j, s in enumerate(self.shapes)]
        for s, k in zip(shapes, self.kinds):
            if k == "bool":
                out.append(r.random(s) < 0.5)
            elif k == "wide":  # the whole range, and a few of its ends
                a = r.integers(-2**31, 2**31, s).astype(np.int32)
                a.flat[r.integers(0, a.size, size=max(1, a.size // 4))] = r.choice(
                    np.array([-2**31, 2**31 - 1, -1, 0], np.int32), size=max(1, a.size // 4))
                out.append(a)
            else:
                out.append(r.integers(-20, 21, s).astype(np.int32))
        return out

    def reference(self, inputs) -> tuple:
        with np.errstate(all="ignore"):
            return self.run(np, inputs)

    def __repr__(self):
        return (f"IntProgram(seed={self.seed}: inputs {list(zip(self.shapes, self.kinds))}, "
                f"steps {self.steps}, outputs {self.outputs})")


def assert_exact(got, want, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} results, the reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what}: result {k} has shape {g.shape}, the reference {w.shape}"
        assert g.dtype == w.dtype, f"{what}: result {k} is {g.dtype}, the reference {w.dtype}"
        bad = np.flatnonzero(g.ravel() != w.ravel())
        assert bad.size == 0, (f"{what}: result {k} differs at {bad.size} of {g.size}, e.g. got "
                               f"{g.ravel()[bad[:3]]}, want {w.ravel()[bad[:3]]}")

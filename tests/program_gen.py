"""Random array programs for tests/test_program_fuzz.py.

A program is a list of steps over a pool of arrays: the inputs first, then each step's result.
A step names an op and fixed parameters (pool positions, axes, shapes, literal indices), and runs
the same way over NumPy (``xp=np``, the float64 reference) and over ``luminal_fn.numpy`` inside a
jitted function. Shapes are drawn small (1-5 a dim, at most 3 dims at the inputs) so that one
program compiles in well under a second; a step whose NumPy run raises, or whose result is empty
or large, is drawn again.

Steps avoid what a float32-vs-float64 comparison cannot judge: no value flows through a rounding
that a last-bit difference could flip (indices and integer math start from ``floor`` of a scaled
input, so a flip needs an input within one float32 ulp of a boundary: none in these seeds), and
sorts are stable with the same tie order in both.
"""
from __future__ import annotations

import numpy as np

KINDS = ("unary", "binary", "reduce", "reshape", "transpose", "slice", "concat", "matmul",
         "where", "pad", "flip", "broadcast", "take", "cumsum", "softmax", "expand", "roll", "tile",
         "argmax", "repeat", "clip", "triu", "intmath", "boolmath", "gather", "scatter", "einsum",
         "sort", "argsort", "moments", "stack", "swapaxes", "onehot", "arange", "logsumexp",
         "tensordot", "count", "quantile")

UNARY = ("exp", "tanh", "sin", "cos", "abs", "neg", "sqrt", "log", "square", "relu", "sigmoid",
         "floor")
BINARY = ("add", "sub", "mul", "max", "min", "div", "select")
REDUCE = ("sum", "max", "mean", "min", "prod")


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _matmuls(a, b) -> bool:
    try:
        np.matmul(np.zeros(a), np.zeros(b))
        return True
    except ValueError:
        return False


def _reshape_target(rng, shape) -> tuple:
    """A random factorisation of the size, sometimes with a -1 or an inserted 1."""
    m, dims = int(np.prod(shape)), []
    while m > 1 and len(dims) < 3:
        d = int(rng.choice([d for d in range(1, m + 1) if m % d == 0]))
        dims.append(d)
        m //= d
    if m > 1:
        dims.append(m)
    if dims and rng.integers(3) == 0:
        dims[int(rng.integers(len(dims)))] = -1
    if rng.integers(4) == 0:
        dims.insert(int(rng.integers(len(dims) + 1)), 1)
    return tuple(dims)


def _partner(rng, pool, ok):
    cands = [j for j, y in enumerate(pool) if ok(y)]
    return int(rng.choice(cands)) if cands else None


def _pick(rng, kind, i, pool):
    """The parameters of a ``kind`` step reading pool[i], or None when it does not apply."""
    x = pool[i]
    nd, shape = x.ndim, x.shape
    ax = int(rng.integers(nd)) if nd else None
    if nd == 0 and kind not in ("unary", "binary", "where", "broadcast", "expand", "clip",
                                "intmath", "boolmath", "reshape"):
        return None
    if kind == "unary":
        return (str(rng.choice(UNARY)),)
    if kind in ("binary", "boolmath", "where"):
        j = _partner(rng, pool, lambda y: _broadcasts(shape, y.shape))
        if kind == "binary":
            return (j, str(rng.choice(BINARY)))
        if kind == "boolmath":
            return (j, str(rng.choice(["and", "or", "xor", "andnot"])))
        return (j,)
    if kind == "reduce":
        return (str(rng.choice(REDUCE)), int(rng.integers(-nd, nd)), bool(rng.integers(2)))
    if kind == "reshape":
        return (_reshape_target(rng, shape),)
    if kind == "transpose":
        return (tuple(int(a) for a in rng.permutation(nd)),) if nd >= 2 else None
    if kind == "slice":
        n = shape[ax]
        return (ax, int(rng.integers(-n, n + 1)), int(rng.integers(-n - 1, n + 2)),
                int(rng.choice([1, 1, 2, -1, -2, 3])))
    if kind == "concat":
        j = _partner(rng, pool, lambda y: y.ndim == nd and all(
            y.shape[k] == shape[k] for k in range(nd) if k != ax))
        return (j, ax)
    if kind == "matmul":
        j = _partner(rng, pool, lambda y: _matmuls(shape, y.shape))
        return (j,) if j is not None else None
    if kind == "pad":
        widths = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(nd))
        mode = str(rng.choice(["constant", "edge", "reflect"]))
        if mode == "reflect" and any(w > n - 1 for (lo, hi), n in zip(widths, shape) for w in (lo, hi)):
            return None
        return (widths, mode)
    if kind == "cumsum":  # (the scans: a running sum, product or max)
        return (ax, str(rng.choice(["sum", "prod", "max", "min"])))
    if kind in ("flip", "argmax", "sort", "argsort", "logsumexp", "count"):
        return (ax,)
    if kind == "quantile":
        # (dyadic q: q * (n - 1) is exact in float32 and float64, so floor and ceil agree)
        return (ax, float(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])), str(rng.choice(["linear", "lower", "midpoint"])))
    if kind == "broadcast":
        return ((int(rng.integers(1, 4)),) + shape,)
    if kind == "take":
        n = shape[ax]
        return (tuple(int(v) for v in rng.integers(-n, n, size=int(rng.integers(1, 5)))), ax)
    if kind == "softmax":
        return (int(rng.integers(-nd, nd)),)
    if kind == "expand":
        return (int(rng.integers(0, nd + 1)),)
    if kind == "roll":
        return (int(rng.integers(-4, 5)), ax)
    if kind == "tile":
        return (tuple(int(rng.integers(1, 3)) for _ in range(nd)),)
    if kind == "repeat":
        return (int(rng.integers(1, 3)), ax)
    if kind == "clip":
        return ()
    if kind == "triu":
        return (int(rng.integers(-2, 3)),) if nd >= 2 else None
    if kind == "intmath":
        return (str(rng.choice(["floordiv", "mod", "muladd", "negfloordiv"])), int(rng.choice([2, 3, -3])))
    if kind == "gather":
        return (ax, str(rng.choice(["take_along", "take_flat", "argmax_pick"])))
    if kind == "scatter":
        n = shape[0]
        rows = tuple(int(v) for v in rng.integers(-n, n, size=int(rng.integers(1, min(n, 3) + 1))))
        return (rows, str(rng.choice(["set", "add", "max", "multiply"])))
    if kind == "einsum":
        j = _partner(rng, pool, lambda y: y.ndim == nd and y.shape[-1] == shape[-1]
                     and _broadcasts(shape[:-1], y.shape[:-1]))
        how = str(rng.choice(["dot", "outer", "columns"]))
        return None if how == "columns" and pool[j].shape != shape else (j, how)
    if kind == "moments":
        return (ax, str(rng.choice(["var", "std", "mean2"])))
    if kind == "stack":
        return (_partner(rng, pool, lambda y: y.shape == shape), int(rng.integers(0, nd + 1)))
    if kind == "swapaxes":
        return (ax, int(rng.integers(nd))) if nd >= 2 else None
    if kind == "onehot":
        return (int(rng.integers(2, 6)),)
    if kind == "arange":
        return ()
    if kind == "tensordot":
        j = _partner(rng, pool, lambda y: y.ndim >= 1 and y.shape[0] == shape[-1])
        return (j,) if j is not None else None
    raise KeyError(kind)


def _float(xp, a):
    return a.astype(np.float64 if xp is np else xp.float32)


def apply(xp, step, pool):
    """One step over ``xp`` (numpy or luminal_fn.numpy)."""
    kind, i, *p = step
    x = pool[i]
    if kind == "unary":
        return {"exp": lambda: xp.exp(xp.clip(x, -5, 5)), "tanh": lambda: xp.tanh(x),
                "sin": lambda: xp.sin(x), "cos": lambda: xp.cos(x), "abs": lambda: xp.abs(x),
                "neg": lambda: -x, "sqrt": lambda: xp.sqrt(xp.abs(x)),
                "log": lambda: xp.log(xp.abs(x) + 1.0), "square": lambda: x * x,
                "relu": lambda: xp.maximum(x, 0.0),
                "sigmoid": lambda: 1.0 / (1.0 + xp.exp(-xp.clip(x, -10, 10))),
                "floor": lambda: xp.floor(x * 4.0 + 0.5)}[p[0]]()
    if kind == "binary":
        y = pool[p[0]]
        return {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                "max": lambda: xp.maximum(x, y), "min": lambda: xp.minimum(x, y),
                "div": lambda: x / (xp.abs(y) + 1.0),
                "select": lambda: xp.where(x > y, x, y * 0.5)}[p[1]]()
    if kind == "reduce":
        how, axis, keep = p
        if how == "prod":  # factors near 1, so products of many stay representable
            return xp.prod(xp.tanh(x) * 0.5 + 1.0, axis=axis, keepdims=keep)
        return getattr(xp, how)(x, axis=axis, keepdims=keep)
    if kind == "reshape":
        return xp.reshape(x, p[0])
    if kind == "transpose":
        return xp.transpose(x, p[0])
    if kind == "slice":
        axis, a, b, s = p
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(a, b, s)
        return x[tuple(idx)]
    if kind == "concat":
        return xp.concatenate([x, pool[p[0]]], axis=p[1])
    if kind == "matmul":
        return xp.matmul(x, pool[p[0]])
    if kind == "where":
        return xp.where(x > 0.1, x, pool[p[0]])
    if kind == "pad":
        return xp.pad(x, p[0], mode=p[1])
    if kind == "flip":
        return xp.flip(x, axis=p[0])
    if kind == "broadcast":
        return xp.broadcast_to(x, p[0])
    if kind == "take":
        return xp.take(x, xp.asarray(np.array(p[0], np.int32)), axis=p[1])
    if kind == "cumsum":
        ax, how = p
        if how == "prod":  # factors near 1, as for prod
            return xp.cumprod(xp.tanh(x) * 0.5 + 1.0, axis=ax)
        if how in ("max", "min"):
            if xp is np:
                return (np.maximum if how == "max" else np.minimum).accumulate(x, axis=ax)
            return xp.cummax(x, axis=ax) if how == "max" else xp.cummin(x, axis=ax)
        return xp.cumsum(x, axis=ax)
    if kind == "softmax":
        e = xp.exp(x - xp.max(x, axis=p[0], keepdims=True))
        return e / xp.sum(e, axis=p[0], keepdims=True)
    if kind == "expand":
        return xp.expand_dims(x, p[0])
    if kind == "roll":
        return xp.roll(x, p[0], axis=p[1])
    if kind == "tile":
        return xp.tile(x, p[0])
    if kind == "argmax":
        return _float(xp, xp.argmax(x, axis=p[0]))
    if kind == "repeat":
        return xp.repeat(x, p[0], axis=p[1])
    if kind == "clip":
        return xp.clip(x, -0.5, 0.7)
    if kind == "triu":
        return xp.triu(x, p[0])
    if kind == "intmath":
        k = p[1]
        xi = xp.floor(x * 4.0).astype(xp.int32)
        out = {"floordiv": lambda: xi // k, "mod": lambda: xi % k, "muladd": lambda: xi * k + 1,
               "negfloordiv": lambda: xp.floor_divide(-xi, k)}[p[0]]()
        return _float(xp, out)
    if kind == "boolmath":
        a, b = x > 0, pool[p[0]] < 0.3
        r = {"and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
             "andnot": lambda: ~a & b}[p[1]]()
        return xp.where(r, x, -x) + _float(xp, r)
    if kind == "gather":
        axis, how = p
        idx = xp.floor(xp.abs(x) * 3.0).astype(xp.int32) % x.shape[axis]
        if how == "take_along":
            return xp.take_along_axis(x, idx, axis=axis)
        if how == "take_flat":
            return xp.take(x, xp.reshape(idx, (-1,)), axis=axis)
        return xp.take_along_axis(x, xp.expand_dims(xp.argmax(x, axis=axis), axis), axis=axis)
    if kind == "scatter":
        rows, how = p
        upd = xp.tanh(x[:len(rows)])
        if xp is np:
            out = x.copy()
            if how == "set":
                out[np.array(rows)] = upd
            else:
                getattr(np, {"add": "add", "max": "maximum", "multiply": "multiply"}[how]).at(
                    out, np.array(rows), upd)
            return out
        return getattr(x.at[xp.asarray(np.array(rows, np.int32))], how)(upd)
    if kind == "einsum":
        spec = {"dot": "...i,...i->...", "outer": "...i,...j->...ij", "columns": "...i,...i->i"}[p[1]]
        return xp.einsum(spec, x, pool[p[0]])
    if kind == "sort":
        return xp.sort(x, axis=p[0])
    if kind == "argsort":
        return _float(xp, xp.argsort(x, axis=p[0], kind="stable"))
    if kind == "moments":
        axis, how = p
        if how == "mean2":
            return xp.mean(x, axis=(0, axis) if axis else 0)
        return getattr(xp, how)(x, axis=axis)
    if kind == "stack":
        return xp.stack([x, pool[p[0]]], axis=p[1])
    if kind == "swapaxes":
        return xp.swapaxes(x, p[0], p[1])
    if kind == "onehot":
        ids = xp.floor(xp.abs(x) * 2.0).astype(xp.int32) % p[0]
        return _float(xp, ids[..., None] == xp.arange(p[0])) * 2.0 - 1.0
    if kind == "arange":
        return x + _float(xp, xp.arange(x.shape[-1])) * 0.25
    if kind == "logsumexp":
        top = xp.max(x, axis=p[0], keepdims=True)
        return xp.log(xp.sum(xp.exp(x - top), axis=p[0])) + xp.squeeze(top, p[0])
    if kind == "tensordot":
        return xp.tensordot(x, pool[p[0]], axes=1)
    if kind == "count":
        return _float(xp, xp.count_nonzero(x > 0, axis=p[0]))
    if kind == "quantile":
        return xp.quantile(x, p[1], axis=p[0], method=p[2])
    raise KeyError(kind)


def draw_steps(rng, pool: list, kinds, pick, apply_step, n_steps: int) -> list:
    """Up to ``n_steps`` steps drawn from ``kinds`` (``pick`` their parameters), each run over
    NumPy and its result appended to ``pool``; a step NumPy refuses, or whose result is empty or
    large, is left out."""
    steps = []
    for _ in range(n_steps):
        i = int(rng.integers(len(pool)))
        kind = str(rng.choice(kinds))
        params = pick(rng, kind, i, pool)
        if params is None or None in params:
            continue
        step = (kind, i, *params)
        try:
            with np.errstate(all="ignore"):
                y = apply_step(np, step, pool)
        except (ValueError, IndexError, TypeError):
            continue
        if y.size == 0 or y.size > 4000 or y.ndim > 5:
            continue
        steps.append(step)
        pool.append(y)
    return steps


class Program:
    """Input shapes, steps and the pool positions returned. ``run(xp, inputs)`` replays it."""

    apply_step = staticmethod(apply)

    def __init__(self, seed: int, n_steps: int = 10):
        rng = np.random.default_rng(seed)
        self.seed = seed
        self.shapes = [tuple(int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 4))))
                       for _ in range(int(rng.integers(1, 4)))]
        pool = [np.zeros(s) for s in self.shapes]
        self.steps = draw_steps(rng, pool, KINDS, _pick, apply, n_steps)
        n_in = len(self.shapes)
        made = list(range(n_in, len(pool))) or [0]
        self.outputs = sorted({int(v) for v in rng.choice(made, size=min(2, len(made)))})

    def inputs(self, lead=None, dtype=np.float32) -> list:
        """Standard normals of the input shapes in ``dtype`` (the first one's axis 0 of length
        ``lead`` when given); the same arrays for the same seed and lead."""
        r = np.random.default_rng([self.seed, 0 if lead is None else lead + 1])
        shapes = [((lead,) + s[1:]) if (lead is not None and k == 0) else s
                  for k, s in enumerate(self.shapes)]
        return [r.standard_normal(s).astype(np.float32).astype(dtype) for s in shapes]

    def run(self, xp, inputs) -> tuple:
        pool = list(inputs)
        for step in self.steps:
            pool.append(self.apply_step(xp, step, pool))
        return tuple(pool[k] for k in self.outputs)

    def reference(self, inputs) -> tuple:
        return self.run(np, [np.asarray(a, np.float64) for a in inputs])

    def __repr__(self):
        return f"Program(seed={self.seed}: inputs {self.shapes}, steps {self.steps}, outputs {self.outputs})"


def assert_matches(got, want, what: str, rtol: float = 1e-3) -> None:
    """Each result within ``rtol`` of the reference's largest finite magnitude (at least 1); NaN
    and infinities where the reference has the same (a variance over an axis sliced empty)."""
    assert len(got) == len(want), f"{what}: {len(got)} results, the reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g).astype(np.float64)
        assert g.shape == w.shape, f"{what}: result {k} has shape {g.shape}, the reference {w.shape}"
        fin = np.isfinite(w)
        same_special = np.array_equal(g[~fin], w[~fin], equal_nan=True)
        assert same_special and np.isfinite(g[fin]).all(), \
            f"{what}: result {k} is not finite where the reference is, or the reverse"
        scale = max(1.0, float(np.max(np.abs(w[fin]), initial=0.0)))
        err = float(np.max(np.abs(g[fin] - w[fin]), initial=0.0))
        assert err <= rtol * scale, f"{what}: result {k} is off by {err:.3g} (scale {scale:.3g})"

"""Differences, integrals, polynomials and covariance (diff, gradient, trapezoid, cross,
polyval, vander, cov, corrcoef): compositions of the other modules' ops.

Results follow NumPy with this library's dtypes: NumPy's float64 results are float32 and its
int64 results int32; Python scalars are weak (they take the array's dtype, as in JAX).
"""
from __future__ import annotations

import functools
import sys
import warnings

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, as_expr, maximum as emax, same, to_int_or_expr
from ..errors import ArgumentError, DTypeError, LuminalError, ShapeError, _is_user_file
from ..tracer import (Tracer, _ctx_of, _weak_join, broadcast_shapes, broadcast_to, cast, iota,
                      lift, normalize_axis, pad_axis, require_equal, reshape_any, static_int)
from . import _math as _m
from ._creation import _shape_tuple, zeros
from ._index import dim_value
from ._linalg import diagonal, matmul
from ._reduce import cumprod, cumsum, mean, sum as _sum
from ._shape import (_axes, _slice_axis, concatenate, expand_dims, flip, moveaxis, ravel, reshape,
                     squeeze, stack, transpose)

__all__ = ["diff", "ediff1d", "gradient", "trapezoid", "cross", "polyval", "vander", "cov",
           "corrcoef", "unwrap"]

class _NoValue:
    """"Not given", where None is a meaningful value (NumPy's np._NoValue)."""

    def __repr__(self):
        return "<no value>"


_NO_VALUE = _NoValue()
_KIND_RANK = {"b": 0, "i": 1, "f": 2}


# ---- helpers ------------------------------------------------------------------------------------
def _window(a: Tracer, axis: int, start, length) -> Tracer:
    """a[start:start + length] along axis (start and length ints or dims expressions)."""
    return _slice_axis(a, axis, start, to_int_or_expr(as_expr(length) + start))


def _less(n, k):
    """max(n - k, 0): the length left after dropping k elements (an int or a dims expression)."""
    return to_int_or_expr(emax(as_expr(n) - k, 0))


def _shift(a: Tracer, axis: int, k: int) -> Tracer:
    """a with a[i + k] at position i, zero where that is outside the axis (same length)."""
    n = a.shape[axis]
    if k > 0:
        return _slice_axis(pad_axis(a, axis, 0, k), axis, k, to_int_or_expr(as_expr(n) + k))
    return _slice_axis(pad_axis(a, axis, -k, 0), axis, 0, n)


def _along(v: Tracer, axis: int, ndim: int) -> Tracer:
    """A 1-D v shaped to broadcast along ``axis`` of an ndim array."""
    return reshape_any(v, (1,) * axis + (v.shape[0],) + (1,) * (ndim - axis - 1))


def _joined_dtype(ts) -> dt.DType:
    """The dtype of joining arrays, weak ones (Python scalars) adopting the others' dtype."""
    strong = [t.dtype for t in ts if not t.weak] or [t.dtype for t in ts]
    out = functools.reduce(dt.promote, strong)
    for t in ts:
        if t.weak:
            out = _weak_join(out, t.dtype)
    return out


def _concrete(x):
    """x as a NumPy array when its values are known while tracing, else None (traced)."""
    if isinstance(x, (Tracer, Expr)):
        return None
    if hasattr(x, "__luminal_array__"):
        return np.asarray(x.__luminal_array__())
    try:
        arr = np.asarray(x)
    except (LuminalError, TypeError, ValueError):
        return None  # a list holding traced values
    return None if arr.dtype == object else arr


def _user_stacklevel() -> int:
    """The stacklevel of warnings.warn, called here, that points at the user's code."""
    frame, level = sys._getframe(2), 2
    while frame is not None and not _is_user_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


def _fits_off_axis(a: Tracer, v: Tracer, axis: int) -> bool:
    return v.ndim == a.ndim and all(same(p, q) for i, (p, q) in enumerate(zip(a.shape, v.shape)) if i != axis)


# ---- differences and integrals ---------------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    """NumPy's diff (not_equal for bool). Works along a dynamic axis."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise ArgumentError(f"diff: the order n must be an int, got {n!r}")
    if n < 0:
        raise ShapeError(f"diff: the order n must be non-negative, got {n}")
    ctx = _ctx_of(a, prepend, append)
    a = lift(a, ctx)
    if n == 0:
        return a  # as NumPy: prepend and append are ignored too
    if a.ndim == 0:
        raise ShapeError("diff: needs an array of at least one dimension, got a 0-d array")
    ax = normalize_axis(axis, a.ndim, "diff")
    parts = []
    for name, v in (("prepend", prepend), (None, a), ("append", append)):
        if v is _NO_VALUE:
            continue
        v = lift(v, ctx)
        if name and v.ndim == 0:
            v = broadcast_to(v, a.shape[:ax] + (1,) + a.shape[ax + 1:])
        if name and not _fits_off_axis(a, v, ax):
            raise ShapeError(f"diff: {name} of shape {v.shape} does not fit a of shape {a.shape} "
                             f"(it must match every axis but axis {ax})")
        parts.append(v)
    if len(parts) > 1:
        d = _joined_dtype(parts)
        a = concatenate([cast(p, d) for p in parts], axis=ax)
    for _ in range(int(n)):
        k = _less(a.shape[ax], 1)
        hi, lo = _window(a, ax, 1, k), _window(a, ax, 0, k)
        a = _m.not_equal(hi, lo) if a.dtype.is_bool else _m.subtract(hi, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """NumPy's ediff1d: the flat differences, to_begin and to_end cast to ary's dtype (they
    must cast under NumPy's same_kind rule)."""
    ctx = _ctx_of(ary, to_end, to_begin)
    a = ravel(lift(ary, ctx))
    if a.dtype.is_bool:
        raise DTypeError("ediff1d: bool arrays cannot be subtracted (as in NumPy); cast ary to int32")

    def ends(name, v):  # to_begin or to_end, flat in ary's dtype
        if v is None:
            return []
        v = ravel(lift(v, ctx))
        if _KIND_RANK[v.dtype.kind] > _KIND_RANK[a.dtype.kind]:
            raise DTypeError(f"ediff1d: dtype of {name} ({v.dtype}) must be compatible with the "
                             f"input's {a.dtype} under the same_kind rule")
        return [cast(v, a.dtype)]

    parts = ends("to_begin", to_begin) + [diff(a)] + ends("to_end", to_end)
    return concatenate(parts) if len(parts) > 1 else parts[0]


def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's gradient (a tuple for several axes). Integer input gives float32 (NumPy: float64);
    traced coordinates always take the uneven-spacing formulas. Works along a dynamic axis."""
    ctx = _ctx_of(f, *varargs)
    f = lift(f, ctx)
    if f.dtype.is_bool:
        raise DTypeError("gradient: bool arrays cannot be subtracted (as in NumPy); cast f to a number dtype")
    if edge_order not in (1, 2):
        raise ShapeError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    axes = _axes(axis, f.ndim, "gradient")
    spacings = _spacings(varargs, f, axes, ctx)
    work = cast(f, dt.float32)  # NumPy computes integers in float64; halves are rounded once
    outs = [cast(_gradient_axis(work, ax, h, edge_order), f.dtype if f.dtype.is_float else dt.float32)
            for ax, h in zip(axes, spacings)]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _spacings(varargs, f: Tracer, axes, ctx) -> list:
    """One spacing per axis: a scalar (Python float or 0-d Tracer) or the pair
    (before, after) of per-position steps x[i] - x[i-1] and x[i+1] - x[i] (junk at the ends)."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and lift(varargs[0], ctx).ndim == 0:  # one scalar for every axis
        return [_scalar_spacing(varargs[0], ctx)] * len(axes)
    if len(varargs) != len(axes):
        raise ArgumentError(f"gradient: got {len(varargs)} spacings for {len(axes)} axes; pass none, "
                            "one scalar, or one scalar or 1-D coordinate array per axis")
    out = []
    for ax, h in zip(axes, varargs):
        c = _concrete(h)
        t = lift(h, ctx)
        if t.ndim == 0:
            out.append(_scalar_spacing(h, ctx))
            continue
        if t.ndim != 1 or not same(t.shape[0], f.shape[ax]):
            raise ShapeError(f"gradient: the coordinates of shape {t.shape} for axis {ax} must be "
                             f"scalars or 1-D with the length of that axis (f has shape {f.shape})")
        if c is not None:
            steps = np.diff(c.astype(np.float64))
            if steps.size and (steps == steps[0]).all():
                out.append(float(steps[0]))  # even spacing: the scalar formulas, as NumPy
            else:
                out.append((np.concatenate([[1.0], steps]), np.concatenate([steps, [1.0]])))
            continue
        x = cast(t, dt.float32)
        out.append((_m.subtract(x, _shift(x, 0, -1)), _m.subtract(_shift(x, 0, 1), x)))
    return out


def _scalar_spacing(h, ctx):
    c = _concrete(h)
    return float(c) if c is not None else lift(h, ctx)


def _gradient_axis(f: Tracer, ax: int, h, order: int) -> Tracer:
    n = f.shape[ax]
    if isinstance(n, int):
        if n < order + 1:
            raise ShapeError(f"gradient: axis {ax} of shape {f.shape} is too small for edge_order="
                             f"{order}; at least {order + 1} elements are required")
    else:
        require_equal(f._ctx, emax(n, order + 1), n,
                      f"{{fn}}: gradient along the dynamic axis {ax} needs at least {order + 1} "
                      "elements, which this call ({dims}) does not have")
    if same(f.size, 0):
        return f  # nothing to select (and an empty select trips the optimizer)
    prev, nxt = _shift(f, ax, -1), _shift(f, ax, 1)

    def at(k):  # f[k] (k < 0: f[n + k]) as a length-1 axis, broadcasting along the axis
        return _window(f, ax, k if k >= 0 else to_int_or_expr(as_expr(n) + k), 1)

    if isinstance(h, tuple):  # uneven spacing: second-order weights from the two steps
        before, after = h
        wa, wb, wc = _interior_weights(before, after)
        weight = (lambda w: _along(lift(w, f._ctx), ax, f.ndim))
        interior = _m.add(_m.add(_m.multiply(weight(wa), prev), _m.multiply(weight(wb), f)),
                         _m.multiply(weight(wc), nxt))
        first_step, second_step = _item(after, 0), _item(after, 1)
        last_step, penult_step = _item(before, -1), _item(before, -2)
        if order == 1:
            left = _m.true_divide(_m.subtract(at(1), at(0)), first_step)
            right = _m.true_divide(_m.subtract(at(-1), at(-2)), last_step)
        else:
            left = _combine(_left_weights(first_step, second_step), (at(0), at(1), at(2)))
            right = _combine(_right_weights(penult_step, last_step), (at(-3), at(-2), at(-1)))
    else:  # even spacing h (a Python float: the weights are exact float64, as NumPy's)
        def per_h(c):
            return c / h if isinstance(h, float) else _m.true_divide(c, h)

        interior = _m.true_divide(_m.subtract(nxt, prev), _m.multiply(2.0, h))
        if order == 1:
            left = _m.true_divide(_m.subtract(at(1), at(0)), h)
            right = _m.true_divide(_m.subtract(at(-1), at(-2)), h)
        else:
            left = _combine([per_h(-1.5), per_h(2.0), per_h(-0.5)], (at(0), at(1), at(2)))
            right = _combine([per_h(0.5), per_h(-2.0), per_h(1.5)], (at(-3), at(-2), at(-1)))
    pos = _along(iota(None, n, f._ctx), ax, f.ndim)
    is_last = _m.equal(pos, dim_value(as_expr(n) - 1, f._ctx))
    return _m.where(_m.equal(pos, 0), left, _m.where(is_last, right, interior))


def _item(v, k):
    """Element k of a 1-D NumPy array (as a float) or Tracer (as a 0-d Tracer)."""
    if isinstance(v, np.ndarray):
        return float(v[k])
    n = v.shape[0]
    start = k if k >= 0 else to_int_or_expr(as_expr(n) + k)
    return reshape_any(_window(v, 0, start, 1), ())


def _interior_weights(h1, h2):
    """Weights of f[i-1], f[i], f[i+1] for steps h1 before and h2 after (NumPy arrays in
    float64 for concrete coordinates, else traced float32: the same formulas)."""
    with np.errstate(all="ignore"):
        return (-h2 / (h1 * (h1 + h2)), (h2 - h1) / (h1 * h2), h1 / (h2 * (h1 + h2)))


def _left_weights(h1, h2):
    """Second-order one-sided weights of f[0], f[1], f[2] (steps h1 = x1 - x0, h2 = x2 - x1)."""
    with np.errstate(all="ignore"):
        return (-(2.0 * h1 + h2) / (h1 * (h1 + h2)), (h1 + h2) / (h1 * h2), -h1 / (h2 * (h1 + h2)))


def _right_weights(h1, h2):
    """Second-order one-sided weights of f[-3], f[-2], f[-1] (h1 = x[-2] - x[-3], h2 = x[-1] - x[-2])."""
    with np.errstate(all="ignore"):
        return (h2 / (h1 * (h1 + h2)), -(h2 + h1) / (h1 * h2), (2.0 * h2 + h1) / (h2 * (h1 + h2)))


def _combine(weights, values):
    out = None
    for w, v in zip(weights, values):
        term = _m.multiply(w, v)
        out = term if out is None else _m.add(out, term)
    return out


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """NumPy's trapezoid (for bool y, NumPy's pairwise sum is a logical or; so it is here).
    Integer input gives float32 (NumPy: float64). Works along a dynamic axis."""
    ctx = _ctx_of(y, x, dx)
    y = lift(y, ctx)
    if y.ndim == 0:
        raise ShapeError("trapezoid: y must have at least one dimension, got a 0-d array")
    ax = normalize_axis(axis, y.ndim, "trapezoid")
    k = _less(y.shape[ax], 1)
    hi, lo = _window(y, ax, 1, k), _window(y, ax, 0, k)
    pair = _m.logical_or(hi, lo) if y.dtype.is_bool else _m.add(hi, lo)
    if x is None:
        d = lift(dx, ctx)
    else:
        x = lift(x, ctx)
        if x.ndim == 1:
            if not same(x.shape[0], y.shape[ax]):
                raise ShapeError(f"trapezoid: x of shape {x.shape} must have the length of axis {ax} "
                                 f"of y, whose shape is {y.shape}")
            d = _along(diff(x), ax, y.ndim)
        else:
            d = diff(x, axis=axis)
    broadcast_shapes(d.shape, pair.shape, op="trapezoid (spacing vs y)")
    return _sum(_m.true_divide(_m.multiply(d, pair), 2.0), axis=axis)  # (NumPy's axis, as given)


# ---- products and polynomials ---------------------------------------------------------------------
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """NumPy's cross of 3-vectors; 2-vectors count as having z = 0, and two 2-vectors give the
    z component alone (deprecated in NumPy 2, which warns; so does this)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"cross: both arrays need at least one dimension, got shapes {a.shape} and {b.shape}")
    a = moveaxis(a, normalize_axis(axisa, a.ndim, "cross (axisa)"), -1)
    b = moveaxis(b, normalize_axis(axisb, b.ndim, "cross (axisb)"), -1)
    na, nb = to_int_or_expr(a.shape[-1]), to_int_or_expr(b.shape[-1])
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError(f"cross: incompatible dimensions for a cross product: the vectors have {na} "
                         f"and {nb} components (each must be 2 or 3; vector shapes {a.shape}, {b.shape})")
    if a.dtype.is_bool and b.dtype.is_bool:
        raise DTypeError("cross: bool vectors cannot be subtracted (as in NumPy); cast them to int32")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of 3-dimensional "
                      "vectors instead. (deprecated in NumPy 2.0)", DeprecationWarning,
                      stacklevel=_user_stacklevel())
    broadcast_shapes(a.shape[:-1], b.shape[:-1], op="cross (the vectors' batch shapes)")
    d = dt.promote(a.dtype, b.dtype)
    a, b = cast(a, d), cast(b, d)
    ac = [reshape_any(_window(a, a.ndim - 1, i, 1), a.shape[:-1]) for i in range(na)]
    bc = [reshape_any(_window(b, b.ndim - 1, i, 1), b.shape[:-1]) for i in range(nb)]

    def term(i, j):  # a_i * b_j, None where a component is missing (a zero z)
        return _m.multiply(ac[i], bc[j]) if i < na and j < nb else None

    def component(i, j):  # a_i * b_j - a_j * b_i, leaving out the missing products as NumPy does
        p, q = term(i, j), term(j, i)
        return _m.negative(q) if p is None else p if q is None else _m.subtract(p, q)

    if na == nb == 2:
        return component(0, 1)
    out = stack([component(1, 2), component(2, 0), component(0, 1)], axis=-1)
    return moveaxis(out, -1, normalize_axis(axisc, out.ndim, "cross (axisc)"))


def polyval(p, x):
    """NumPy's polyval: Horner's rule over the coefficients, highest power first (their count
    must be static)."""
    ctx = _ctx_of(p, x)
    p, x = lift(p, ctx), lift(x, ctx)
    if p.ndim == 0:
        raise ShapeError("polyval: p must be a 1-D sequence of coefficients, got a 0-d array")
    count = static_int(p.shape[0], "polyval: the number of coefficients")
    d = _joined_dtype([x, p])
    x = cast(x, d)
    y = _m.multiply(x, 0)  # NumPy starts from zeros_like(x), so inf and nan in x give nan
    for i in range(count):
        coef = reshape_any(_window(p, 0, i, 1), p.shape[1:])
        if d.is_bool:
            y = _m.logical_or(_m.logical_and(y, x), coef)
        else:
            y = _m.add(_m.multiply(y, x), coef)
    return y


def vander(x, N=None, increasing=False):
    """NumPy's Vandermonde matrix: float32 for float x, else int32 (NumPy: float64, int64)."""
    x = lift(x, _ctx_of(x))
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be one-dimensional, got shape {x.shape}")
    n = x.shape[0]
    cols = n if N is None else _shape_tuple(N)[0]
    if isinstance(cols, int) and cols < 0:
        raise ShapeError(f"vander: N must be non-negative, got {N}")
    d = dt.float32 if x.dtype.is_float else dt.int32
    if same(cols, 0) or same(n, 0):
        return zeros((n, cols), d)  # (the optimizer cannot yet take an empty iota's broadcast)
    col = reshape_any(iota(None, cols, x._ctx), (1, cols))
    base = broadcast_to(expand_dims(cast(x, d), 1), (n, cols))
    powers = cumprod(_m.where(_m.equal(col, 0), 1, base), axis=1)  # 1, x, x*x, ...
    return powers if increasing else flip(powers, 1)


# ---- statistics ---------------------------------------------------------------------------------
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """NumPy's cov in float32 (NumPy: float64); concrete weights are checked as NumPy checks them,
    traced ones are not. Works over a dynamic number of observations."""
    ctx = _ctx_of(m, y, fweights, aweights)
    X = _variables(lift(m, ctx), rowvar, "m")
    if same(X.shape[0], 0):
        return zeros((0, 0), dt.float32)
    if y is not None:
        Y = _variables(lift(y, ctx), rowvar, "y")
        if not same(X.shape[1], Y.shape[1]):
            raise ShapeError(f"cov: m has {X.shape[1]} observations but y has {Y.shape[1]} "
                             f"(variables as {'rows' if rowvar else 'columns'})")
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    elif not isinstance(ddof, (int, np.integer)) or isinstance(ddof, bool):
        raise ArgumentError(f"cov: ddof must be an int, got {ddof!r}")
    obs = X.shape[1]
    w = aw = None
    if fweights is not None:
        w = _weights(fweights, obs, "fweights", ctx)
    if aweights is not None:
        aw = _weights(aweights, obs, "aweights", ctx)
        w = aw if w is None else _m.multiply(w, aw)
    if w is None:
        avg = mean(X, axis=1, keepdims=True)
        fact = cast(lift(to_int_or_expr(as_expr(obs) - int(ddof)), ctx), dt.float32)
    else:
        w_sum = _sum(w)
        avg = _m.true_divide(_sum(_m.multiply(X, w), axis=1, keepdims=True), w_sum)
        if ddof == 0:
            fact = w_sum
        elif aw is None:
            fact = _m.subtract(w_sum, ddof)
        else:
            fact = _m.subtract(w_sum, _m.true_divide(_m.multiply(ddof, _sum(_m.multiply(w, aw))), w_sum))
    fact = _m.maximum(fact, 0.0)  # NumPy too: no degrees of freedom divide by zero (inf, nan)
    X = _m.subtract(X, avg)
    c = matmul(X, transpose(X if w is None else _m.multiply(X, w)))
    return squeeze(_m.multiply(c, _m.true_divide(1.0, fact)))


def _variables(v: Tracer, rowvar: bool, name: str) -> Tracer:
    """v as a float32 (variables, observations) matrix, as NumPy reads cov's inputs."""
    if v.ndim > 2:
        raise ShapeError(f"cov: {name} has more than 2 dimensions (shape {v.shape})")
    v = reshape(cast(v, dt.float32), (1,) * (2 - v.ndim) + v.shape)
    return v if rowvar or same(v.shape[0], 1) else transpose(v)


def _weights(w, obs, name: str, ctx) -> Tracer:
    c = _concrete(w)
    if c is not None and c.ndim == 1:
        if name == "fweights" and not np.all(c == np.around(c)):
            raise DTypeError(f"cov: fweights must be integers, got {c}")
        if np.any(c < 0):
            raise ShapeError(f"cov: {name} cannot be negative, got {c}")
    t = cast(lift(w, ctx), dt.float32)
    if t.ndim != 1 or not same(t.shape[0], obs):
        raise ShapeError(f"cov: {name} must be 1-D with one weight per observation ({obs}), "
                         f"got shape {t.shape}")
    return t


def corrcoef(x, y=None, rowvar=True):
    """NumPy's corrcoef in float32 (NumPy: float64), clipped to [-1, 1]."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return _m.true_divide(c, c)  # NumPy's answer for one variable: 1 (nan when constant)
    if same(c.size, 0):
        return c  # no variables (and an empty clip trips the optimizer)
    std = _m.sqrt(diagonal(c))
    c = _m.true_divide(c, expand_dims(std, 1))
    return _m.clip(_m.true_divide(c, expand_dims(std, 0)), -1, 1)


def unwrap(p, discont=None, axis=-1, period=6.283185307179586):
    """NumPy's unwrap: steps between neighbours larger than ``discont`` (default period / 2)
    are taken modulo ``period`` toward the smaller step, and the corrections accumulate."""
    p = lift(p, _ctx_of(p))
    if p.ndim == 0:
        raise ShapeError("unwrap: p is 0-d; it needs an axis to unwrap along")
    ax = normalize_axis(axis, p.ndim, "unwrap")
    x = cast(p, dt.float32) if not p.dtype.is_float else p
    n = static_int(x.shape[ax], "unwrap: the length of the unwrapped axis")
    if n < 2:
        return x
    half = period / 2
    discont = half if discont is None else max(float(discont), half)
    dd = diff(x, axis=ax)
    ddmod = _m.add(_m.mod(_m.subtract(dd, -half), period), -half)
    # a step of exactly +half stays +half (NumPy's boundary rule), not -half
    ddmod = _m.where(_m.logical_and(_m.equal(ddmod, -half), _m.greater(dd, 0)), half, ddmod)
    correct = _m.where(_m.less(_m.absolute(dd), discont), 0.0, _m.subtract(ddmod, dd))
    rest = _m.add(_window(x, ax, 1, n - 1), cumsum(correct, axis=ax))
    return concatenate([_window(x, ax, 0, 1), rest], axis=ax)

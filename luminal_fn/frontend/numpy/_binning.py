"""Binning and lookup (digitize, bincount, histogram, interp, isin), flat-index helpers
(unravel_index, ravel_multi_index, diag_indices), choosing by conditions (select, piecewise),
lexsort and the functional fill_diagonal and put: compositions of sorts, searches, scatters and
gathers.

Where NumPy checks values (monotonic bins, indices in range, non-negative counts), the check runs
when the values are concrete (eager calls, captured NumPy arrays); traced values cannot raise and
follow JAX instead, as each docstring says.
"""
from __future__ import annotations

import operator

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, as_expr, prod, same, to_int_or_expr
from ..errors import DTypeError, IndexError_, ShapeError, TracingError
from ..tracer import Tracer, _ctx_of, broadcast_to, cast, lift, static_int
from . import _math as m
from ._creation import arange, full, zeros
from ._editing import resize
from ._index import _scatter, dim_value, take, take_along_axis
from ._integer import floor_divide_int
from ._numeric import _concrete
from ._reduce import any as rany, max as rmax, min as rmin, sum as rsum
from ._shape import _slice_axis, concatenate, expand_dims, flip, ravel, reshape, stack
from ._sorting import argsort, searchsorted

__all__ = ["digitize", "bincount", "histogram", "interp", "isin", "unravel_index",
           "ravel_multi_index", "diag_indices", "diag_indices_from", "select", "piecewise",
           "lexsort", "fill_diagonal", "put"]


# ---- helpers ------------------------------------------------------------------------------------
def _int_tracer(x, ctx, fn: str, what: str) -> Tracer:
    """x lifted and checked to hold integers (bool refused, as NumPy's index functions do)."""
    t = lift(x, ctx)
    if not t.dtype.is_int:
        raise DTypeError(f"{fn}: {what} must hold integers, got {t.dtype}")
    return cast(t, dt.int32)


def _dims(shape, fn: str) -> tuple:
    """A shape argument as a tuple of non-negative ints (or dynamic dims)."""
    if isinstance(shape, Tracer):
        raise ShapeError(f"{fn}: the shape must be static ints, got a traced array")
    if isinstance(shape, (int, np.integer, Expr)):
        shape = (shape,)
    out = tuple(to_int_or_expr(d) if isinstance(d, Expr) else operator.index(d) for d in shape)
    if any(isinstance(d, int) and d < 0 for d in out):
        raise ShapeError(f"{fn}: dimensions must be non-negative, got {out}")
    return out


def _strides(dims: tuple, order: str, fn: str) -> list:
    if order not in ("C", "F"):
        raise ShapeError(f"{fn}: order must be 'C' or 'F', got {order!r}")
    walk = list(reversed(dims)) if order == "C" else list(dims)
    out, acc = [], as_expr(1)
    for d in walk:
        out.append(to_int_or_expr(acc))
        acc = acc * d
    return list(reversed(out)) if order == "C" else out


def _tile_to(v: Tracer, k: int, fn: str) -> Tracer:
    """The flat v repeated cyclically to k elements (NumPy's rule for flat assignment)."""
    n = static_int(v.size, f"{fn}: the size of the values")
    if n == 0:
        raise ShapeError(f"{fn}: cannot fill {k} positions from an empty array of values")
    return resize(v, (k,)) if n != k else v


def _no_inplace(fn: str, inplace: bool):
    if inplace:
        raise TracingError(f"{fn}: inplace=True is not supported: arrays are immutable under jit; "
                           f"use the returned array (a = lnp.{fn}(a, ...))")


# ---- binning -----------------------------------------------------------------------------------
def digitize(x, bins, right=False):
    """NumPy's digitize (int32). Concrete bins are checked to be monotonic; traced bins count as
    increasing when bins[0] <= bins[-1], else as decreasing."""
    ctx = _ctx_of(x, bins)
    cb = _concrete(bins)
    b, x = lift(bins, ctx), lift(x, ctx)
    if b.ndim != 1:
        raise ShapeError(f"digitize: bins must be 1-D, got shape {b.shape}")
    side = "left" if right else "right"  # the sides swap: x is searched for in bins
    n = b.shape[0]
    if isinstance(n, int) and n == 0:
        return full(x.shape, 0, dt.int32)

    def increasing():
        return searchsorted(b, x, side=side)

    def decreasing():  # counted from the end of the reversed bins
        return cast(m.subtract(dim_value(n, ctx), searchsorted(flip(b), x, side=side)), dt.int32)

    if cb is not None:
        if np.all(cb[1:] >= cb[:-1]):
            return increasing()
        if np.all(cb[1:] <= cb[:-1]):
            return decreasing()
        raise ShapeError(f"digitize: bins must be monotonically increasing or decreasing, got {cb}")
    first, last = _slice_axis(b, 0, 0, 1), _slice_axis(b, 0, to_int_or_expr(as_expr(n) - 1), n)
    is_decreasing = reshape(m.less(last, first), ())
    return cast(m.where(is_decreasing, decreasing(), increasing()), dt.int32)


def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (int32) or summed weights (float32) of each value of the 1-D int array x.

    As jax.numpy.bincount: the output length is ``length`` when given (values >= length are
    dropped, minlength is ignored), else max(x) + 1 (at least minlength), which needs a concrete
    x. Concrete negative values raise as in NumPy; traced ones are counted in bin 0 (as JAX)."""
    ctx = _ctx_of(x, weights)
    cx = _concrete(x)
    xt = lift(x, ctx)
    if xt.ndim != 1:
        raise ShapeError(f"bincount: x must be 1-D, got shape {xt.shape}")
    if not (xt.dtype.is_int or xt.dtype.is_bool):
        raise DTypeError(f"bincount: x must hold non-negative integers, got {xt.dtype}")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ShapeError(f"bincount: minlength must be non-negative, got {minlength}")
    if cx is not None and cx.size and cx.min() < 0:
        raise IndexError_(f"bincount: x must be non-negative, got the value {cx.min()}")
    if length is None:
        if cx is None:
            raise ShapeError("bincount: the output length is max(x) + 1, which a traced x does not "
                             "give; pass a static length= (values >= length are dropped)")
        length = max(minlength, int(cx.max()) + 1 if cx.size else 0)
    elif isinstance(length, Tracer):
        raise ShapeError("bincount: length must be a static int, got a traced value")
    else:
        length = to_int_or_expr(length) if isinstance(length, Expr) else operator.index(length)
        if isinstance(length, int) and length < 0:
            raise ShapeError(f"bincount: length must be non-negative, got {length}")
    idx = m.maximum(cast(xt, dt.int32), 0)
    if weights is None:
        d, vals = dt.int32, lift(1, ctx, dt.int32)
    else:
        w = lift(weights, ctx)
        if tuple(w.shape) != tuple(xt.shape):
            raise ShapeError(f"bincount: weights of shape {w.shape} must have the shape of x, {xt.shape}")
        d, vals = dt.float32, cast(w, dt.float32)  # NumPy sums weights in float64
    return _scatter(zeros((length,), d), (idx,), vals, "add")


def histogram(a, bins=10, range=None, weights=None, density=False):  # noqa: A002
    """NumPy's histogram over the flattened a: (hist, bin_edges), the last bin closed.
    Integer bins are spaced in the graph in float32 (edges can differ from NumPy's by an ulp);
    with range=None, a traced a holding NaN or inf gives NaN edges and no counts where NumPy
    raises. String bins ('auto', ...) are not supported: their count depends on the data."""
    ctx = _ctx_of(a, bins, weights, *(range if isinstance(range, (tuple, list)) else ()))
    ca = _concrete(a)
    if range is None and ca is not None and ca.size and not np.all(np.isfinite(ca.astype(np.float64))):
        raise ShapeError(f"histogram: the range found from a, [{ca.min()}, {ca.max()}], is not finite; "
                         "pass range=(min, max)")
    a = lift(a, ctx)
    shape = a.shape
    x = ravel(cast(a, dt.int32) if a.dtype.is_bool else a)
    if isinstance(bins, str):
        raise ShapeError(f"histogram: bins={bins!r} chooses the number of bins from the data, which "
                         "gives a data-dependent shape; pass an int or an array of edges")
    cb = _concrete(bins)
    if cb is not None and cb.ndim == 0:
        if not np.issubdtype(cb.dtype, np.integer):
            raise DTypeError(f"histogram: bins must be an int or a 1-D array of edges, got {bins!r}")
        n = int(cb)
        if n < 1:
            raise ShapeError(f"histogram: bins must be positive when an int, got {n}")
        edges = _uniform_edges(x, n, range, ctx)
    else:
        edges = lift(bins, ctx)
        if edges.ndim != 1:
            raise ShapeError(f"histogram: bins must be an int or a 1-D array of edges, "
                             f"got shape {edges.shape}")
        if cb is not None and np.any(cb[:-1] > cb[1:]):
            raise ShapeError(f"histogram: bins must increase monotonically, got {cb}")
        n = static_int(edges.shape[0], "histogram: the number of edges") - 1
        if n < 0:
            raise ShapeError("histogram: bins must hold at least one edge")
    # bin i holds edges[i] <= v < edges[i+1]; the last edge belongs to the last bin
    idx = m.subtract(searchsorted(edges, x, side="right"), 1)
    last = _slice_axis(edges, 0, n, n + 1)
    idx = m.where(m.equal(x, last), n - 1, idx)
    idx = cast(m.where(m.logical_and(m.greater_equal(idx, 0), m.less(idx, n)), idx, n), dt.int32)
    if weights is None:
        hist_dtype, vals = dt.int32, lift(1, ctx, dt.int32)
    else:
        w = lift(weights, ctx)
        if tuple(w.shape) != tuple(shape):
            raise ShapeError(f"histogram: weights of shape {w.shape} must have the shape of a, {shape}")
        hist_dtype, vals = w.dtype, ravel(w)
    acc = dt.int32 if not hist_dtype.is_float else dt.float32  # sums of half floats in float32
    hist = _scatter(zeros((n,), acc), (idx,), vals, "add")  # idx n: past the end, dropped
    if density:
        widths = m.subtract(_slice_axis(edges, 0, 1, n + 1), _slice_axis(edges, 0, 0, n))
        hist = cast(hist, dt.float32)
        return m.true_divide(m.true_divide(hist, cast(widths, dt.float32)), rsum(hist)), edges
    return cast(hist, hist_dtype), edges


def _uniform_edges(x: Tracer, n: int, range_, ctx) -> Tracer:
    """n + 1 evenly spaced edges from range (or x's min and max), as NumPy's linspace."""
    out_dtype = x.dtype if x.dtype.is_float else dt.float32
    if range_ is None:
        if isinstance(x.size, int) and x.size == 0:
            lo, hi = lift(0.0, ctx, dt.float32), lift(1.0, ctx, dt.float32)
        else:
            lo, hi = cast(rmin(x), dt.float32), cast(rmax(x), dt.float32)
    else:
        if len(range_) != 2:
            raise ShapeError(f"histogram: range must be a pair (min, max), got {range_!r}")
        lo, hi = range_
        clo, chi = _concrete(lo), _concrete(hi)
        if clo is not None and chi is not None:
            if not (np.isfinite(clo) and np.isfinite(chi)):
                raise ShapeError(f"histogram: range [{lo}, {hi}] is not finite")
            if clo > chi:
                raise ShapeError(f"histogram: max must be larger than min in range, got {range_!r}")
        lo, hi = cast(lift(lo, ctx), dt.float32), cast(lift(hi, ctx), dt.float32)
    one_value = m.equal(lo, hi)  # a unit-wide range around it, as NumPy
    lo, hi = m.where(one_value, m.subtract(lo, 0.5), lo), m.where(one_value, m.add(hi, 0.5), hi)
    step = m.true_divide(m.subtract(hi, lo), float(n))
    i = arange(n + 1)
    edges = m.add(m.multiply(cast(i, dt.float32), step), lo)
    edges = m.where(m.equal(i, n), hi, edges)  # the last edge is exactly hi
    return cast(edges, out_dtype)


def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's interp for real values, in float32; xp is assumed increasing, as in NumPy. With
    two or more points a NaN x gives NaN (NumPy can give fp where fp is flat near it)."""
    ctx = _ctx_of(x, xp, fp, left, right, period)
    x, xp, fp = (cast(lift(v, ctx), dt.float32) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ShapeError(f"interp: xp and fp must be 1-D, got shapes {xp.shape} and {fp.shape}")
    n = static_int(xp.shape[0], "interp: the length of xp")
    if n != static_int(fp.shape[0], "interp: the length of fp"):
        raise ShapeError(f"interp: xp and fp must have the same length, got shapes {xp.shape} and {fp.shape}")
    if n == 0:
        raise ShapeError("interp: xp (the sample points) is empty")
    if period is not None:
        cp = _concrete(period)
        if cp is not None and cp == 0:
            raise ShapeError("interp: period must be a non-zero value")
        period = m.absolute(cast(lift(period, ctx), dt.float32))
        x, xp = m.mod(x, period), m.mod(xp, period)
        order = argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        # one point past each end, so that the interval wraps around
        xp = concatenate([m.subtract(_slice_axis(xp, 0, n - 1, n), period), xp,
                          m.add(_slice_axis(xp, 0, 0, 1), period)])
        fp = concatenate([_slice_axis(fp, 0, n - 1, n), fp, _slice_axis(fp, 0, 0, 1)])
        left = right = None
        n += 2
    first_x, last_x = reshape(_slice_axis(xp, 0, 0, 1), ()), reshape(_slice_axis(xp, 0, n - 1, n), ())
    first_f, last_f = reshape(_slice_axis(fp, 0, 0, 1), ()), reshape(_slice_axis(fp, 0, n - 1, n), ())
    lval = first_f if left is None else cast(lift(left, ctx), dt.float32)
    rval = last_f if right is None else cast(lift(right, ctx), dt.float32)
    if n == 1:
        return m.where(m.less(x, first_x), lval, m.where(m.greater(x, first_x), rval, first_f))
    j = m.clip(m.subtract(searchsorted(xp, x, side="right"), 1), 0, n - 2)  # xp[j] <= x < xp[j+1]
    j1 = m.add(j, 1)
    x0, x1, y0, y1 = take(xp, j), take(xp, j1), take(fp, j), take(fp, j1)
    slope = m.true_divide(m.subtract(y1, y0), m.subtract(x1, x0))
    out = m.add(m.multiply(slope, m.subtract(x, x0)), y0)
    # as NumPy: a NaN from one end (inf values, equal xp) is retried from the other
    out = m.where(m.isnan(out), m.add(m.multiply(slope, m.subtract(x, x1)), y1), out)
    out = m.where(m.logical_and(m.isnan(out), m.equal(y0, y1)), y0, out)
    out = m.where(m.equal(x, x0), y0, out)
    out = m.where(m.equal(x, last_x), last_f, out)
    out = m.where(m.less(x, first_x), lval, m.where(m.greater(x, last_x), rval, out))
    return m.where(m.isnan(x), float("nan"), out)


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """NumPy's isin (bool, the shape of element): every element against every test element.
    assume_unique and kind only pick algorithms in NumPy; they change nothing here."""
    if kind not in (None, "sort", "table"):
        raise ShapeError(f"isin: kind must be None, 'sort' or 'table', got {kind!r}")
    ctx = _ctx_of(element, test_elements)
    e, t = lift(element, ctx), ravel(lift(test_elements, ctx))
    if isinstance(t.size, int) and t.size == 0:
        hit = full(e.shape, False, dt.bool_)
    else:
        hit = rany(m.equal(expand_dims(e, -1), t), axis=-1)
    return m.logical_not(hit) if invert else hit


# ---- flat indices ------------------------------------------------------------------------------
def unravel_index(indices, shape, order="C"):
    """NumPy's unravel_index (int32 arrays). Concrete indices out of range raise; traced ones
    are clipped into [-size, size) and negative ones count from the end, as in JAX."""
    fn = "unravel_index"
    dims = _dims(shape, fn)
    strides = _strides(dims, order, fn)
    ctx = _ctx_of(indices)
    ci = _concrete(indices)
    i = _int_tracer(indices, ctx, fn, "indices")
    size = prod(dims)
    if ci is not None and isinstance(size, int):
        bad = ci[(ci < 0) | (ci >= size)]
        if bad.size:
            raise IndexError_(f"{fn}: index {bad.flat[0]} is out of bounds for shape {dims} (size {size})")
    elif isinstance(size, int) and size == 0:
        raise ShapeError(f"{fn}: the shape {dims} has no elements to index")
    else:
        sv = dim_value(size, ctx)
        i = m.clip(i, m.subtract(0, sv), m.subtract(sv, 1))
        i = m.where(m.less(i, 0), m.add(i, sv), i)
    outer = 0 if order == "C" else len(dims) - 1
    out = []
    for k, (d, s) in enumerate(zip(dims, strides)):
        c = i if isinstance(s, int) and s == 1 else floor_divide_int(i, lift(dim_value(s, ctx), ctx))
        if k != outer:  # the outermost coordinate is already below its dim
            c = m.fmod(c, dim_value(d, ctx))
        out.append(cast(c, dt.int32))
    return tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """NumPy's ravel_multi_index (int32). mode 'raise' checks concrete indices; traced ones
    cannot raise and are clipped, as mode 'clip' does (JAX raises for them instead)."""
    fn = "ravel_multi_index"
    dims = _dims(dims, fn)
    multi_index = list(multi_index) if isinstance(multi_index, (list, tuple)) else multi_index
    if len(multi_index) != len(dims):
        raise ShapeError(f"{fn}: multi_index has {len(multi_index)} index arrays for the "
                         f"{len(dims)} dims {dims}")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if len(modes) != len(dims) or any(md not in ("raise", "wrap", "clip") for md in modes):
        raise IndexError_(f"{fn}: mode must be 'raise', 'wrap' or 'clip' (or one per dim), got {mode!r}")
    if not dims:
        raise ShapeError(f"{fn}: dims must not be empty")
    ctx = _ctx_of(*multi_index)
    flat = None
    for k, (ix, d, md, s) in enumerate(zip(multi_index, dims, modes, _strides(dims, order, fn))):
        ci = _concrete(ix)
        t = _int_tracer(ix, ctx, fn, f"multi_index[{k}]")
        dv = dim_value(d, ctx)
        if md == "raise" and ci is not None and isinstance(d, int):
            if np.any((ci < 0) | (ci >= d)):
                raise IndexError_(f"{fn}: invalid entry in coordinates array: multi_index[{k}] "
                                  f"holds values outside [0, {d})")
        elif md == "wrap":
            t = m.mod(t, dv)
        else:
            t = m.clip(t, 0, m.subtract(dv, 1))
        term = t if isinstance(s, int) and s == 1 else m.multiply(t, dim_value(s, ctx))
        flat = term if flat is None else m.add(flat, term)
    return cast(flat, dt.int32)


def diag_indices(n, ndim=2):
    """The indices of the main diagonal of an (n,) * ndim array: ndim int32 aranges."""
    idx = arange(n)
    return (idx,) * operator.index(ndim)


def diag_indices_from(arr):
    """The indices of the main diagonal of arr, whose dims must all be equal."""
    a = lift(arr, _ctx_of(arr))
    if a.ndim < 2:
        raise ShapeError(f"diag_indices_from: the array must be at least 2-D, got shape {a.shape}")
    if any(not same(d, a.shape[0]) for d in a.shape):
        raise ShapeError(f"diag_indices_from: all dimensions must have the same length, got shape {a.shape}")
    return diag_indices(a.shape[0], a.ndim)


# ---- choosing by conditions ----------------------------------------------------------------------
def select(condlist, choicelist, default=0):
    """NumPy's select: the first true condition picks its choice; default elsewhere."""
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ShapeError(f"select: condlist has {len(condlist)} entries but choicelist {len(choicelist)}; "
                         "they must have the same length")
    if not condlist:
        raise ShapeError("select: condlist is empty; give at least one condition")
    ctx = _ctx_of(*condlist, *choicelist, default)
    out = lift(default, ctx)
    for k in reversed(range(len(condlist))):  # earlier conditions win: they are applied last
        c = lift(condlist[k], ctx)
        if not c.dtype.is_bool:
            raise DTypeError(f"select: condlist[{k}] must be boolean, got {c.dtype}")
        out = m.where(c, choicelist[k], out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """NumPy's piecewise. Each function gets the whole x (not x[cond], whose shape depends on the
    data) and its result is kept where its condition holds; results take x's dtype, as NumPy."""
    ctx = _ctx_of(x, condlist)
    x = lift(x, ctx)
    if isinstance(condlist, (list, tuple)):
        conds = list(condlist)
        single = conds and not isinstance(conds[0], (list, tuple, np.ndarray, Tracer)) \
            and not hasattr(conds[0], "__luminal_array__") and x.ndim != 0
        if single:  # a flat list of bools is one condition, as NumPy reads it
            conds = [conds]
    else:
        c = lift(condlist, ctx)
        conds = [c] if c.ndim <= x.ndim else [reshape(_slice_axis(c, 0, i, i + 1), c.shape[1:])
                                               for i in range(static_int(c.shape[0], "piecewise"))]
    conds = [broadcast_to(m._as_bool(lift(c, ctx)), x.shape, op="piecewise") for c in conds]
    funclist = list(funclist)
    if len(funclist) == len(conds) + 1:  # the extra function applies where no condition holds
        none_hold = conds[0] if len(conds) == 1 else rany(stack(conds), axis=0)
        conds.append(m.logical_not(none_hold) if conds else full(x.shape, True, dt.bool_))
    elif len(funclist) != len(conds):
        raise ShapeError(f"piecewise: with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected, got {len(funclist)}")
    out = full(x.shape, 0, x.dtype)
    for c, f in zip(conds, funclist):
        val = f(x, *args, **kw) if callable(f) else f
        out = m.where(c, cast(lift(val, ctx), x.dtype), out)
    return cast(out, x.dtype)


# ---- sorting by several keys --------------------------------------------------------------------
def lexsort(keys, axis=-1):
    """NumPy's lexsort (int32): a stable sort by the last key, ties broken by the one before..."""
    if isinstance(keys, (list, tuple)):
        ctx = _ctx_of(*keys)
        keys = [lift(k, ctx) for k in keys]
    else:
        stacked = lift(keys, _ctx_of(keys))
        if stacked.ndim == 0:
            raise ShapeError("lexsort: keys must be a sequence of arrays or an array of rows, "
                             "got a 0-d array")
        keys = [reshape(_slice_axis(stacked, 0, i, i + 1), stacked.shape[1:])
                for i in range(static_int(stacked.shape[0], "lexsort: the number of keys"))]
    if not keys:
        raise ShapeError("lexsort: needs at least one key")
    shape = tuple(keys[0].shape)
    if any(tuple(k.shape) != shape for k in keys):
        raise ShapeError(f"lexsort: all keys must have the same shape, got {[tuple(k.shape) for k in keys]}")
    if not shape:
        return lift(0, keys[0]._ctx, dt.int32)
    # least significant key first; each stable sort keeps the order of the ones before
    perm = argsort(keys[0], axis=axis)
    for k in keys[1:]:
        perm = take_along_axis(perm, argsort(take_along_axis(k, perm, axis), axis=axis), axis)
    return perm


# ---- functional updates ---------------------------------------------------------------------------
def fill_diagonal(a, val, wrap=False, *, inplace=False):
    """NumPy's fill_diagonal as a pure function (returns the new array, as jax.numpy); val is
    repeated cyclically along the diagonal. The shape of a must be static."""
    _no_inplace("fill_diagonal", inplace)
    ctx = _ctx_of(a, val)
    a = lift(a, ctx)
    if a.ndim < 2:
        raise ShapeError(f"fill_diagonal: the array must be at least 2-D, got shape {a.shape}")
    shape = tuple(static_int(d, "fill_diagonal: each dim") for d in a.shape)
    size = int(np.prod(shape))
    if a.ndim == 2:
        step = shape[1] + 1
        end = size if wrap else min(size, shape[1] * shape[1])
    else:
        if len(set(shape)) != 1:
            raise ShapeError(f"fill_diagonal: all dimensions must have the same length, got shape {shape}")
        step = 1 + int(np.sum(np.cumprod(shape[:-1])))
        end = size
    pos = np.arange(0, end, step, dtype=np.int32)
    if pos.size == 0:
        return a
    vals = _tile_to(ravel(lift(val, ctx)), pos.size, "fill_diagonal")
    return reshape(_scatter(ravel(a), (pos,), vals, "set"), a.shape)


def put(a, ind, v, mode=None, *, inplace=False):
    """NumPy's put as a pure function (returns the new array, as jax.numpy): a.flat[ind] = v,
    v repeated cyclically; on repeated indices the last write wins on the NumPy backend, any one
    on a GPU (as JAX's). mode None/'raise' checks concrete
    indices; traced ones count negatives from the end and out-of-range ones are dropped (JAX)."""
    _no_inplace("put", inplace)
    if mode not in (None, "raise", "wrap", "clip"):
        raise IndexError_(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    ctx = _ctx_of(a, ind, v)
    a = lift(a, ctx)
    flat = ravel(a)
    n = flat.shape[0]
    ci = _concrete(ind)
    if ci is not None and ci.size == 0:
        return a  # nothing to write (NumPy reads [] as float64, which an index cannot be)
    idx = ravel(_int_tracer(ind, ctx, "put", "ind"))
    k = static_int(idx.shape[0], "put: the number of indices")
    vals = ravel(lift(v, ctx))
    if k == 0 or (isinstance(vals.size, int) and vals.size == 0):
        return a  # nothing to write, as NumPy
    if isinstance(n, int) and n == 0:
        raise IndexError_(f"put: cannot put into the empty array of shape {a.shape}")
    vals = _tile_to(vals, k, "put")
    if ci is not None and isinstance(n, int):
        ci = ci.reshape(-1).astype(np.int64)
        if mode == "wrap":
            ci = np.mod(ci, n)
        elif mode == "clip":
            ci = np.clip(ci, 0, n - 1)
        elif np.any((ci < -n) | (ci >= n)):
            bad = ci[(ci < -n) | (ci >= n)][0]
            raise IndexError_(f"put: index {bad} is out of bounds for an array of size {n}")
        index = np.where(ci < 0, ci + n, ci).astype(np.int32)
    elif mode == "wrap":
        index = m.mod(idx, dim_value(n, ctx))
    elif mode == "clip":
        index = m.clip(idx, 0, m.subtract(dim_value(n, ctx), 1))
    else:
        index = idx  # the scatter counts negatives from the end and drops what is out of range
    return reshape(_scatter(flat, (index,), vals, "set"), a.shape)

"""Tracer arrays and the primitive builders every front-end function is written with.

A :class:`Tracer` is a (node, view) pair in the graph of the trace that is being recorded.
Movement ops only change the view; arithmetic appends HLIR nodes.
"""
from __future__ import annotations

import contextvars
from typing import Sequence

import numpy as np

from ..ir import dtypes as dt
from ..ir.expr import Expr, IntLike, as_expr, same, to_int_or_expr
from ..ir.graph import Graph
from ..ir.view import View
from .errors import DTypeError, ShapeError, TracingError, where

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("luminal_trace", default=None)


class TraceContext:
    """One recording: the graph being built and the jitted function it belongs to."""

    def __init__(self, fn_name: str):
        self.fn_name = fn_name
        self.graph = Graph(fn_name)
        self.active = False
        self._token = None
        self.dim_checks: list[DimCheck] = []  # size equalities the trace assumed (see require_equal)

    def __enter__(self):
        self.active = True
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc):
        self.active = False
        _CURRENT.reset(self._token)


class DimCheck:
    """A size equality between symbolic dims that a trace assumed and cannot prove, for example
    ``(s // 4) * 4 == s`` for ``reshape(-1, 4)`` of an axis of length ``s``. Every call checks it
    against the call's dim values before the graph runs, so no call reads a wrong-sized view."""

    __slots__ = ("lhs", "rhs", "what")

    def __init__(self, lhs: Expr, rhs: Expr, what: str):
        self.lhs, self.rhs, self.what = lhs, rhs, what

    def check(self, dims, fn_name: str):
        a, b = self.lhs.evaluate(dims), self.rhs.evaluate(dims)
        if a != b:
            vals = ", ".join(f"{k}={v}" for k, v in sorted(dims.items()))
            raise ShapeError(self.what.format(fn=fn_name, dims=vals))

    def __repr__(self):
        from ..ir.expr import render

        return f"{render(self.lhs)} == {render(self.rhs)}"


def require_equal(ctx: "TraceContext", lhs: IntLike, rhs: IntLike, what: str) -> None:
    """Assume ``lhs == rhs`` for the rest of the trace and check it on every call. ``what`` is
    the error message for a call that breaks it (say which op needs it and what to do); its
    ``{fn}`` and ``{dims}`` are filled with the function name and the call's dim values."""
    ctx.dim_checks.append(DimCheck(as_expr(lhs), as_expr(rhs), what))


def current() -> TraceContext | None:
    return _CURRENT.get()


def require_context(what: str) -> TraceContext:
    ctx = _CURRENT.get()
    if ctx is None:
        raise TracingError(f"{what} needs a trace: call it inside a function decorated with luminal_fn.jit")
    return ctx


class Tracer:
    """An abstract array inside a jitted function."""

    __slots__ = ("_ctx", "_node", "_view", "dtype", "weak")
    __array_priority__ = 1000.0  # NumPy defers binary operators to us

    def __init__(self, ctx: TraceContext, node: int, view: View, dtype: dt.DType, weak: bool = False):
        self._ctx = ctx
        self._node = node
        self._view = view
        self.dtype = dtype
        self.weak = weak

    # ---- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._view.shape

    @property
    def ndim(self) -> int:
        return len(self._view.shape)

    @property
    def size(self) -> IntLike:
        return self._view.numel()

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        d = self.shape[0]
        if isinstance(d, Expr):
            raise TracingError(f"len() of an array whose first axis is the symbolic dim {d}; use x.shape[0]")
        return d

    def __repr__(self):
        from ..ir.graph import type_str

        return f"Tracer<{type_str(self.dtype, self.shape)}>"

    # ---- impurity guards --------------------------------------------------------------------
    # Each guard first checks the trace is still running, so that an escaped tracer is reported
    # as escaped rather than as the misuse that happened to touch it.
    def _check_live(self):
        if not self._ctx.active:
            raise TracingError(
                f"a traced value of jitted function '{self._ctx.fn_name}' escaped its trace "
                f"(stored in a global, a closure or an attribute) and was used later {where(None)}; "
                "return it from the function instead"
            )

    def __bool__(self):
        self._check_live()
        raise TracingError(
            f"Python control flow on a traced value {where(self._ctx.fn_name)}: the truth value of "
            f"{self!r} is unknown while tracing. Use luminal_fn.numpy.where(...) for data-dependent "
            "choices, or mark the argument static with static_argnums/static_argnames"
        )

    def __index__(self):
        self._check_live()
        raise TracingError(
            f"int() of a traced value, or its use as a Python index or size, {where(self._ctx.fn_name)}: "
            "values are unknown while tracing; indices that depend on data must stay arrays "
            "(use take/gather), or make the argument static (static_argnums/static_argnames)"
        )

    __int__ = __index__

    def __float__(self):
        self._check_live()
        raise TracingError(
            f"float() of a traced value {where(self._ctx.fn_name)}: values are unknown while "
            "tracing (this also happens when a traced value is written into a NumPy array: tracing "
            "is pure, return the value instead); keep it an array, or make the argument static"
        )

    def __complex__(self):
        self._check_live()
        raise TracingError(f"complex() of a traced value {where(self._ctx.fn_name)}: values are unknown while tracing")

    def item(self, *args):
        self._check_live()
        raise TracingError(
            f"x.item() on a traced value {where(self._ctx.fn_name)}: values are unknown while "
            "tracing; keep it an array, or return it and call .item() on the result"
        )

    tolist = item

    def __format__(self, spec):
        if not spec:
            return repr(self)
        self._check_live()
        raise TracingError(f"formatting a traced value with {spec!r} {where(self._ctx.fn_name)}: values are unknown while tracing")

    def __array__(self, dtype=None, copy=None):
        self._check_live()
        raise TracingError(
            f"a traced value was converted to a NumPy array {where(self._ctx.fn_name)} (for example "
            "written into a captured NumPy array, or passed to a NumPy function). Tracing is pure: "
            "use luminal_fn.numpy functions and return results instead of mutating captured arrays"
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs on traced values run as the luminal_fn.numpy function of the same name
        (``np.exp(x)``, ``ndarray + x``); writing into a NumPy array (``out=``) is refused."""
        self._check_live()
        if "out" in kwargs:
            raise TracingError(
                f"numpy.{ufunc.__name__}(..., out=...) would write a traced value into a NumPy "
                f"array {where(self._ctx.fn_name)}; tracing is pure: return the result instead"
            )
        f = _namespace_function(ufunc.__name__) if method == "__call__" else None
        if f is None:
            raise TracingError(
                f"numpy.{ufunc.__name__}{'' if method == '__call__' else '.' + method} cannot take "
                f"traced values {where(self._ctx.fn_name)} and luminal_fn.numpy has no equivalent; "
                "use luminal_fn.numpy functions inside jitted functions"
            )
        return f(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy functions on traced values (``np.sum(x)``) run as luminal_fn.numpy's."""
        self._check_live()
        if func.__name__ in _NUMPY_IN_PLACE:
            raise TracingError(
                f"numpy.{func.__name__} writes into its argument, and a traced array "
                f"{where(self._ctx.fn_name)} is immutable: use the functional form "
                f"({_NUMPY_IN_PLACE[func.__name__]}) and return or use its result"
            )
        f = _namespace_function(func.__name__) if func.__module__ == "numpy" else None
        if f is None:
            raise TracingError(
                f"numpy.{func.__name__} cannot take traced values {where(self._ctx.fn_name)} "
                "(it would read or write concrete data); use the luminal_fn.numpy function instead"
                " and return results rather than mutating NumPy arrays"
            )
        return f(*args, **kwargs)

    def __iter__(self):
        n = len(self)
        from . import numpy as lnp  # noqa: F401 (circular at import time)

        for i in range(n):
            yield self[i]

    def __hash__(self):
        return id(self)

    def __setitem__(self, idx, value):
        raise TracingError(
            f"in-place assignment to a traced array {where(self._ctx.fn_name)}; arrays are immutable: "
            "use x = x.at[idx].set(value)"
        )


# NumPy functions that write into an argument and return None: run as the functional lnp
# forms they would silently leave the caller's array unchanged
_NUMPY_IN_PLACE = {
    "put": "a = lnp.put(a, ind, v)", "put_along_axis": "a = lnp.put_along_axis(a, indices, values, axis)",
    "fill_diagonal": "a = lnp.fill_diagonal(a, val)", "place": "a = lnp.where(mask, values, a)",
    "putmask": "a = lnp.where(mask, values, a)", "copyto": "dst = lnp.where(where, src, dst)",
}


def _namespace_function(name: str):
    """luminal_fn.numpy's function of this NumPy name, or None."""
    from . import numpy as lnp

    if name not in lnp.__all__:
        return None
    f = getattr(lnp, name, None)
    return f if callable(f) else None


# ---- lifting values into the trace ---------------------------------------------------------------
def lift(x, ctx: TraceContext | None = None, dtype: dt.DType | None = None) -> Tracer:
    """Any array-like (Tracer, lf.Array, NumPy array, Python scalar) as a Tracer of ``ctx``."""
    if isinstance(x, Tracer):
        x._check_live()
        return x
    ctx = ctx or require_context("this operation")
    if isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)) and not isinstance(x, np.ndarray):
        d = dtype or dt.scalar_dtype(x)
        v = _scalar_value(x, d)
        node = ctx.graph.add("Constant", (), (), d, value=v)
        return Tracer(ctx, node, View.contiguous(()), d, weak=dtype is None and not isinstance(x, np.generic))
    if isinstance(x, Expr):
        if x.is_const:
            return lift(x.value, ctx, dtype)
        # a symbolic dim used as a value: a one-element iota evaluates it at run time
        node = ctx.graph.add("Iota", (), (1,), dt.int32, expr=x)
        t = Tracer(ctx, node, View.contiguous((1,)).reshape(()), dt.int32, weak=True)
        return t if dtype is None else cast(t, dtype)
    arr = _concrete_numpy(x)
    if arr is None:
        raise DTypeError(f"cannot use a value of type {type(x).__name__} as an array {where(ctx.fn_name)}; "
                         "pass arrays or Python numbers (other values can be static arguments)")
    arr = dt.narrow_array(arr, "a captured array")
    if dtype is not None and dt.canonicalize(arr.dtype) is not dtype:
        arr = arr.astype(dt.to_numpy(dtype))
    d = dt.canonicalize(arr.dtype)
    if arr.ndim == 0:
        node = ctx.graph.add("Constant", (), (), d, value=_scalar_value(arr.item(), d))
    else:
        node = ctx.graph.add("Constant", (), arr.shape, d, value=np.ascontiguousarray(arr))
    return Tracer(ctx, node, View.contiguous(arr.shape), d)


def _scalar_value(v, d: dt.DType):
    if d.is_bool:
        return bool(v)
    if d.is_int:
        return int(v)
    return float(v)


def _concrete_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__luminal_array__"):
        return x.__luminal_array__()
    if isinstance(x, (list, tuple)):
        try:
            return np.asarray(x)
        except Exception:
            return None
    return None


def is_arraylike(x) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float)) or hasattr(x, "__luminal_array__")


# ---- node builders -------------------------------------------------------------------------------
def _new(ctx: TraceContext, op: str, inputs, shape, dtype: dt.DType, weak=False, **attrs) -> Tracer:
    shape = tuple(to_int_or_expr(d) for d in shape)
    node = ctx.graph.add(op, tuple((t._node, t._view) for t in inputs), shape, dtype, **attrs)
    return Tracer(ctx, node, View.contiguous(shape), dtype, weak)


def materialize(x: Tracer) -> Tracer:
    """A contiguous copy (a same-dtype Cast) so that any reshape can follow."""
    return _new(x._ctx, "Cast", [x], x.shape, x.dtype, x.weak)


def name_kernel(result: Tracer, name: str, inputs, params, only: bool = True) -> Tracer:
    """Record that ``result`` is also the backend kernel ``name`` of ``inputs`` with ``params``
    (ir/composites.py; ``only``: run nothing else where the backend has it). Returns the tracer
    to use from here: a contiguous copy where ``result`` is a view of its node."""
    if any(t._node == result._node for t in inputs):
        return result  # (nothing computed: a scan of one element is its input)
    if not result._view.reads_whole(result._ctx.graph.nodes[result._node].shape):
        result = materialize(result)
    result._ctx.graph.add_composite(result._node, name, [(t._node, t._view) for t in inputs], params, only)
    return result


def cast(x, dtype) -> Tracer:
    x = lift(x)
    d = dt.canonicalize(dtype)
    if d is x.dtype:
        return Tracer(x._ctx, x._node, x._view, d, False)
    return _new(x._ctx, "Cast", [x], x.shape, d)


def unary(op: str, x, float_only: bool = True) -> Tracer:
    x = lift(x)
    if float_only and not x.dtype.is_float:
        x = cast(x, dt.float32)
    return _new(x._ctx, op, [x], x.shape, x.dtype, x.weak)


def result_dtype(a: Tracer, b: Tracer) -> dt.DType:
    if a.weak and not b.weak:
        return _weak_join(b.dtype, a.dtype)
    if b.weak and not a.weak:
        return _weak_join(a.dtype, b.dtype)
    return dt.promote(a.dtype, b.dtype)


def _weak_join(strong: dt.DType, weak: dt.DType) -> dt.DType:
    if weak.is_float and not strong.is_float:
        return dt.float32
    if weak.is_int and strong.is_bool:
        return dt.int32
    return strong


def broadcast_shapes(*shapes, op: str = "broadcast") -> tuple:
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        dim: IntLike = 1
        for s in shapes:
            j = i - (nd - len(s))
            if j < 0:
                continue
            d = s[j]
            if same(d, 1):
                continue
            if same(dim, 1):
                dim = d
            elif not same(dim, d):
                ctx = current()
                raise ShapeError(
                    f"{op}: shapes {' and '.join(_fmt_shape(s) for s in shapes)} cannot be broadcast "
                    f"together (axis {i - nd}: {dim} vs {d}) {where(ctx.fn_name if ctx else None)}"
                )
        out.append(dim)
    return tuple(out)


def _fmt_shape(s) -> str:
    return "(" + ", ".join(str(d) for d in s) + ("," if len(s) == 1 else "") + ")"


def broadcast_to(x: Tracer, shape: Sequence[IntLike], op: str = "broadcast_to") -> Tracer:
    shape = tuple(to_int_or_expr(d) for d in shape)
    if len(shape) == x.ndim and all(same(a, b) for a, b in zip(shape, x.shape)):
        return x
    if x.ndim > len(shape):
        raise ShapeError(f"{op}: cannot broadcast shape {_fmt_shape(x.shape)} to {_fmt_shape(shape)}")
    v = x._view
    for _ in range(len(shape) - x.ndim):
        v = v.insert_axis(0, 1)
    for ax, (have, want) in enumerate(zip(v.shape, shape)):
        if same(have, want):
            continue
        if not same(have, 1):
            ctx = current()
            raise ShapeError(
                f"{op}: cannot broadcast shape {_fmt_shape(x.shape)} to {_fmt_shape(shape)} "
                f"{where(ctx.fn_name if ctx else None)}"
            )
        v = v.expand(ax, want)
    return Tracer(x._ctx, x._node, v, x.dtype, x.weak)


def binary(op: str, a, b, out_dtype: dt.DType | None = None, opname: str | None = None,
           compute_dtype: dt.DType | None = None) -> Tracer:
    """Broadcast, promote, and append a binary primitive."""
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    d = compute_dtype or result_dtype(a, b)
    weak = a.weak and b.weak
    a, b = cast(a, d), cast(b, d)
    a.weak = b.weak = False
    shape = broadcast_shapes(a.shape, b.shape, op=opname or op)
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    return _new(ctx, op, [a, b], shape, out_dtype or d, weak and out_dtype is None)


def _ctx_of(*xs) -> TraceContext:
    for x in xs:
        if isinstance(x, Tracer):
            x._check_live()
            return x._ctx
    return require_context("this operation")


def reduce(op: str, x: Tracer, axis: int) -> Tracer:
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return _new(x._ctx, op, [x], shape, x.dtype, False, axis=axis)


def iota(expr: Expr | None, n: IntLike, ctx: TraceContext | None = None) -> Tracer:
    """int32 [n] with values expr(z) for z in 0..n-1 (plain arange when expr is None)."""
    ctx = ctx or require_context("iota")
    from ..ir.expr import Z

    return _new(ctx, "Iota", [], (n,), dt.int32, expr=expr if expr is not None else Z)


def with_view(x: Tracer, view: View | None, fallback) -> Tracer:
    """A new view of x, or ``fallback(materialize(x))`` when the view is inexpressible."""
    if view is not None:
        return Tracer(x._ctx, x._node, view, x.dtype, x.weak)
    return fallback(materialize(x))


def normalize_axis(axis: int, ndim: int, fn: str) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShapeError(f"{fn}: axis must be an int, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1) and not (ndim == 0 and axis in (0, -1)):
        ctx = current()
        raise ShapeError(f"{fn}: axis {axis} is out of bounds for an array of {ndim} dims "
                         f"{where(ctx.fn_name if ctx else None)}")
    return axis % ndim if ndim else 0


def check_dtype(x: Tracer, fn: str, allowed: str) -> None:
    """allowed: a string of dtype kinds ('f', 'i', 'b')."""
    if x.dtype.kind not in allowed:
        names = {"f": "float", "i": "int32", "b": "bool"}
        raise DTypeError(f"{fn}: unsupported dtype {x.dtype} (expects {', '.join(names[k] for k in allowed)})")


def static_int(v, what: str) -> int:
    if isinstance(v, Expr):
        if v.is_const:
            return v.value
        raise ShapeError(
            f"{what} must be static, got the symbolic dim {v}: this op is not supported along a "
            "dynamic axis; leave that axis out of dynamic_axes (calls then retrace per size) or "
            "pad it to a fixed size")
    return int(v)


def as_int_or_expr(v) -> IntLike:
    if isinstance(v, (int, np.integer)):
        return int(v)
    return to_int_or_expr(as_expr(v))


def reshape_any(x: Tracer, shape: Sequence[IntLike]) -> Tracer:
    """Reshape through the view when strides allow, else through a contiguous copy."""
    shape = tuple(to_int_or_expr(d) for d in shape)
    v = x._view.reshape(shape)
    if v is not None:
        return Tracer(x._ctx, x._node, v, x.dtype, x.weak)
    m = materialize(x)
    return Tracer(m._ctx, m._node, m._view.reshape(shape), m.dtype, m.weak)


def pad_axis(x: Tracer, axis: int, before: IntLike, after: IntLike) -> Tracer:
    """Zero padding along one axis (non-negative amounts)."""
    return Tracer(x._ctx, x._node, x._view.pad(axis, before, after), x.dtype, x.weak)

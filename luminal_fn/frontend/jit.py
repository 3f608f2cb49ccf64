"""``luminal_fn.jit``: trace once per abstract signature, compile per backend, dispatch fast.

Stages mirror JAX: ``f.trace(*args)`` -> :class:`Traced`, ``.lower()`` -> :class:`Lowered`,
``.compile()`` -> :class:`Compiled`. Calling ``f`` runs all three once per signature and then
only dispatches: flatten the arguments, look the signature up, read dims, run.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from ..backends import get_backend
from ..ir import dtypes as dt
from ..ir.expr import var
from ..ir.graph import Graph, type_str
from ..ir.passes import simplify
from ..ir.view import View
from . import pytree
from .array import Array
from .errors import ShapeError, TracingError
from .tracer import TraceContext, Tracer, lift

_SCALARS = (bool, int, float)


class _Leaf:
    """How one flattened argument enters the graph."""

    __slots__ = ("path", "dyn")

    def __init__(self, path: str, dyn: dict):
        self.path = path
        self.dyn = dyn  # axis -> symbol name


class _Layout:
    """Everything about a call's pytree structure that does not depend on values."""

    __slots__ = ("treedef", "leaves", "donated")

    def __init__(self, treedef, leaves, donated):
        self.treedef = treedef
        self.leaves = leaves
        self.donated = donated  # leaf indices whose Arrays are consumed by the call


def _abstract(x, dyn: dict, path: str):
    """The part of a leaf that selects a trace: dtype and shape with dynamic axes symbolic."""
    t = type(x)
    if t is Array:
        shape, d = x.shape, x.dtype
    elif t is np.ndarray:
        shape, d = x.shape, dt.canonicalize(x.dtype)
    elif t in _SCALARS or isinstance(x, (np.generic,)):
        if isinstance(x, np.generic):
            return (dt.canonicalize(x.dtype), ())
        return ("weak", dt.scalar_dtype(x))
    elif hasattr(x, "__dlpack__") or hasattr(x, "__array__"):
        arr = np.asarray(x)
        shape, d = arr.shape, dt.canonicalize(arr.dtype)
    else:
        raise TypeError(
            f"argument {path!r} is a {t.__name__}, which is not an array; pass arrays, Python "
            "scalars or pytrees of them, or mark the argument static (static_argnums/static_argnames)")
    if dyn:
        shape = tuple(dyn.get(i, s) for i, s in enumerate(shape))
        for ax in dyn:
            if ax >= len(x.shape):
                raise ShapeError(f"dynamic_axes names axis {ax} of {path!r}, which has shape {x.shape}")
    return (d, shape)


class Jitted:
    """A function wrapped by :func:`jit`."""

    def __init__(self, fn: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 dynamic_axes=None, buckets=None, backend=None, search=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "fn")
        try:
            self._sig = inspect.signature(fn)
            params = list(self._sig.parameters.values())
        except (TypeError, ValueError):
            self._sig, params = None, []
        self._param_names = [p.name for p in params
                             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        self._has_kwonly = any(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params)
        static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        nums = set(static_argnums)
        for n in static_argnames:
            if n in self._param_names:
                nums.add(self._param_names.index(n))
        self.static_argnums = frozenset(nums)
        self.static_argnames = frozenset(static_argnames) | {self._param_names[i] for i in nums if i < len(self._param_names)}
        donate = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        self.donate_argnums = frozenset(donate)
        self.dynamic_axes = _normalize_dynamic_axes(dynamic_axes, self._param_names)
        self.buckets = buckets
        self.backend = backend
        self.search = search
        self._layouts: dict = {}
        self._entries: dict = {}
        self.trace_count = 0
        self.compile_count = 0

    # ---- argument handling ------------------------------------------------------------------
    def _split(self, args: tuple, kwargs: dict):
        """(dynamic positional args, static values key, static kwargs) from a call."""
        if kwargs:
            if self._sig is None:
                raise TypeError(f"{self.name}: keyword arguments need an inspectable signature")
            bound = self._sig.bind(*args, **kwargs)
            bound.apply_defaults()
            pos, kw = [], {}
            for name, val in bound.arguments.items():
                p = self._sig.parameters[name]
                if p.kind == p.VAR_POSITIONAL:
                    pos.extend(val)
                elif p.kind == p.VAR_KEYWORD:
                    kw.update(val)
                elif p.kind == p.KEYWORD_ONLY:
                    kw[name] = val
                else:
                    pos.append(val)
            args = tuple(pos)
            kwargs = kw
        elif self._sig is not None and len(args) < len(self._param_names):
            bound = self._sig.bind(*args)
            bound.apply_defaults()
            args = tuple(bound.arguments[n] for n in self._param_names if n in bound.arguments)
        statics = []
        dyn = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                statics.append((i, _hashable(a, self.name, self._arg_name(i))))
            else:
                dyn.append(a)
        static_kw = {}
        dyn_kw = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                static_kw[k] = _hashable(v, self.name, k)
            else:
                dyn_kw[k] = v
        return tuple(dyn), tuple(statics), static_kw, dyn_kw

    def _arg_name(self, i: int) -> str:
        return self._param_names[i] if i < len(self._param_names) else f"args[{i}]"

    def _dynamic_names(self, n_dyn: int, dyn_kw: dict) -> list:
        names = [self._arg_name(i) for i in range(n_dyn + len(self.static_argnums))
                 if i not in self.static_argnums][:n_dyn]
        return names + list(dyn_kw)

    def _layout(self, dyn: tuple, dyn_kw: dict):
        tree = (dyn, dyn_kw) if dyn_kw else dyn
        leaves, td = pytree.flatten(tree)
        lay = self._layouts.get(td)
        if lay is None:
            names = self._dynamic_names(len(dyn), dyn_kw)
            paths = []
            if dyn_kw:
                pos_td, kw_td = td.children
                for name, child in zip(names, pos_td.children):
                    paths += pytree.leaf_paths(child, name)
                for key, child in zip(kw_td.meta, kw_td.children):
                    paths += pytree.leaf_paths(child, key)
            else:
                for name, child in zip(names, td.children):
                    paths += pytree.leaf_paths(child, name)
            specs = [_Leaf(p, _dyn_for(p, self.dynamic_axes)) for p in paths]
            donated = []
            if self.donate_argnums:
                don_names = {self._arg_name(i) for i in self.donate_argnums}
                donated = [k for k, p in enumerate(paths) if p.split("/")[0] in don_names]
            lay = self._layouts[td] = _Layout(td, specs, tuple(donated))
        return leaves, lay

    # ---- the call path ----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        dyn, statics, static_kw, dyn_kw = self._split(args, kwargs)
        leaves, lay = self._layout(dyn, dyn_kw)
        specs = lay.leaves
        key = (lay.treedef, statics, tuple(sorted(static_kw.items())) if static_kw else (),
               tuple(_abstract(x, s.dyn, s.path) for x, s in zip(leaves, specs)))
        entry = self._entries.get(key)
        if entry is None:
            entry = self._build(key, dyn, statics, static_kw, dyn_kw, leaves, lay)
        dims = _read_dims(leaves, specs, self.name) if entry.has_dims else _NO_DIMS
        out = entry.compiled.run_leaves(leaves, dims)
        for k in lay.donated:
            x = leaves[k]
            if type(x) is Array:
                x.delete()
        return pytree.unflatten(entry.out_tree, out)

    def _build(self, key, dyn, statics, static_kw, dyn_kw, leaves, lay):
        traced = self._trace_with(dyn, statics, static_kw, dyn_kw, leaves, lay)
        compiled = traced.lower(self.backend).compile()
        entry = _Entry(traced, compiled)
        self._entries[key] = entry
        return entry

    # ---- stages -----------------------------------------------------------------------------
    def trace(self, *args, **kwargs) -> "Traced":
        dyn, statics, static_kw, dyn_kw = self._split(args, kwargs)
        leaves, lay = self._layout(dyn, dyn_kw)
        return self._trace_with(dyn, statics, static_kw, dyn_kw, leaves, lay)

    def lower(self, *args, **kwargs) -> "Lowered":
        return self.trace(*args, **kwargs).lower(self.backend)

    def _trace_with(self, dyn, statics, static_kw, dyn_kw, leaves, lay) -> "Traced":
        self.trace_count += 1
        ctx = TraceContext(self.name)
        in_avals = []
        with ctx:
            tracers = []
            for i, (x, spec) in enumerate(zip(leaves, lay.leaves)):
                a = _abstract(x, spec.dyn, spec.path)
                if a[0] == "weak":
                    d, shape, weak = a[1], (), True
                else:
                    d, shape, weak = a[0], tuple(var(s) if isinstance(s, str) else s for s in a[1]), False
                nid = ctx.graph.add("Input", (), shape, d, index=i, name=spec.path)
                tracers.append(Tracer(ctx, nid, View.contiguous(shape), d, weak))
                in_avals.append((spec.path, d, shape))
            rebuilt = pytree.unflatten(lay.treedef, tracers)
            pos, kw = (rebuilt if dyn_kw else (rebuilt, {}))
            call_args = list(pos)
            for i, v in statics:
                call_args.insert(i, v)
            kw = {**kw, **static_kw}
            result = self.fn(*call_args, **kw)
            out_leaves, out_tree = pytree.flatten(result)
            for k, o in enumerate(out_leaves):
                if not isinstance(o, Tracer):
                    if o is None:
                        continue
                    try:
                        o = lift(o, ctx)
                    except TypeError:
                        raise TracingError(
                            f"jitted function '{self.name}' returned a {type(o).__name__} at output "
                            f"{k}; results must be arrays, scalars or pytrees of them") from None
                elif o._ctx is not ctx:
                    raise TracingError(f"jitted function '{self.name}' returned a tracer from another trace")
                ctx.graph.add("Output", ((o._node, o._view),), o.shape, o.dtype, index=k)
        graph = simplify(ctx.graph)
        return Traced(self, graph, in_avals, out_tree, self.buckets, self.search)

    def clear_cache(self):
        self._entries.clear()
        self._layouts.clear()

    def __repr__(self):
        return f"<luminal_fn.jit of {self.name}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


_NO_DIMS: dict = {}


class _Entry:
    __slots__ = ("traced", "compiled", "out_tree", "has_dims")

    def __init__(self, traced, compiled):
        self.traced = traced
        self.compiled = compiled
        self.out_tree = traced.out_tree
        self.has_dims = bool(traced.symbols)


def _read_dims(leaves, specs, fn_name) -> dict:
    dims: dict = {}
    for x, s in zip(leaves, specs):
        if not s.dyn:
            continue
        shape = x.shape
        for ax, sym in s.dyn.items():
            v = shape[ax]
            have = dims.get(sym)
            if have is None:
                dims[sym] = v
            elif have != v:
                raise ShapeError(
                    f"{fn_name}: dynamic dim {sym!r} is {have} in one argument but {v} in {s.path!r} "
                    f"(axis {ax}); every axis named {sym!r} must have the same length in a call")
    return dims


def _hashable(v, fn_name, arg):
    try:
        hash(v)
    except TypeError:
        raise TypeError(
            f"{fn_name}: static argument {arg!r} of type {type(v).__name__} is not hashable; static "
            "arguments are part of the compile cache key (use a tuple instead of a list, or pass "
            "the value as a traced array)") from None
    return v


def _normalize_dynamic_axes(spec, names) -> dict:
    if not spec:
        return {}
    out = {}
    for k, v in spec.items():
        if isinstance(k, int):
            k = names[k] if k < len(names) else f"args[{k}]"
        if isinstance(v, (list, tuple)):
            v = dict(v) if v and isinstance(v[0], (list, tuple)) else {i: s for i, s in enumerate(v) if s}
        out[str(k)] = {int(a): str(s) for a, s in v.items()}
    return out


def _dyn_for(path: str, spec: dict) -> dict:
    best, best_len = {}, -1
    for k, v in spec.items():
        if (path == k or path.startswith(k + "/")) and len(k) > best_len:
            best, best_len = v, len(k)
    return best


# ---- stage objects ------------------------------------------------------------------------------
class Traced:
    """A traced function: the HLIR graph and the abstract signature it was traced for."""

    def __init__(self, jitted: Jitted, graph: Graph, in_avals, out_tree, buckets, search):
        self.jitted = jitted
        self.hlir = graph
        self.in_avals = in_avals
        self.out_tree = out_tree
        self.buckets = buckets
        self.search = search
        self.symbols = sorted(graph.symbols())

    def as_text(self) -> str:
        sig = ", ".join(f"{p}: {type_str(d, s)}" for p, d, s in self.in_avals)
        return f"{self.hlir.name}({sig})\n{self.hlir.as_text()}"

    __str__ = as_text

    def lower(self, backend=None) -> "Lowered":
        from ..optimize import lower_graph

        be = get_backend(backend)
        program = lower_graph(self.hlir, be, search=self.search, buckets=self.buckets,
                              symbols=self.symbols, fn_name=self.jitted.name)
        return Lowered(self, be, program)


class Lowered:
    """The e-graph of every implementation the rules know, before search."""

    def __init__(self, traced: Traced, backend, program):
        self.traced = traced
        self.backend = backend
        self.program = program

    def as_text(self) -> str:
        return self.program.as_text()

    def stats(self) -> dict:
        return self.program.stats()

    def compile(self) -> "Compiled":
        self.traced.jitted.compile_count += 1
        return Compiled(self, self.program.compile())


class Compiled:
    """Searched and compiled: callable with the same arguments as the traced function."""

    def __init__(self, lowered: Lowered, runner):
        self.lowered = lowered
        self.backend = lowered.backend
        self.runner = runner
        self._in_dtypes = [d for _, d, _ in lowered.traced.in_avals]

    def run_leaves(self, leaves: Sequence[Any], dims: dict) -> list:
        be = self.backend
        bufs = []
        for x, d in zip(leaves, self._in_dtypes):
            if type(x) is Array:
                if x._backend is be:
                    bufs.append(x.buffer)
                    continue
                x = np.asarray(x)
            bufs.append(_to_buffer(be, x, d))
        outs = self.runner.run(bufs, dims)
        return [Array(b, be, tuple(b.shape), dt.canonicalize(b.dtype) if not hasattr(b, "_lf_dtype") else b._lf_dtype)
                for b in outs]

    def __call__(self, *args, **kwargs):
        j = self.lowered.traced.jitted
        dyn, statics, static_kw, dyn_kw = j._split(args, kwargs)
        leaves, lay = j._layout(dyn, dyn_kw)
        dims = _read_dims(leaves, lay.leaves, j.name)
        return pytree.unflatten(self.lowered.traced.out_tree, self.run_leaves(leaves, dims))

    def as_text(self) -> str:
        return self.runner.as_text()

    def cost(self) -> dict:
        return self.runner.cost()


def _to_buffer(be, x, d: dt.DType):
    if type(x) is np.ndarray:
        if x.dtype != d.np:
            x = dt.narrow_array(x, "an argument")
        return be.from_numpy(x)
    if be.is_buffer(x):
        return x
    return be.from_numpy(np.asarray(x, dtype=d.np) if not hasattr(x, "__array__") or isinstance(x, _SCALARS)
                         else dt.narrow_array(np.asarray(x), "an argument"))


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        dynamic_axes=None, buckets=None, backend=None, search=None):
    """Compile ``fn`` (usable as ``@jit`` and ``@jit(...)``); see docs/api.md for every option."""
    if fn is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, dynamic_axes=dynamic_axes,
                             buckets=buckets, backend=backend, search=search)
    return Jitted(fn, static_argnums, static_argnames, donate_argnums, dynamic_axes, buckets,
                  backend, search)


def make_hlir(fn: Callable, **jit_kwargs):
    """Like ``jax.make_jaxpr``: ``make_hlir(f)(*args)`` returns the traced graph (print it)."""
    j = fn if isinstance(fn, Jitted) else Jitted(fn, **jit_kwargs)

    def trace(*args, **kwargs):
        return j.trace(*args, **kwargs)

    return trace

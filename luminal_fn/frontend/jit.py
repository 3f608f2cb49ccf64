"""``luminal_fn.jit``: trace once per abstract signature, compile per backend, dispatch fast.

Stages mirror JAX: ``f.trace(*args)`` -> :class:`Traced`, ``.lower()`` -> :class:`Lowered`,
``.compile()`` -> :class:`Compiled`. Calling ``f`` runs all three once per signature and then
only dispatches. Two caches sit in front of the compiled graphs:

* the trace cache, keyed by the abstract signature (pytree structure, static values, dtypes,
  shapes with dynamic axes as symbols): a hit never retraces;
* a dispatch cache for the common call ``f(a, b, ...)`` with every parameter given by position
  and arguments that are arrays, Python scalars, static values, or str-keyed dicts / lists /
  tuples of them, keyed by concrete shapes and raw dtypes so a repeat call skips binding, the
  general flatten and dtype canonicalisation. Its misses go through the trace cache, so a
  new value of a dynamic dim adds a dispatch entry but never a trace or a compile.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable

from ..ir.expr import var
from ..backends.numpy.executor import evaluate_node
from ..ir.passes import simplify
from ..ir.view import View
from . import pytree
from .errors import ArgumentError, LuminalError, TracingError, annotate, luminal_cause
from .fast_match import matcher_for
from .signature import abstract, check_dims, fast_key, hashable, Layout, Leaf
from .stages import Lowered, Traced
from .tracer import TraceContext, Tracer, current, lift

pytree.register_leaf_type(Tracer)

_DISPATCH_CACHE_LIMIT = 4096  # concrete signatures kept per function (dynamic dims add entries)
_MATCHERS_KEPT = 4  # generated matchers of recent argument structures (prefill, decode, ...)
_MATCHER_BUILDS = 32  # after this many, new structures take the dispatch cache's key alone


class Jitted:
    """A function wrapped by :func:`jit`."""

    def __init__(self, fn: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 dynamic_axes=None, buckets=None, backend=None, search=None, donate_argnames=()):
        if not callable(fn):
            raise ArgumentError(f"jit expects a function, got a {type(fn).__name__}")
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
        self._all_names = {p.name for p in params}
        self._has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        self._has_varkw = any(p.kind == p.VAR_KEYWORD for p in params)
        self._has_kwonly = any(p.kind == p.KEYWORD_ONLY for p in params)
        n = len(self._param_names)
        nums = set(self._argnums(static_argnums, "static_argnums"))
        static_argnames = self._argnames(static_argnames, "static_argnames")
        nums |= {self._param_names.index(name) for name in static_argnames if name in self._param_names}
        self.static_argnums = frozenset(nums)
        self.static_argnames = frozenset(static_argnames) | {self._param_names[i] for i in nums if i < n}
        # donated by name, as leaf paths start with their argument's name (keyword calls included)
        donate_argnames = self._argnames(donate_argnames, "donate_argnames")
        self.donate_argnums = frozenset(self._argnums(donate_argnums, "donate_argnums")) | {
            self._param_names.index(name) for name in donate_argnames if name in self._param_names}
        self.donate_argnames = frozenset(donate_argnames) | {self._arg_name(i) for i in self.donate_argnums}
        both = self.static_argnames & self.donate_argnames
        if both:
            raise ArgumentError(f"jit({self.name}): argument {min(both)!r} is both static and "
                                "donated; only arrays can be donated")
        self.dynamic_axes = _normalize_dynamic_axes(dynamic_axes, self._param_names)
        if self._sig is not None and not self._has_varkw and not self._has_varargs:
            for k in self.dynamic_axes:
                if k.split("/")[0] not in self._all_names:
                    raise ArgumentError(f"jit({self.name}): dynamic_axes names {k!r}, but "
                                        f"{self.name}{self._sig} has no argument {k.split('/')[0]!r}")
        self.buckets = buckets
        self.backend = backend
        self.search = search
        self._layouts: dict = {}
        self._entries: dict = {}  # abstract signature -> Compiled
        self._fast: dict = {}  # concrete signature of a plain positional call -> Compiled
        self._fast_dynamic = None  # {leaf: dynamic axes} the keys in _fast leave out
        self._matchers: list = []  # fast_match.ArgumentMatchers of recent structures, last hit first
        self._matcher_builds = 0
        # The dispatch cache needs every parameter given positionally (no defaults to fill in).
        self._fast_ok = self._sig is not None and not self._has_kwonly
        self._n_params = n
        self.trace_count = 0
        self.compile_count = 0

    def _argnames(self, names, what: str) -> tuple:
        names = (names,) if isinstance(names, str) else tuple(names)
        for name in names:
            if not isinstance(name, str):
                raise ArgumentError(f"jit({self.name}): {what} must be parameter names, got {name!r}")
            if self._sig is not None and name not in self._all_names and not self._has_varkw:
                raise ArgumentError(f"jit({self.name}): {what} names {name!r}, which is not a "
                                    f"parameter of {self.name}{self._sig}")
        return names

    def _argnums(self, nums, what: str) -> list:
        nums = (nums,) if isinstance(nums, int) else tuple(nums)
        n = len(self._param_names)
        out = []
        for i in nums:
            if not isinstance(i, int):
                raise ArgumentError(f"jit({self.name}): {what} must be ints, got {i!r}")
            if i < 0:
                if not n:
                    raise ArgumentError(f"jit({self.name}): negative {what} need a known signature")
                i += n
            if self._sig is not None and not self._has_varargs and not 0 <= i < n:
                raise ArgumentError(f"jit({self.name}): {what} has {i}, but {self.name} takes "
                                    f"{n} positional argument(s)")
            out.append(i)
        return out

    # ---- argument handling ------------------------------------------------------------------
    def _split(self, args: tuple, kwargs: dict):
        """(dynamic positional args, static values key, static kwargs, dynamic kwargs)."""
        if self._sig is not None and (kwargs or len(args) != self._n_params or self._has_kwonly):
            try:
                bound = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise ArgumentError(f"{self.name}: {e}") from None
            # Defaults are not applied: an omitted argument keeps its Python default value inside
            # the function (as in JAX), so `keepdims=False` stays a bool, never a traced scalar.
            pos, kw = [], {}
            skipped = False  # after an omitted positional parameter the rest go by name
            for name, p in self._sig.parameters.items():
                if name not in bound.arguments:
                    skipped = skipped or p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    continue
                val = bound.arguments[name]
                if p.kind == p.VAR_POSITIONAL:
                    pos.extend(val)
                elif p.kind == p.VAR_KEYWORD:
                    kw.update(val)
                elif p.kind == p.KEYWORD_ONLY or skipped:
                    kw[name] = val
                else:
                    pos.append(val)
            args, kwargs = tuple(pos), kw
        elif kwargs:
            raise ArgumentError(f"{self.name}: keyword arguments need an inspectable signature")
        statics, dyn = [], []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                statics.append((i, hashable(a, self.name, self._arg_name(i))))
            else:
                dyn.append(a)
        static_kw, dyn_kw = {}, {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                static_kw[k] = hashable(v, self.name, k)
            else:
                dyn_kw[k] = v
        return tuple(dyn), tuple(statics), static_kw, dyn_kw

    def _arg_name(self, i: int) -> str:
        return self._param_names[i] if i < len(self._param_names) else f"args[{i}]"

    def _dynamic_names(self, n_dyn: int) -> list:
        names = [self._arg_name(i) for i in range(n_dyn + len(self.static_argnums))
                 if i not in self.static_argnums]
        return names[:n_dyn]

    def _layout(self, dyn: tuple, dyn_kw: dict):
        tree = (dyn, dyn_kw) if dyn_kw else dyn
        leaves, td = pytree.flatten(tree)
        lay = self._layouts.get(td)
        if lay is None:
            names = self._dynamic_names(len(dyn))
            paths: list = []
            pos_td, kw_td = td.children if dyn_kw else (td, None)
            for name, child in zip(names, pos_td.children):
                paths += pytree.leaf_paths(child, name)
            if kw_td is not None:
                for key, child in zip(kw_td.meta, kw_td.children):
                    paths += pytree.leaf_paths(child, key)
            specs = [Leaf(p, _dyn_for(p, self.dynamic_axes)) for p in paths]
            donated = []
            if self.donate_argnames:
                donated = [k for k, p in enumerate(paths) if p.split("/")[0] in self.donate_argnames]
            lay = self._layouts[td] = Layout(td, specs, tuple(donated))
        return leaves, lay

    def _signature(self, leaves, lay, statics, static_kw) -> tuple:
        return (lay.treedef, statics, tuple(sorted(static_kw.items())) if static_kw else (),
                tuple(abstract(x, s.dyn, s.path, self.name) for x, s in zip(leaves, lay.leaves)))

    # ---- the call path ----------------------------------------------------------------------
    @property
    def _matcher(self):
        """The generated matcher hit last (None before any)."""
        return self._matchers[0] if self._matchers else None

    def __call__(self, *args, **kwargs):
        if not kwargs:
            matchers = self._matchers
            for j, m in enumerate(matchers):
                hit = m.match(args)
                if hit is not None:
                    if j:
                        matchers.insert(0, matchers.pop(j))
                    leaves, bufs = hit
                    if bufs is not None:  # every leaf an Array already on the backend
                        return m.compiled.call_buffers(leaves, bufs)
                    return m.compiled.call_leaves(leaves)
            if self._fast:
                fk = fast_key(args, self.static_argnums, self._fast_dynamic)
                if fk is not None:
                    try:
                        compiled = self._fast.get(fk[0])
                    except TypeError:  # an unhashable static value: the slow path says so clearly
                        compiled = None
                    if compiled is not None:
                        self._learn_structure(args, compiled)
                        return compiled.call_leaves(fk[1])
        return self._call(args, kwargs)

    def _learn_structure(self, args, compiled):
        """A matcher for this call's structure, tried first from now on (calls alternating
        between a few structures, such as a prompt step on host data and a decode step on the
        device token, each match their own)."""
        if self.static_argnums or self._matcher_builds >= _MATCHER_BUILDS:
            return
        self._matcher_builds += 1
        m = matcher_for(args, self._fast_dynamic, compiled, compiled.backend)
        if m is not None:
            self._matchers.insert(0, m)
            del self._matchers[_MATCHERS_KEPT:]

    def _call(self, args, kwargs):
        if current() is not None and any(isinstance(x, Tracer) for x in pytree.tree_leaves((args, kwargs))):
            return self.fn(*args, **kwargs)  # a jitted function called while tracing: inline it
        dyn, statics, static_kw, dyn_kw = self._split(args, kwargs)
        leaves, lay = self._layout(dyn, dyn_kw)
        key = self._signature(leaves, lay, statics, static_kw)
        compiled = self._entries.get(key)
        if compiled is None:
            check_dims(leaves, lay, self.name)  # before tracing: a mismatch is the caller's error
            traced = self._trace_with(key, dyn, statics, static_kw, dyn_kw, leaves, lay)
            compiled = self._entries[key] = traced.lower().compile(example=leaves)
        n = self._n_params
        if not kwargs and self._fast_ok and (len(args) == n or (self._has_varargs and len(args) > n)):
            dynamic = {k: frozenset(sp.dyn) for k, sp in enumerate(lay.leaves) if sp.dyn} or None
            fk = fast_key(args, self.static_argnums, dynamic)
            # stored only when the fast flattening found exactly the slow path's leaves
            if fk is not None and len(fk[1]) == len(leaves) and all(
                    a is b for a, b in zip(fk[1], leaves)):
                if len(self._fast) >= _DISPATCH_CACHE_LIMIT or dynamic != self._fast_dynamic:
                    self._fast.clear()  # keys made with another structure's mask would miss
                    self._matchers.clear()  # (and matchers built under it)
                self._fast_dynamic = dynamic
                self._fast[fk[0]] = compiled
                self._learn_structure(args, compiled)  # matched without a key from now on
        return compiled.call_leaves(leaves)

    # ---- stages -----------------------------------------------------------------------------
    def trace(self, *args, **kwargs) -> "Traced":
        dyn, statics, static_kw, dyn_kw = self._split(args, kwargs)
        leaves, lay = self._layout(dyn, dyn_kw)
        key = self._signature(leaves, lay, statics, static_kw)
        return self._trace_with(key, dyn, statics, static_kw, dyn_kw, leaves, lay)

    def lower(self, *args, **kwargs) -> "Lowered":
        return self.trace(*args, **kwargs).lower()

    def _trace_with(self, key, dyn, statics, static_kw, dyn_kw, leaves, lay) -> "Traced":
        self.trace_count += 1
        ctx = TraceContext(self.name)
        in_avals = []
        with ctx:
            tracers = []
            for i, (a, spec) in enumerate(zip(key[3], lay.leaves)):
                if a[0] == "weak":
                    d, shape, weak = a[1], (), True
                else:
                    d, shape, weak = a[0], tuple(var(s) if isinstance(s, str) else s for s in a[1]), False
                nid = ctx.graph.add("Input", (), shape, d, index=i, name=spec.path)
                tracers.append(Tracer(ctx, nid, View.contiguous(shape), d, weak))
                in_avals.append((spec.path, d, shape, weak))
            rebuilt = pytree.unflatten(lay.treedef, tracers)
            pos, kw = (rebuilt if dyn_kw else (rebuilt, {}))
            call_args = list(pos)
            for i, v in statics:
                call_args.insert(i, v)
            kw = {**kw, **static_kw}
            try:
                result = self.fn(*call_args, **kw)
                out_leaves, out_tree = pytree.flatten(result)
                self._add_outputs(ctx, out_leaves)
            except LuminalError as e:
                annotate(e, self.name, e.__traceback__)
                raise
            except Exception as e:
                inner = luminal_cause(e)
                if inner is None:
                    raise
                annotate(inner, self.name, e.__traceback__)
                raise inner.with_traceback(e.__traceback__) from None
        graph = simplify(ctx.graph, evaluate=evaluate_node)
        traced = Traced(self, graph, in_avals, out_tree, key, lay)
        traced.dim_checks = tuple(ctx.dim_checks)
        return traced

    def _add_outputs(self, ctx, out_leaves):
        for k, o in enumerate(out_leaves):
            if not isinstance(o, Tracer):
                try:
                    o = lift(o, ctx)
                except (TypeError, ValueError):
                    raise TracingError(
                        f"jitted function '{self.name}' returned a {type(o).__name__} at output "
                        f"{k}; results must be arrays, scalars or pytrees of them") from None
            elif o._ctx is not ctx:
                o._check_live()
                raise TracingError(f"jitted function '{self.name}' returned a traced value of "
                                   f"another function ('{o._ctx.fn_name}')")
            ctx.graph.add("Output", ((o._node, o._view),), o.shape, o.dtype, index=k)

    def compiled(self) -> list:
        """The Compiled stage of every signature called so far, oldest first (their
        ``.cost()``, ``.as_text()`` and ``.lowered.stats()`` describe the search and kernels)."""
        return list(self._entries.values())

    def clear_cache(self):
        self._entries.clear()
        self._layouts.clear()
        self._fast.clear()
        self._fast_dynamic = None
        self._matchers.clear()

    def __repr__(self):
        return f"<luminal_fn.jit of {self.name}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


def _normalize_dynamic_axes(spec, names) -> dict:
    if not spec:
        return {}
    out = {}
    for k, v in spec.items():
        if isinstance(k, int):
            k = names[k] if k < len(names) else f"args[{k}]"
        if isinstance(v, (list, tuple)):
            v = dict(v) if v and isinstance(v[0], (list, tuple)) else {i: s for i, s in enumerate(v) if s}
        if not isinstance(v, dict) or not all(isinstance(a, int) and a >= 0 and isinstance(s, str)
                                              for a, s in v.items()):
            raise ArgumentError(f"dynamic_axes[{k!r}] must map non-negative axis numbers to symbol "
                                f"names, like {{0: 's'}}; got {v!r}")
        out[str(k)] = dict(v)
    return out


def _dyn_for(path: str, spec: dict) -> dict:
    best, best_len = {}, -1
    for k, v in spec.items():
        if (path == k or path.startswith(k + "/")) and len(k) > best_len:
            best, best_len = v, len(k)
    return best


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), dynamic_axes=None, buckets=None, backend=None, search=None):
    """Compile ``fn`` (usable as ``@jit`` and ``@jit(...)``); its options: "`jit` options" in docs/api.md."""
    if fn is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                             dynamic_axes=dynamic_axes, buckets=buckets, backend=backend,
                             search=search)
    return Jitted(fn, static_argnums, static_argnames, donate_argnums, dynamic_axes, buckets,
                  backend, search, donate_argnames)


def make_hlir(fn: Callable, **jit_kwargs):
    """Like ``jax.make_jaxpr``: ``make_hlir(f)(*args)`` returns the traced graph (print it)."""
    j = fn if isinstance(fn, Jitted) else Jitted(fn, **jit_kwargs)

    def trace(*args, **kwargs):
        return j.trace(*args, **kwargs)

    return trace

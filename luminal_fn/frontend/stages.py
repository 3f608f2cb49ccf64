"""The stages of a jitted function, as in JAX: :class:`Traced` (the HLIR graph of one abstract
signature), :class:`Lowered` (its e-graph, before search) and :class:`Compiled` (searched and
compiled for a backend; it converts a call's leaves to backend buffers, reads the dynamic dims,
runs and wraps the results). ``Jitted`` (jit.py) makes them and keeps them per signature."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..backends import get_backend
from ..ir import dtypes as dt
from ..ir.graph import Graph
from .array import Array, _named
from .errors import ArgumentError, ShapeError, TracingError
from .result_builder import result_builder
from .signature import SCALARS, aval_of, donated_error, sig_text
from .tracer import Tracer

if TYPE_CHECKING:
    from .jit import Jitted


class Traced:
    """A traced function: the HLIR graph and the abstract signature it was traced for."""

    def __init__(self, jitted: "Jitted", graph: Graph, in_avals, out_tree, key, layout):
        self.jitted = jitted
        self.hlir = graph
        self.in_avals = in_avals
        self.out_tree = out_tree
        self.key = key
        self.layout = layout
        self.buckets = jitted.buckets
        self.search = jitted.search
        self.symbols = sorted(graph.symbols())
        self.dim_checks = ()  # DimChecks: dim equalities the trace assumed; every call checks them

    def signature_text(self) -> str:
        return sig_text(self.in_avals)

    def as_text(self) -> str:
        checks = "".join(f"\n  requires {c!r}" for c in self.dim_checks)
        return f"{self.hlir.name}({self.signature_text()}){checks}\n{self.hlir.as_text()}"

    __str__ = as_text

    def __repr__(self):
        return f"<Traced {self.hlir.name}({self.signature_text()})>"

    def lower(self, backend=None) -> "Lowered":
        from ..optimize import lower_graph

        be = get_backend(backend if backend is not None else self.jitted.backend)
        program = lower_graph(self.hlir, be, search=self.search, buckets=self.buckets,
                              symbols=self.symbols, fn_name=self.jitted.name,
                              dim_checks=[(c.lhs, c.rhs) for c in self.dim_checks],
                              donated=tuple(self.layout.donated))
        return Lowered(self, be, program)


class Lowered:
    """The e-graph of every implementation the rules know, before search."""

    def __init__(self, traced: Traced, backend, program):
        self.traced = traced
        self.backend = backend
        self.program = program

    @property
    def egraph_built(self) -> bool:
        """Whether the e-graph has been built: ``as_text``, ``stats`` and ``rule_report`` build
        it, and so does compiling a bucket whose LLIR the search cache does not hold; a compile
        served wholly from the cache never does."""
        return self.program.egraph_built

    def as_text(self) -> str:
        return self.program.as_text()

    def stats(self) -> dict:
        return self.program.stats()

    def rule_report(self, top: int = 15) -> str:
        """Per-rule egglog time and match counts of this e-graph's build, slowest first."""
        return self.program.rule_report(top)

    def compile(self, example=None) -> "Compiled":
        """Search and compile. ``example``: the flat arguments of a real call; the search times
        candidates on its arrays (not the donated ones) instead of random data where it can."""
        self.traced.jitted.compile_count += 1
        return Compiled(self, self.program.compile(self._example_buffers(example)))

    def _example_buffers(self, leaves) -> dict:
        if leaves is None:
            return {}
        out = {}
        donated = set(self.traced.layout.donated)
        for k, (x, aval) in enumerate(zip(leaves, self.traced.in_avals)):
            if k in donated:
                continue  # a candidate must never touch what the caller gave away
            if type(x) is Array and x._backend is self.backend and x.dtype is aval[1] \
                    and not x._deleted:
                out[k] = x._buf
            elif type(x) is np.ndarray and x.dtype == dt.to_numpy(aval[1]):
                out[k] = x
        return out


class Compiled:
    """Searched and compiled: callable with the same arguments as the traced function."""

    def __init__(self, lowered: Lowered, runner):
        traced = lowered.traced
        self.lowered = lowered
        self.backend = lowered.backend
        self.runner = runner
        self._run = runner.run
        self._name = traced.jitted.name
        lay = traced.layout
        self._paths = [s.path for s in lay.leaves]
        self._in_np = [dt.to_numpy(d) for _, d, _, _ in traced.in_avals]
        self._donated = lay.donated
        self._dim_reads = [(k, ax, sym) for k, s in enumerate(lay.leaves) for ax, sym in s.dyn.items()]
        self._dim_checks = traced.dim_checks
        g = traced.hlir
        self._out_dtypes = [g.nodes[o].dtype for o in g.outputs]
        self._wrap = result_builder(traced.out_tree, self.backend, self._out_dtypes)

    # ---- dispatch: convert, read dims, run, wrap ----------------------------------------------
    def call_leaves(self, leaves: Sequence[Any]):
        be = self.backend
        bufs = []
        add = bufs.append
        in_np = self._in_np
        host = []  # (position in bufs, NumPy array): moved together below
        for k, x in enumerate(leaves):
            t = type(x)
            if t is Array:
                if x._deleted:
                    raise donated_error(self._name, self._paths[k])
                if x._backend is be:
                    add(x._buf)
                    continue
                x = np.asarray(x)
                t = np.ndarray
            if t is np.ndarray:
                d = x.dtype
                if d is not in_np[k] and d != in_np[k]:
                    x = dt.narrow_array(x, f"{self._name}: argument {self._paths[k]!r}")
                host.append((len(bufs), x))
                add(None)
            elif hasattr(x, "__dlpack__") and not isinstance(x, (np.generic, Tracer)):
                add(self._foreign_leaf(x, k))
            else:
                host.append((len(bufs), self._other_leaf(x, k)))
                add(None)
        if len(host) == 1:
            bufs[host[0][0]] = be.from_numpy(host[0][1])
        elif host:
            for (i, _), b in zip(host, be.from_numpy_many([x for _, x in host])):
                bufs[i] = b
        return self.call_buffers(leaves, bufs)

    def call_buffers(self, leaves: Sequence[Any], bufs: list):
        """Run on the backend buffers ``bufs`` of ``leaves`` (already converted)."""
        dims = self._read_dims(leaves) if self._dim_reads else {}
        outs = self._run(bufs, dims)
        for k in self._donated:
            x = leaves[k]
            if type(x) is Array:
                x.delete(self._name)
        return self._wrap(outs)

    def _foreign_leaf(self, x, k):
        """A PyTorch/JAX/CuPy array: its memory, read in place, where the backend's device holds
        it; a copy from another device."""
        try:
            return self.backend.from_dlpack(x)
        except (TypeError, ValueError, BufferError, OverflowError) as e:
            raise _named(e, f"{self._name}: argument {self._paths[k]!r}") from None

    def _other_leaf(self, x, k) -> np.ndarray:
        """A Python or NumPy scalar, or a foreign array, as a NumPy array of the traced dtype."""
        npd = self._in_np[k]
        if isinstance(x, SCALARS) and not isinstance(x, np.generic):
            if npd.kind == "i" and not -2**31 <= x < 2**31:
                raise OverflowError(f"{self._name}: argument {self._paths[k]!r} is the Python int "
                                    f"{x}, outside the int32 range that luminal_fn computes in")
            if npd.kind == "f" and abs(x) > 3.4028234663852886e38 and x not in (float("inf"), float("-inf")):
                raise OverflowError(f"{self._name}: argument {self._paths[k]!r} is {x}, beyond the "
                                    "float32 range that luminal_fn computes in")
            return np.asarray(x, dtype=npd)
        if isinstance(x, Tracer):
            raise TracingError(f"{self._name}: argument {self._paths[k]!r} is a traced value; "
                               "call the jitted function itself while tracing")
        arr = dt.narrow_array(np.asarray(x), f"{self._name}: argument {self._paths[k]!r}")
        return arr

    def _read_dims(self, leaves) -> dict:
        dims: dict = {}
        for k, ax, sym in self._dim_reads:
            v = leaves[k].shape[ax]
            have = dims.get(sym)
            if have is None:
                dims[sym] = v
            elif have != v:
                first = next(self._paths[j] for j, a, s in self._dim_reads if s == sym)
                raise ShapeError(
                    f"{self._name}: dynamic dim {sym!r} is {have} in argument {first!r} but {v} in "
                    f"{self._paths[k]!r} (axis {ax}); every axis named {sym!r} in dynamic_axes must "
                    "have the same length in one call")
        for c in self._dim_checks:
            c.check(dims, self._name)
        return dims

    def __call__(self, *args, **kwargs):
        traced = self.lowered.traced
        j = traced.jitted
        dyn, statics, static_kw, dyn_kw = j._split(args, kwargs)
        leaves, lay = j._layout(dyn, dyn_kw)
        key = j._signature(leaves, lay, statics, static_kw)
        if key != traced.key:
            got = sig_text([(s.path, *aval_of(a)) for s, a in zip(lay.leaves, key[3])])
            raise ArgumentError(
                f"{j.name}: this Compiled stage was built for ({traced.signature_text()}) and "
                f"cannot run ({got}) or other static values / structure; call the jitted function "
                "(it traces new signatures) or compile one for these arguments")
        return self.call_leaves(leaves)

    def as_text(self) -> str:
        return self.runner.as_text()

    def cost(self) -> dict:
        return self.runner.cost()


__all__ = ["Traced", "Lowered", "Compiled"]

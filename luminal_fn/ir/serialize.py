"""Graphs as bytes: an extracted LLIR kept in the search cache, so that a later process whose
every bucket is cached runs it without building the e-graph again.

The bytes are a pickle of the graph's nodes, read back by an unpickler that resolves only the
classes a graph is made of (Graph, Node, View, interned Exprs, dtypes, NumPy arrays and scalars):
an entry that names anything else is refused with :class:`GraphFormatError`, never imported or
called. Exprs and dtypes are re-interned as they load (their ``__reduce__``), so identity
comparisons hold against the running process's own. The graph's CSE table is not stored; it is
rebuilt from the nodes.
"""
from __future__ import annotations

import io
import pickle
import zlib

from .graph import Graph, Node

# (module, name) pairs the reader resolves; NumPy's array and scalar reconstructors under both
# its 1.x (numpy.core) and 2.x (numpy._core) module names
_ALLOWED = {
    ("luminal_fn.ir.graph", "Graph"), ("luminal_fn.ir.graph", "Node"),
    ("luminal_fn.ir.view", "View"), ("luminal_fn.ir.expr", "_rebuild"),
    ("luminal_fn.ir.dtypes", "_by_name"),
    ("numpy", "dtype"), ("numpy", "ndarray"),
}
for _core in ("numpy.core", "numpy._core"):
    _ALLOWED |= {(f"{_core}.multiarray", "_reconstruct"), (f"{_core}.multiarray", "scalar"),
                 (f"{_core}.numeric", "_frombuffer")}
_ALLOWED = frozenset(_ALLOWED)


class GraphFormatError(ValueError):
    """Bytes that are not a graph written by :func:`graph_to_bytes`."""


class _GraphUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise GraphFormatError(f"a stored graph may not name {module}.{name}")
        return super().find_class(module, name)


def graph_to_bytes(graph: Graph) -> bytes:
    """The graph's name, nodes, inputs and outputs, pickled and compressed."""
    state = (graph.name, graph.nodes, graph.inputs, graph.outputs)
    return zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 6)


def graph_from_bytes(data: bytes) -> Graph:
    """The graph ``graph_to_bytes`` wrote; :class:`GraphFormatError` for anything else."""
    try:
        state = _GraphUnpickler(io.BytesIO(zlib.decompress(data))).load()
    except GraphFormatError:
        raise
    except Exception as e:  # truncated, corrupt, or from an incompatible layout
        raise GraphFormatError(f"not a stored graph ({type(e).__name__}: {e})") from None
    if not (isinstance(state, tuple) and len(state) == 4 and isinstance(state[0], str)
            and all(isinstance(x, list) for x in state[1:])):
        raise GraphFormatError("not a stored graph (unexpected layout)")
    name, nodes, inputs, outputs = state
    if not all(n is None or isinstance(n, Node) for n in nodes):
        raise GraphFormatError("not a stored graph (a node of another type)")
    ids = {n.id for n in nodes if n is not None}
    if any(n is not None and (n.id != k or any(i not in ids for i, _ in n.inputs))
           for k, n in enumerate(nodes)) or \
            not all(isinstance(i, int) and i in ids for i in inputs + outputs):
        raise GraphFormatError("not a stored graph (node ids out of place)")
    g = Graph(name)
    g.nodes, g.inputs, g.outputs = nodes, inputs, outputs
    for n in nodes:
        if n is not None and n.op not in ("Input", "Output"):
            g._cse.setdefault(n.key(), n.id)
    return g


__all__ = ["GraphFormatError", "graph_from_bytes", "graph_to_bytes"]

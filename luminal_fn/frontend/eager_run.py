"""Running one namespace function eagerly: trace it alone, run it on the NumPy backend."""
from __future__ import annotations

from ..backends import get_backend
from ..backends.numpy.executor import evaluate_node
from ..ir.passes import simplify, use_composites
from . import pytree
from .array import Array
from .errors import LuminalError, user_location
from .tracer import TraceContext, Tracer

_EAGER_BACKEND = "numpy"


def run_eagerly(fn, name: str, args, kwargs):
    ctx = TraceContext(f"eager {name}")
    with ctx:
        try:
            result = fn(*args, **kwargs)
        except LuminalError as e:
            _point_at_caller(e)
            raise
        leaves, tree = pytree.flatten(result)
        kinds = []
        k = 0
        for leaf in leaves:
            if isinstance(leaf, Tracer):
                ctx.graph.add("Output", ((leaf._node, leaf._view),), leaf.shape, leaf.dtype, index=k)
                kinds.append(k)
                k += 1
            else:
                kinds.append(None)
    if k == 0:
        return result
    be = get_backend(_EAGER_BACKEND)
    graph = simplify(use_composites(ctx.graph, be.kernel_kinds), evaluate=evaluate_node)
    outs = be.compile(graph).run([], {})
    from ..ir import dtypes as dt

    arrays = [Array(b, be, tuple(b.shape), dt.canonicalize(b.dtype)) for b in outs]
    return pytree.unflatten(tree, [arrays[i] if i is not None else leaf for i, leaf in zip(kinds, leaves)])


def _point_at_caller(e: LuminalError) -> None:
    """Add the caller's ``file:line`` to an error that does not say where it happened yet."""
    loc = user_location()
    msg = str(e.args[0]) if e.args else ""
    if loc != "<unknown>" and loc not in msg:
        e.args = (f"{msg} (at {loc})",) + tuple(e.args[1:])

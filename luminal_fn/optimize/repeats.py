"""Repeated structure in an HLIR graph (a transformer's layers): corresponding nodes of repeated
blocks hash alike, so the extractor can give their e-classes one gene, and 16 layers do not
multiply the search space by 16."""
from __future__ import annotations

from ..ir.graph import Graph, _freeze


def neighbourhood_signatures(hlir: Graph, depth: int = 4) -> dict:
    """HLIR node id -> a hash of the node and its inputs ``depth`` levels up (ops, shapes, dtypes,
    attributes and views; which argument an Input is does not count), so corresponding nodes of
    repeated layers hash alike."""
    nodes = hlir.live_nodes()
    base = {n.id: hash((n.op, n.shape, n.dtype.name, _freeze({k: v for k, v in n.attrs.items()
                                                              if k not in ("index", "name")})))
            for n in nodes}
    sig = base
    for _ in range(depth):
        sig = {n.id: hash((base[n.id], tuple((sig[i], v.key()) for i, v in n.inputs)))
               for n in nodes}
    return sig


__all__ = ["neighbourhood_signatures"]

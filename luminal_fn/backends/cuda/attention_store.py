"""The attention row kernel stores its output where, and as, the copies after it would.

A Llama decode step's attention ends with two elementwise kernels that only move and round its
output: the transpose from (heads, s, head_dim) to (s, heads, head_dim), then the cast to the
weights' dtype for the o projection. Each is a launch of its own (~0.7 us inside a CUDA graph on
an H200) for a few KB. lf_attn_rows takes its output's strides per (kv head, group, query row,
element) and the dtype it stores, so such a copy is folded into the attention step: the kernel
writes straight into the copy's buffer, in the copy's layout and dtype.

A fused step right after an ``attention_rows`` step (or after one already folded into it) is
folded when
- its node reads one buffer only, the attention's (or the last folded copy's), and nothing else
  reads or writes that buffer;
- its tree is nothing but casts between float dtypes of that one input;
- its view of the input is the attention's output under the same elements, each of its axes
  one of the attention's axes (the kv heads and groups may be merged into one axis) or an axis
  of size 1, and every element read once.
The value is rounded as the unfolded plan rounds it: a float32 rounding of a float value is
exact, and at most one narrower rounding before the store may stand between (else nothing is
folded).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...ir import dtypes as dt
from ...ir.expr import as_expr, same
from ..render import index as ix
from ..render.kernels import finish
from .epilogue import _in_order, _only_between, fold_adjacent


def fold_attention_stores(pl) -> int:
    """Fold eligible copies into the attention_rows step before them; returns how many."""
    return fold_adjacent(pl.steps, lambda s1, s2: _fold(pl, s1, s2), chain=True)


@dataclass
class _Store:
    """Where the attention output lies now: the node that holds it, that node's dtype, the
    roundings on the way there, and per axis (name, size, stride) in its buffer."""

    holder: int
    dtype: object
    roundings: list
    axes: list


def _axes(Hk, G, S, Ev) -> list:
    strides = (as_expr(G) * S * Ev, as_expr(S) * Ev, as_expr(Ev), as_expr(1))
    return [(n, as_expr(z), st) for n, z, st in zip(("hk", "g", "s", "e"), (Hk, G, S, Ev), strides)]


def _state(pl, step):
    """Where an attention_rows step (folded or not) leaves its output, or None for other steps."""
    src = getattr(step, "source", None)
    if src is None or "_attn_rows" not in src.meta:
        return None
    if "_attn_store" in src.meta:
        return src.meta["_attn_store"]
    node = pl.graph.nodes[step.node]
    Hk, G, S, _C, _E, Ev = node.attrs["params"]
    return _Store(node.id, node.dtype, [], _axes(Hk, G, S, Ev))


def _fold(pl, s1, s2):
    state = _state(pl, s1)
    if state is None or getattr(s2, "source", None) is None or s2.label != "fused":
        return None
    c = pl.graph.nodes[s2.node]
    if c.op != "CustomOp" or c.attrs.get("name") != "fused" or s2.bufs[-1] != pl.node_buf.get(c.id):
        return None
    if len(c.inputs) != 1 or c.inputs[0][0] != state.holder or pl.kernel_input(c, 0).scalar is not None:
        return None
    buf = s1.bufs[-1]
    if s2.bufs[0] != buf or not _only_between(pl, buf, s1, s2):
        return None
    casts = _cast_chain(c.attrs["expr"])
    if casts is None:
        return None
    view = c.inputs[0][1]
    axes = state.axes if _in_order(pl, c, 0) else _permuted(state.axes, view, c.shape)
    if axes is None:
        return None
    roundings = state.roundings + [state.dtype] + casts
    narrow = _narrow_rounding(roundings)
    if narrow is False or not (c.dtype.is_float and all(d.is_float for d in roundings)):
        return None
    return _render(pl, s1, s2, c, axes, narrow, _Store(c.id, c.dtype, roundings, axes))


def _cast_chain(tree):
    """The dtypes of a tree made of casts of input 0 only, innermost first; else None."""
    out = []
    while isinstance(tree, tuple) and tree and tree[0] == "Cast":
        out.append(dt.BY_NAME[tree[1]])
        tree = tree[2]
    return out[::-1] if tree == ("in", 0) else None


def _narrow_rounding(roundings):
    """The one rounding narrower than float32 the value passes before its store (None: none),
    or False when there are several different ones (not folded)."""
    narrow = [d for d in roundings if d.name != "float32"]
    kinds = {d.name for d in narrow}
    if len(kinds) > 1:
        return False
    return narrow[0] if narrow else None


def _permuted(axes, view, shape):
    """The attention axes' strides in the consumer's contiguous output when ``view`` reads each of
    them along one of its own axes; else None."""
    if view.mask is not None or not ix.is_zero(view.offset) or len(view.shape) != len(shape):
        return None
    if not same(ix.numel(view.shape), ix.numel([z for _, z, _ in axes])):
        return None
    out_stride, acc = [], as_expr(1)
    for z in reversed(list(shape)):
        out_stride.append(acc)
        acc = acc * z
    out_stride.reverse()
    by_name = {n: (z, st) for n, z, st in axes}
    hk, g = by_name["hk"], by_name["g"]
    merged_h = (hk[0] * g[0], g[1]) if same(hk[1], g[1] * g[0]) else None
    new = {n: as_expr(0) for n in by_name}  # axes of size 1 keep stride 0 (their index is 0)
    used = set()
    for size, stride, ostride in zip(view.shape, view.strides, out_stride):
        if same(size, 1):
            continue
        hit = next((n for n, (z, st) in by_name.items()
                    if n not in used and same(z, size) and same(st, stride)), None)
        if hit is not None:
            used.add(hit)
            new[hit] = ostride
        elif merged_h is not None and not {"hk", "g"} & used and same(merged_h[0], size) \
                and same(merged_h[1], stride):
            used |= {"hk", "g"}
            new["g"], new["hk"] = ostride, ostride * g[0]
        else:
            return None
    if any(n not in used and not same(z, 1) for n, (z, _) in by_name.items()):
        return None
    return [(n, z, new[n]) for n, z, _ in axes]


def _render(pl, s1, s2, c, axes, narrow, state):
    src = s1.source
    call = src.meta["_attn_rows"]
    names = ix.dim_names(pl.symbols)
    ty = pl.lang.storage[c.dtype.name]
    tr = pl.lang.storage[narrow.name] if narrow is not None else "float"
    line = call.line(ty, tr, tuple(ix.r(st, names) for _, _, st in axes))
    bufs = [b if b[0] != "out" else ("out", "out", c.dtype, False) for b in src.meta["_bufs"]]
    meta = {k: v for k, v in src.meta.items() if k not in ("_body", "_bufs")}
    meta["stores_into"] = meta.get("stores_into", ()) + (c.id,)
    meta["_attn_store"] = state  # (for the next copy the chain may fold)
    new = finish(pl.lang, src.kind, [line], bufs, src.block, src.work, src.per_block,
                 grid_cap=src.grid_cap, meta=meta, shared_bytes=src.shared_bytes)
    return replace(s1, source=new, bufs=list(s1.bufs[:-1]) + [s2.bufs[-1]])


__all__ = ["fold_attention_stores"]

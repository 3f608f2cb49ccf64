"""A RoPE kernel stores straight into the cache the scatter after it would write.

A Llama decode step rotates the new key rows (RoPE) and then scatters them into the KV cache:
two launches, the rotated rows going through a buffer in between. When the scatter reads the
rotated rows in order (its i-th value is the RoPE output's i-th element) and nothing else reads
them, the RoPE kernel's two stores become the scatter's: element i goes to ``cache[idx[i]]``
(dropped when that index is out of range, as the scatter drops it), rounded as the two kernels
would have rounded it (to the RoPE output's dtype, then to the cache's). The folded kernel then
reads what RoPE of q and the value scatter read and writes what neither touches, so the
independent-kernel merge (horizontal.py) runs the three in one launch.

Folded: a ``rope_half`` / ``rope`` step (``meta["_pair_stores"]``, ropekernels.py) followed by a
``set``-mode Scatter step of a float destination whose values input is that RoPE node, read
through a contiguous view from offset 0 with the index array's shape and the RoPE output's
number of elements, when the RoPE output buffer is touched by those two steps only.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.expr import same
from ..render import index as ix
from ..render.kernels import finish
from ..render.lang import as_stored, compute_type, convert, load_expr, store_expr
from .epilogue import _only_between, fold_adjacent


def fold_rope_stores(pl) -> int:
    """Fold each eligible RoPE step into the scatter right after it; returns how many."""
    return fold_adjacent(pl.steps, lambda s1, s2: _fold(pl, s1, s2))


def _fold(pl, s1, s2):
    src1, src2 = getattr(s1, "source", None), getattr(s2, "source", None)
    if src1 is None or src2 is None or "_pair_stores" not in src1.meta:
        return None
    if src2.kind != "scatter" or src2.meta.get("mode") != "set":
        return None
    sc, rope = pl.graph.nodes[s2.node], pl.graph.nodes[s1.node]
    if sc.op != "Scatter" or len(sc.inputs) != 3 or sc.inputs[2][0] != rope.id or not sc.dtype.is_float:
        return None
    idx, vals = pl.kernel_input(sc, 1), pl.kernel_input(sc, 2)
    if idx.inlined or vals.inlined:
        return None
    rbuf = pl.node_buf.get(rope.id)
    if rbuf is None or s1.bufs[-1] != rbuf or not _only_between(pl, rbuf, s1, s2):
        return None
    v = vals.view
    if (v.mask is not None or not v.is_contiguous or not ix.is_zero(v.offset)
            or len(v.shape) != len(idx.view.shape)
            or not all(same(a, b) for a, b in zip(v.shape, idx.view.shape))
            or not same(ix.numel(v.shape), ix.numel(rope.shape))):
        return None
    return _render(pl, s1, s2, sc, rope, idx)


def _render(pl, s1, s2, sc, rope, idx):
    lang, src = pl.lang, s1.source
    st = src.meta["_pair_stores"]
    names = ix.dim_names(pl.symbols)
    itype = st.itype
    shape, (vi,) = ix.coalesce(idx.view.shape, [idx.view])
    cl, cs = ix.coords(shape, "e", names, "q", itype)
    at = load_expr(lang, idx.dtype, f"lf_idx[{ix.address(vi, cs, names)}]")
    dst = ([f"auto lf_dst = [&]({itype} e) -> {itype} {{"] + ["  " + ln for ln in cl]
           + [f"  return ({itype}){convert(lang, at, compute_type(idx.dtype), 'int')};", "};",
              f"const {itype} lf_n_out = {ix.r(ix.numel(sc.shape), names)};"])
    body = list(src.meta["_body"])
    lines = []
    for y, off in (("y1", ""), ("y2", f" + {st.pair}")):
        val = as_stored(lang, rope.dtype, y, "float")  # (the value as the RoPE kernel would have stored it)
        put = store_expr(lang, sc.dtype, val, "float")
        lines.append(f"  {{ const {itype} j = lf_dst(ao{off}); if (j >= 0 && j < lf_n_out) cache[j] = {put}; }}")
    body[st.line:st.line + 2] = lines
    bufs = [b for b in src.meta["_bufs"] if b[0] != "out"]
    bufs += [("idx", "lf_idx", idx.dtype, True), ("out", "cache", sc.dtype, False)]
    meta = {k: v for k, v in src.meta.items() if k not in ("_body", "_bufs", "_pair_stores")}
    meta["stores_into"] = sc.id
    new = finish(lang, src.kind, dst + body, bufs, src.block, src.work, src.per_block,
                 grid_cap=src.grid_cap, meta=meta, shared_bytes=src.shared_bytes)
    ids = list(s1.bufs[:-1]) + [pl.input_buf(sc, 1), s2.bufs[-1]]
    return replace(s1, source=new, bufs=ids, label=f"{s1.label} -> {s2.label}")


__all__ = ["fold_rope_stores"]

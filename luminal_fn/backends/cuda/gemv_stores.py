"""RoPE and the KV-cache stores computed in the q/k/v GEMV launch.

After a decode step's q, k and v projections (one merged launch, siblings.py) come RoPE of q,
RoPE of k stored into the k cache (rope_store.py) and the v cache scatter: one more launch a layer
(~1-1.5 us inside a CUDA graph on an H200) for a few KB. Here each of those steps becomes the
store of the GEMV segment whose output it reads, and its launch goes away:

- a RoPE step (its ``_pair_fn``: ropekernels.py) reading a segment's output in order (contiguous,
  from offset 0, the output's length, heads of D = 2 * half elements): the segment runs as
  ``lf_gemv_nk_rope_to`` (kernels/gemv.cu: one block's warps compute rows d and d + half of four
  pairs, so both elements of a pair meet in the block), and the RoPE step's body, as a function
  of the pair index, computes and stores the rotated pair (into its output, or through the
  scatter's index into the cache when rope_store.py folded that in);
- an in-place ``set`` Scatter whose values are a segment's output in order, shaped as its index
  array: each dot product goes straight to ``cache[idx[n]]`` (dropped when out of range, as the
  scatter drops it).
Values are rounded as the unfolded plan rounds them: to the GEMV's dtype (its store), then as
the folded step would. A step is folded only when nothing between the GEMV and it writes what it
reads or touches what it writes (so computing it earlier changes nothing), and only that step
reads the GEMV output (which is then never written). Layer 0 of a Llama step keeps its RoPE
launch: its cos/sin tables are computed after the q/k/v GEMV.

``LUMINAL_CUDA_GEMV_STORES=0`` turns the pass off (for A/B runs on the device).
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...ir.expr import same
from ..render import index as ix
from ..render.kernels import finish
from ..render.lang import as_stored, compute_type, convert, load_expr, store_expr
from .epilogue import _in_order, _only_between
from .siblings import block_ranges, x_arg
from .switches import switch_on

SWITCH = "LUMINAL_CUDA_GEMV_STORES"


def enabled() -> bool:
    return switch_on(SWITCH, True, "fold RoPE and cache stores into GEMVs")


def fold_gemv_stores(pl) -> int:
    """Fold eligible RoPE and scatter steps into the GEMV step before them; returns how many."""
    if not enabled():
        return 0
    folded, i = 0, 0
    while i < len(pl.steps):
        g = pl.steps[i]
        segs = _plain_segments(g)
        if segs is not None:
            stores = {}  # segment index -> (functor lines, bufs, ids, rope half or 0, folded step)
            j = i + 1
            while j < len(pl.steps) and _plain_kernel(pl.steps[j]):
                got = _store_of(pl, g, segs, pl.steps[i + 1:j], pl.steps[j], stores)
                if got is not None:
                    stores[got[0]] = got[1:]
                j += 1
            if stores:
                gone = {id(v[-1]) for v in stores.values()}
                pl.steps[i] = _render(pl, g, segs, stores)
                pl.steps[i + 1:] = [s for s in pl.steps[i + 1:] if id(s) not in gone]
                folded += len(stores)
        i += 1
    return folded


def _plain_segments(step):
    """The segments of a GEMV step rendered by siblings.render_gemv_nk (one or merged, maybe with
    an RMS prologue), else None."""
    src = getattr(step, "source", None)
    return None if src is None else src.meta.get("_segments")


def _plain_kernel(step) -> bool:
    """A kernel step that is no GEMV: the walk after a GEMV stops at the next GEMV or host step."""
    src = getattr(step, "source", None)
    return src is not None and "_weights" not in src.meta and "_bufs" in src.meta


def _access(step) -> tuple:
    """(buffers the step reads, buffers it writes)."""
    reads, writes = set(), set()
    for (_role, _c, _d, const), b in zip(step.source.meta["_bufs"], step.bufs):
        (reads if const else writes).add(b)
    return reads, writes


def _store_of(pl, g, segs, between, t, stores):
    """(segment index, functor lines, bufs, ids, half, t) when step t can be the store of one of
    g's segments, else None."""
    outs = g.bufs[-len(segs):]
    reads, writes = _access(t)
    hits = [k for k, b in enumerate(outs) if b in reads]
    if len(hits) != 1 or hits[0] in stores:
        return None
    k = hits[0]
    y = outs[k]
    if not _only_between(pl, y, g, t) or writes & set(g.bufs):
        return None  # (nor may t write what the GEMV reads)
    for s in between:  # computing t earlier must not change what it reads or what others see
        r, w = _access(s)
        if w & (reads - {y}) or (r | w) & writes:
            return None
    seg = segs[k]
    meta = t.source.meta
    name = f"lf_store{k}"
    if "_pair_fn" in meta and seg.wpr == 1 and t.bufs[0] == y:
        half = _rope_half(pl, t, seg)
        if half:
            lines, bufs, ids = _rope_functor(t, seg, name, f"f{k}_")
            return k, lines, bufs, ids, half, t
    elif t.source.kind == "scatter" and meta.get("mode") == "set" and "in place" in t.label:
        got = _scatter_functor(pl, t, y, seg, name, f"f{k}_")
        if got is not None:
            return (k, *got, 0, t)
    return None


def _rope_half(pl, t, seg) -> int:
    """Half the head size when t's RoPE reads the segment's n rows in order as pairs (d, d +
    half) of heads of 2 * half, else 0."""
    rope = pl.graph.nodes[t.node]
    D = tuple(rope.shape)[-1] if rope.shape else None
    fn = t.source.meta["_pair_fn"]
    if not isinstance(D, int) or D % 2 or seg.n % D or fn.pair != D // 2 or fn.x[1] == fn.x[0]:
        return 0  # (rotate_half's pairs only: the interleaved style pairs neighbours)
    if not _in_order(pl, rope, 0):
        return 0
    return D // 2


def _renamer(bufs, prefix):
    names = [c for _role, c, _d, _const in bufs]
    pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
    return lambda text: pat.sub(lambda m: prefix + m.group(1), text) if pat else text


def _rope_functor(t, seg, name, prefix):
    """The RoPE step's body as ``name(i, acc1, acc2)``: pair i's two dot products, rounded as the
    GEMV would store them, stand for its two reads of x (operand 0, ``b0``)."""
    meta = t.source.meta
    fn = meta["_pair_fn"]
    body = list(meta["_body"])
    at = body.index(fn.loop)
    end = len(body) - 1 - body[::-1].index("}")
    bufs = [b for b in meta["_bufs"] if b[1] != "b0"]
    ids = [bid for b, bid in zip(meta["_bufs"], t.bufs) if b[1] != "b0"]
    rename = _renamer(bufs, prefix)
    x1, x2 = (f"lf_ld(lf_st<{seg.T}>(acc{j}))" for j in (1, 2))
    inner = [ln.replace(fn.x[0], "lf_x1").replace(fn.x[1], "lf_x2") for ln in body[at + 1:end]]
    lines = ([f"auto {name} = [&]({fn.itype} i, float acc1, float acc2) {{",
              f"  const float lf_x1 = {x1}, lf_x2 = {x2};"]
             + ["  " + rename(ln) for ln in body[:at] if not ln.startswith(f"const {fn.itype} n = ")]
             + ["  " + rename(ln) for ln in inner] + ["};"])
    return lines, [(r, prefix + c, d, const) for r, c, d, const in bufs], ids


def _scatter_functor(pl, t, y, seg, name, prefix):
    """``name(n, acc)`` storing dot product n where the scatter would put its value n, or None
    when the scatter does not read the segment's output in order, shaped as its index."""
    sc = pl.graph.nodes[t.node]
    if sc.op != "Scatter" or len(sc.inputs) != 3 or not sc.dtype.is_float:
        return None
    idx, vals = pl.kernel_input(sc, 1), pl.kernel_input(sc, 2)
    if idx.inlined or vals.inlined or pl.input_buf(sc, 2) != y or t.bufs[-1] != pl.node_buf.get(sc.id):
        return None
    v = vals.view  # (all of the values' buffer in order; the scatter's own shape is the cache's)
    if (not (v.is_contiguous and v.mask is None and ix.is_zero(v.offset)
             and same(ix.numel(v.shape), ix.numel(pl.graph.nodes[sc.inputs[2][0]].shape)))
            or len(v.shape) != len(idx.view.shape)
            or not all(same(a, b) for a, b in zip(v.shape, idx.view.shape))):
        return None
    lang, names = pl.lang, ix.dim_names(pl.symbols)
    shape, (vi,) = ix.coalesce(idx.view.shape, [idx.view])
    cl, cs = ix.coords(shape, "n", names, "q", "int")
    at = load_expr(lang, idx.dtype, f"{prefix}idx[{ix.address(vi, cs, names)}]")
    vdt = pl.graph.nodes[sc.inputs[2][0]].dtype
    put = store_expr(lang, sc.dtype, as_stored(lang, vdt, "acc", "float"), "float")
    lines = ([f"auto {name} = [&](int n, float acc) {{"] + ["  " + ln for ln in cl]
             + [f"  const int j = (int){convert(lang, at, compute_type(idx.dtype), 'int')};",
                f"  if (j >= 0 && j < {ix.r(ix.numel(sc.shape), names)}) {prefix}cache[j] = {put};", "};"])
    bufs = [("idx", f"{prefix}idx", idx.dtype, True), ("out", f"{prefix}cache", sc.dtype, False)]
    return lines, bufs, [pl.input_buf(sc, 1), t.bufs[-1]]


def _render(pl, g, segs, stores):
    """g's GEMV launch again, the folded segments handing their values to their functors."""
    meta = g.source.meta
    pro = meta.get("_prologue")
    s0 = segs[0]
    xbufs = list(pro.bufs) if pro is not None else [("in0", "b0", s0.dtype, True)]
    nx = len(xbufs)
    bufs = xbufs + [(f"w{i}", f"w{i}", s0.dtype, True) for i in range(len(segs))]
    ids = list(g.bufs[:nx + len(segs)])
    outs = g.bufs[-len(segs):]
    defs, folded_nodes = [], []
    for i, seg in enumerate(segs):
        if i in stores:
            lines, fbufs, fids, _half, t = stores[i]
            defs += lines
            bufs += fbufs
            ids += fids
            folded_nodes.append(t.node)
        else:
            bufs.append((f"out{i}", f"y{i}", seg.dtype, False))
            ids.append(outs[i])

    def call(i, seg, b):
        x = x_arg(seg, pro)
        w = f"w{i} + ({seg.w_offset}), (long long)({seg.ldw})"
        if i not in stores:
            return seg.call(f"w{i}", x, f"y{i}", b, str(seg.blocks))
        half = stores[i][3]
        if half:
            return (f"lf_gemv_nk_rope_to<{seg.T}, {seg.iters}>({w}, {x}, {seg.n}, {seg.k}, {half}, "
                    f"{b}, {seg.blocks}, lf_store{i});")
        return (f"lf_gemv_nk_to<{seg.T}, {seg.iters}>({w}, {x}, {seg.n}, {seg.k}, {seg.wpr}, {b}, "
                f"{seg.blocks}, lf_store{i});")

    ranges, start = block_ranges([(s.blocks, lambda b, i=i, s=s: call(i, s, b)) for i, s in enumerate(segs)])
    guard = list(s0.guard) + (list(pro.lines) if pro is not None else [])
    src = finish(pl.lang, f"{g.source.kind}_st", guard + defs + ranges, bufs, 256, 1, 1,
                 meta={"hand": True, "grid3": (start, 1, 1), "wpr": tuple(s.wpr for s in segs),
                       "waits_inside": True, "nodes": (g.node, *folded_nodes),
                       "_weights": tuple((nx + i, s) for i, s in enumerate(segs))})
    return replace(g, source=src, bufs=ids, label=f"{g.label} + RoPE/cache stores")


__all__ = ["SWITCH", "enabled", "fold_gemv_stores"]

"""Sibling GEMVs in one launch: a decode step's q, k and v projections (and gate and up) read the
same activation row, and each small GEMV costs a launch and a tail of its own (~2-3 us on an
H200, more than k and v take to stream their weights). Two pieces:

- :func:`sibling_order`: the order the planner walks the nodes in. A node with a sibling key pulls
  right after itself the later nodes with the same key whose inputs are all planned by then;
  everything else keeps the graph's order. It runs before buffers get lifetimes, so lifetimes and
  the arena follow the order actually planned.
- :func:`merge_gemv_steps`: adjacent ``lf_gemv_nk`` steps that read the same x buffer at the same
  offset (same dtype, same K, same symbolic-row guard) become one kernel whose blocks are split
  into one range per GEMV; each range calls ``lf_gemv_nk`` (kernels/gemv.cu) with its block
  index within the range and the range's length, its own weights, output, N and tuning. The x @ W
  GEMVs (``lf_gemv_kn_to``, W stored (K, N)) merge the same way: one launch for their blocks (each
  range's block index split into its stripe and K share), then one for the partials of those that
  split K (``lf_gemv_partials_to``), so a JAX-layout model's q/k/v pay two launches, not six.

Nothing here touches the GPU; the merged source is checked on the CPU (tests/test_cuda_gemv_merge.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ...ir import dtypes as dt
from ..render.kernels import KernelSource, finish

MAX_SEGMENTS = 4  # GEMVs per launch: q, k, v (3) and gate, up (2) fit; more buys little
MAX_UNROLLED = 16  # vectors per lane held in registers at once by the unrolled GEMV


def nk_shape(n: int, k: int, v: int, wpr: int, max_unrolled: int) -> tuple:
    """(ITERS, blocks) of an ``lf_gemv_nk`` kernel (or its pair) for W (n, k) read in v-element
    16-byte loads with ``wpr`` warps a row: ITERS the loads a lane holds when they cover k
    exactly and are at most ``max_unrolled``, else 0 (the loop); a block of 8 warps per 8 / wpr
    rows, the grid capped at 65535 (the blocks then loop over the rows)."""
    per_lane = k // (wpr * 32 * v)
    iters = per_lane if per_lane * wpr * 32 * v == k and 1 <= per_lane <= max_unrolled else 0
    return iters, min(-(-n // (8 // wpr)), 65535)


@dataclass(frozen=True)
class NkSegment:
    """One ``lf_gemv_nk`` call as rendered: C type ``T`` of ``dtype``, unrolled ``iters``, warps
    per row ``wpr``, the output's ``n`` rows of the ``k``-long dot products, the weights' offset
    and leading dim and x's offset (C expressions), ``blocks`` (its share of the grid) and the
    symbolic-row ``guard`` lines."""

    dtype: dt.DType
    T: str
    iters: int
    wpr: int
    n: int
    k: int
    w_offset: str
    ldw: str
    x_offset: str
    blocks: int
    guard: tuple = ()

    def call(self, w: str, x: str, y: str, block: str, blocks: str) -> str:
        """The call reading x (C: a pointer, the segment's offset added here, or a prologue's
        x as ``x_arg`` gives it)."""
        return (f"lf_gemv_nk<{self.T}, {self.iters}>({w} + ({self.w_offset}), (long long)({self.ldw}), "
                f"{x}, {y}, {self.n}, {self.k}, {self.wpr}, {block}, {blocks});")


def x_arg(seg, prologue=None) -> str:
    """The x argument of a Linear-layout GEMV segment: x (``b0``) at the segment's offset, or the
    row a prologue (prologue.py: segments that read x from offset 0) computes."""
    return prologue.x if prologue is not None else f"b0 + ({seg.x_offset})"


@dataclass(frozen=True)
class KnSegment:
    """One ``lf_gemv_kn_to`` call (y = x @ W, W stored (K, N)) as rendered: ``rows`` a thread loads at
    once, ``lanes`` a row, ``split`` (S) shares of K, ``blocks_x`` column stripes; the weights'
    offset and leading dim and x's offset (C expressions) and the symbolic-row ``guard`` lines.
    With S > 1 its blocks write float partials that ``lf_gemv_partials_to`` adds up."""

    dtype: dt.DType
    T: str
    rows: int
    lanes: int
    n: int
    k: int
    split: int
    blocks_x: int
    w_offset: str
    ldw: str
    x_offset: str
    guard: tuple = ()

    @property
    def blocks(self) -> int:
        return self.blocks_x * self.split

    @property
    def partial_blocks(self) -> int:  # lf_gemv_partials_to: a block for 128 columns
        return -(-self.n // 128)

    def call(self, w: str, x: str, part: str, store: str, bx: str, by: str) -> str:
        return (f"lf_gemv_kn_to<{self.T}, {self.rows}, {self.lanes}>({w} + ({self.w_offset}), "
                f"(long long)({self.ldw}), {x} + ({self.x_offset}), {part}, {self.n}, {self.k}, {self.split}, "
                f"{bx}, {by}, {store});")

    def partials_call(self, part: str, bx: str, store: str) -> str:
        return f"lf_gemv_partials_to<{self.split}>({part}, {self.n}, {bx}, {store});"


def block_ranges(parts: list) -> tuple:
    """(the lines, the blocks in all) of a launch whose block index ``blk`` is split into one range
    per part, in order: ``parts`` is [(blocks, render)], render(the block's index within its range,
    a C expression) giving the part's statements. The branches are block-uniform, so barriers
    inside them stay legal, and none returns, so every block reaches the kernel's end (where
    LF_TRACE times it)."""
    lines, start = ["const int blk = blockIdx.x;"], 0
    for i, (blocks, render) in enumerate(parts):
        lines.append(f"{'else ' if i else ''}if (blk < {start + blocks}) {{ {render(f'blk - {start}')} }}")
        start += blocks
    return lines, start


def forced_warps_per_row(switch: str, k: int, v: int) -> int | None:
    """The warps a row that the environment variable ``switch`` sets for a GEMV over k-long rows
    read in v-element 16-byte loads (1, 2, 4 or 8, halved while more than the row's loads), or
    None when it is unset: sweeps time launch shapes the heuristics would not pick."""
    value = os.environ.get(switch, "").strip()
    if not value:
        return None
    if value not in ("1", "2", "4", "8"):
        raise ValueError(f"{switch}={value!r}: expected 1, 2, 4 or 8 warps a row")
    wpr = int(value)
    while wpr > 1 and wpr * 32 * v > k:  # (a power of two: the block's 8 warps share rows)
        wpr //= 2
    return wpr


def skip_when_empty(rows: str) -> str:
    """The statement that ends a GEMV kernel when ``rows`` (C) is 0. It waits first: a GEMV waits
    for the kernel before it only inside lf_gemv_nk_to, and a kernel that ended without waiting
    could complete before that earlier kernel, so the kernel after it would no longer be ordered
    behind the earlier one (programmatic dependent launch, pdl.py)."""
    return f"if ({rows} == 0) {{ lf_pdl_wait(); return; }}"


def render_gemv_nk(lang, segments: list, prologue=None) -> KernelSource:
    """One kernel for one or more GEMVs that read the same x. Buffers: x, then each segment's
    weights, then each segment's output (one GEMV: the usual in0, in1, out). ``meta["_segments"]``
    keeps the segments for the plan passes that merge or extend GEMV steps, ``meta["_weights"]``
    pairs each with the index of its weights in the buffer list (l2_prefetch.py). A ``prologue``
    (prologue.py) computes x in the kernel instead: its buffers replace x's, its lines run
    first and its ``x`` (an LfRmsRow) is what the GEMVs read (kept in ``meta["_prologue"]``)."""
    s0 = segments[0]
    d = s0.dtype
    guard = list(s0.guard)  # the same rows for every segment: the whole launch is skipped on 0
    # the GEMV calls wait for the kernel before themselves, after prefetching weights (a
    # prologue's x too is read after that wait)
    xbufs, kind, extra = [("in0", "b0", d, True)], "gemv_nk", {"waits_inside": True}
    if prologue is not None:
        guard += list(prologue.lines)
        xbufs, kind = list(prologue.bufs), f"gemv_nk_{prologue.tag}"
        extra["_prologue"] = prologue
    if len(segments) == 1:
        body = guard + [s0.call("b1", x_arg(s0, prologue), "out", "blockIdx.x", "gridDim.x")]
        bufs = xbufs + [("in1", "b1", d, True), ("out", "out", d, False)]
        return finish(lang, kind, body, bufs, 256, 1, 1,
                      meta={"hand": True, "grid3": (s0.blocks, 1, 1), "wpr": s0.wpr,
                            "_segments": (s0,), "_weights": ((len(xbufs), s0),), **extra})
    ranges, start = block_ranges([(s.blocks, lambda b, i=i, s=s: s.call(f"w{i}", x_arg(s, prologue), f"y{i}", b,
                                                                        str(s.blocks)))
                                  for i, s in enumerate(segments)])
    body = guard + ranges
    bufs = (xbufs + [(f"w{i}", f"w{i}", d, True) for i in range(len(segments))]
            + [(f"out{i}", f"y{i}", d, False) for i in range(len(segments))])
    return finish(lang, f"{kind}{len(segments)}", body, bufs, 256, 1, 1,
                  meta={"hand": True, "grid3": (start, 1, 1),
                        "wpr": tuple(s.wpr for s in segments), "_segments": tuple(segments),
                        "_weights": tuple((len(xbufs) + i, s) for i, s in enumerate(segments)), **extra})


def sibling_order(nodes: list, keys: dict, ready: set, cap: int = MAX_SEGMENTS) -> list:
    """``nodes`` (a topological order) with siblings moved next to each other: after a node with
    a key in ``keys`` (node id -> key) come the later nodes of the same key, up to ``cap`` in
    all, whose inputs are all in ``ready`` (ids planned before the walk, the graph inputs) or
    placed earlier. A moved node still follows all its producers and precedes its consumers."""
    groups: dict = {}
    for n in nodes:
        if n.id in keys:
            groups.setdefault(keys[n.id], []).append(n)
    placed = set(ready)
    moved = set()
    out = []
    for n in nodes:
        if n.id in moved:
            continue
        out.append(n)
        placed.add(n.id)
        key = keys.get(n.id)
        if key is None:
            continue
        run = 1
        for m in groups[key]:
            if run >= cap:
                break
            if m.id <= n.id or m.id in placed:
                continue
            if all(i in placed for i, _ in m.inputs):
                out.append(m)
                placed.add(m.id)
                moved.add(m.id)
                run += 1
    return out


def _segment(step):
    src = getattr(step, "source", None)
    segs = None if src is None else src.meta.get("_segments")
    return segs[0] if segs and len(segs) == 1 else None


def _joins(group: list, step) -> bool:
    """Whether ``step`` can run in the same launch as the GEMV steps of ``group``: it reads the
    same x the same way and no step of the launch reads or writes what another one writes."""
    seg, first = _segment(step), _segment(group[0])
    if seg is None or len(step.bufs) != 3:
        return False
    x, w, y = step.bufs
    if (x != group[0].bufs[0] or seg.T != first.T or seg.k != first.k
            or seg.x_offset != first.x_offset or seg.guard != first.guard):
        return False
    reads = {x, w} | {g.bufs[1] for g in group}
    writes = {g.bufs[2] for g in group}
    return y not in reads and y not in writes and not (reads & writes)


def _kn(step):
    src = getattr(step, "source", None)
    return None if src is None else src.meta.get("_kn")


def _kn_partials_of(step, main) -> bool:
    """Whether ``step`` adds up the partials ``main`` (an x @ W GEMV's first kernel) wrote."""
    src = getattr(step, "source", None)
    return src is not None and src.meta.get("_kn_part") is _kn(main) and step.bufs[0] == main.bufs[2]


def _kn_group(steps: list, i: int) -> tuple:
    """([(main step, its partials step or None), ...], the index after them) for the x @ W GEMVs
    from steps[i] on that can share launches: each reads the same x the same way, and none reads
    or writes what another writes (their second kernels move after the last first kernel)."""
    def pair_at(j):
        main = steps[j]
        part = steps[j + 1] if j + 1 < len(steps) and _kn_partials_of(steps[j + 1], main) else None
        return (main, part), j + (2 if part is not None else 1)

    first, j = pair_at(i)
    group, s0 = [first], _kn(first[0])
    reads, writes = {first[0].bufs[0], first[0].bufs[1]}, {first[0].bufs[2]}
    if first[1] is not None:
        writes.add(first[1].bufs[1])
    while j < len(steps) and len(group) < MAX_SEGMENTS and (seg := _kn(steps[j])) is not None:
        (main, part), nxt = pair_at(j)
        mine_r, mine_w = {main.bufs[0], main.bufs[1]}, {main.bufs[2]} | ({part.bufs[1]} if part else set())
        if (main.bufs[0] != first[0].bufs[0] or (seg.T, seg.k, seg.x_offset, seg.guard)
                != (s0.T, s0.k, s0.x_offset, s0.guard) or mine_w & (reads | writes) or mine_r & writes):
            break
        group.append((main, part))
        reads |= mine_r
        writes |= mine_w
        j = nxt
    return group, j


def _merged_kn(pl, group: list) -> list:
    """The steps of a group of x @ W GEMVs sharing launches: one kernel for every GEMV's blocks
    (one range each), then one adding the partials of those that split K (none if none does)."""
    lang, segs = pl.lang, [_kn(main) for main, _ in group]
    d, T, guard = segs[0].dtype, segs[0].T, list(segs[0].guard)
    nodes = tuple(main.node for main, _ in group)
    bufs = [("in0", "b0", d, True)] + [(f"w{i}", f"w{i}", d, True) for i in range(len(segs))]
    bufs += [(f"o{i}", f"o{i}", dt.float32 if s.split > 1 else d, False) for i, s in enumerate(segs)]
    def main_call(i, s, b):
        if s.split > 1:  # its blocks write float partials; its store is never called
            part, store = f"o{i}", f"LfGemvStore<{T}>{{nullptr}}"
        else:
            part, store = "(float*)0", f"LfGemvStore<{T}>{{o{i}}}"
        return f"const int b = {b}; " + s.call(f"w{i}", "b0", part, store, f"b % {s.blocks_x}", f"b / {s.blocks_x}")

    ranges, start = block_ranges([(s.blocks, lambda b, i=i, s=s: main_call(i, s, b)) for i, s in enumerate(segs)])
    body = guard + ranges
    src = finish(lang, f"gemv_kn{len(segs)}", body, bufs, 256, 1, 1,
                 meta={"hand": True, "grid3": (start, 1, 1), "nodes": nodes,
                       "lanes": tuple(s.lanes for s in segs), "split": tuple(s.split for s in segs)})
    main0 = group[0][0]
    ids = [main0.bufs[0]] + [main.bufs[1] for main, _ in group] + [main.bufs[2] for main, _ in group]
    out = [replace(main0, source=src, bufs=ids, label=f"matmul (gemv kn x{len(segs)})")]
    split = [(s, part) for s, (_, part) in zip(segs, group) if part is not None]
    if len(split) == 1:
        out.append(split[0][1])
    elif split:
        bufs = [(f"p{i}", f"p{i}", dt.float32, True) for i in range(len(split))]
        bufs += [(f"y{i}", f"y{i}", d, False) for i in range(len(split))]
        ranges, start = block_ranges([(s.partial_blocks, lambda b, i=i, s=s: s.partials_call(
            f"p{i}", b, f"LfGemvStore<{T}>{{y{i}}}")) for i, (s, _) in enumerate(split)])
        src2 = finish(lang, f"gemv_part{len(split)}", guard + ranges, bufs, 256, 1, 1,
                      meta={"hand": True, "grid3": (start, 1, 1), "nodes": nodes})
        ids2 = [part.bufs[0] for _, part in split] + [part.bufs[1] for _, part in split]
        out.append(replace(split[0][1], source=src2, bufs=ids2, label=f"matmul (gemv partials x{len(split)})"))
    return out


def merge_gemv_steps(pl) -> None:
    """Replace runs of adjacent mergeable GEMV steps in ``pl.steps`` by one step each (at most
    MAX_SEGMENTS GEMVs; x @ W GEMVs by one step for their first kernels and one for the
    partials). A merged step keeps the first step's node; ``meta["nodes"]`` lists every node it
    computes, its ``bufs`` every buffer it reads and writes."""
    steps = pl.steps
    out = []
    i = 0
    while i < len(steps):
        s = steps[i]
        if _kn(s) is not None:
            group, j = _kn_group(steps, i)
            if len(group) > 1:
                out += _merged_kn(pl, group)
            else:
                out += steps[i:j]
            i = j
            continue
        if _segment(s) is None:
            out.append(s)
            i += 1
            continue
        group = [s]
        j = i + 1
        while j < len(steps) and len(group) < MAX_SEGMENTS and _joins(group, steps[j]):
            group.append(steps[j])
            j += 1
        if len(group) == 1:
            out.append(s)
        else:
            src = render_gemv_nk(pl.lang, [_segment(g) for g in group])
            src.meta["nodes"] = tuple(g.node for g in group)
            bufs = [s.bufs[0]] + [g.bufs[1] for g in group] + [g.bufs[2] for g in group]
            out.append(replace(s, source=src, bufs=bufs, label=f"matmul (gemv nk x{len(group)})"))
        i = j
    steps[:] = out


__all__ = ["NkSegment", "KnSegment", "block_ranges", "forced_warps_per_row", "render_gemv_nk", "skip_when_empty",
           "sibling_order", "merge_gemv_steps", "MAX_SEGMENTS"]

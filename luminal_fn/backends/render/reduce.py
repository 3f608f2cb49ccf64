"""Sum and max reductions over one axis with their elementwise prologue fused in.

The prologue tree is evaluated over the pre-reduction index space (``in_shape``) and reduced
along ``axis``. Four strategies, all correct for any dims (loops are bounded by dims read on the
device), chosen from the bucket's largest dims unless a strategy is forced:

  ``thread``  one thread per output row (short rows, or rows strided so that consecutive
              threads read consecutive addresses);
  ``warp``    one warp per row, lanes stride the row, warp shuffles combine;
  ``block``   one block per row, warp shuffles then shared memory across warps (long rows);
  ``split``   two stages for few long rows: stage one reduces chunks of each row into a scratch
              buffer of partials (warp per chunk), stage two reduces the partials: in the same
              launch where the language has counters (the row's last warp merges, CUDA), else
              in a second kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...ir import dtypes as dt
from ...ir.expr import as_expr, same
from ...ir.view import View, contiguous_strides
from . import index as ix
from .kernels import (BLOCK, KernelInput, KernelSource, _gather_fn, _symbols_of, consumer_store, finish,
                      gtid, inline_scalars, zero_of)
from .lang import Language, as_stored, compute_type, convert, load_expr, store_expr
from .tree import TreeRenderer, gather_inputs, leaf_inputs

STRATEGIES = ("thread", "warp", "block", "split")


@dataclass(frozen=True)
class ReduceEpilogue:
    """An elementwise consumer computed at each reduced value's store instead of in a kernel of
    its own: ``tree`` over ``inputs`` (KernelInputs of the consumer), whose input ``link`` is the
    reduction's output read element for element; the consumer's ``shape`` has the reduction's
    output length, and only its value (``dtype``) is written."""
    tree: tuple
    inputs: tuple
    link: int
    shape: tuple
    dtype: dt.DType


def init_of(lang: Language, op: str, ct: str) -> str:
    if op == "sum":
        return zero_of(ct)
    return {"float": f"(-{lang.inf})", "int": "(-2147483647 - 1)", "bool": "false"}[ct]


def combine(op: str, ct: str, a: str, b: str) -> str:
    if op == "sum":
        return f"({a} || {b})" if ct == "bool" else f"({a} + {b})"
    return f"lf_max({a}, {b})"


def choose_strategy(R, O, inner: bool, outer_coalesced: bool, sm_count: int = 132) -> str:
    """Pick a strategy from the largest row length R and row count O (ints or None)."""
    R = 1024 if R is None else R
    O = 1 if O is None else O
    if R <= 16:
        return "thread"
    if not inner and outer_coalesced and O >= 32:
        return "thread"
    if R <= 1024 or O >= sm_count * 32:
        return "warp"
    if O >= sm_count or R < 8192:
        return "block"
    return "split"


def split_chunks(R, O, sm_count: int = 132) -> int:
    R = R or 1
    O = max(O or 1, 1)
    c = max(1, (sm_count * 32 + O - 1) // O)
    return int(max(1, min(c, 1024, R // 256 if R >= 256 else 1)))


class _Plan:
    """Shared index set-up of every strategy: coalesced views, per-row bases, the row body."""

    def __init__(self, lang, in_shape, axis, tree, inputs, names, dims_max):
        self.lang = lang
        self.tree = tree = inline_scalars(tree, inputs)
        self.inputs = inputs
        self.names = names
        self.leaves = sorted(leaf_inputs(tree))
        self.gathers = gather_inputs(tree)
        views = [inputs[k].view for k in self.leaves]
        # the flat pre-reduction index z rides along as a contiguous pseudo-view (last); it also
        # carries the shape when the prologue reads no input
        views.append(View(tuple(in_shape), contiguous_strides(tuple(in_shape)), 0, None))
        shape, cviews, ax = ix.coalesce(in_shape, views, keep=axis)
        self.shape, self.views, self.ax = shape, cviews, ax
        self.R = shape[ax] if ax is not None else 1
        self.outer = tuple(d for k, d in enumerate(shape) if k != ax)
        self.O = ix.numel(self.outer) if self.outer else 1
        n_in = ix.numel(in_shape)
        sizes = [n_in] + [ix.view_extent(inputs[k].view) for k in self.leaves]
        sizes += [ix.view_extent(inputs[k].view) for k in self.gathers]
        self.itype = ix.index_type(sizes, dims_max)

    def row_setup(self, o: str) -> list:
        """Statements computing each view's row base address and outer validity for row ``o``."""
        lines = []
        outer_pos = [k for k in range(len(self.shape)) if k != self.ax]
        cl, cs_outer = ix.coords(self.outer, o, self.names, "c", self.itype) if self.outer else ([], [])
        lines += cl
        cs = [""] * len(self.shape)
        for p, k in enumerate(outer_pos):
            cs[k] = cs_outer[p]
        self.cs = cs
        skip = (self.ax,) if self.ax is not None else ()
        for j, v in enumerate(self.views):
            base = ix.address(v, [c or "0" for c in cs], self.names, skip=skip)
            lines.append(f"const {self.itype} base{j} = {base};")
            cond = ix.validity(v, [c or "0" for c in cs], self.names, skip=skip)
            lines.append(f"const bool ok{j} = {cond or 'true'};")
        return lines

    def accumulate(self, op: str, ct: str, it: str, start: str, end: str, step: str) -> list:
        """Statements folding the prologue into ``acc`` (type ``ct``) over r = start, start +
        step, ... < end: the loop every reduction strategy runs."""
        lines = [f"{ct} acc = {init_of(self.lang, op, ct)};",
                 f"for ({it} r = {start}; r < {end}; r += {step}) {{"]
        el, val, vt = self.element()
        lines += ["  " + ln for ln in el + [f"acc = {combine(op, ct, 'acc', convert(self.lang, val, vt, ct))};"]]
        return lines + ["}"]

    def element(self) -> tuple:
        """(statements, value, compute type) of the prologue at the loop's reduced index r."""
        rvar = "r"
        lang, names = self.lang, self.names
        vidx = {k: j for j, k in enumerate(self.leaves)}
        ax = self.ax

        def addr(j):
            v = self.views[j]
            if ax is None or same(v.strides[ax], 0):
                return f"base{j}"
            s = v.strides[ax]
            return f"base{j} + {rvar}" if same(s, 1) else f"base{j} + {rvar} * {ix.r(s, names)}"

        def leaf(k):
            j = vidx[k]
            inp = self.inputs[k]
            ct = compute_type(inp.dtype)
            conds = [f"ok{j}"]
            if ax is not None:
                a = ix.axis_valid(self.views[j], ax, rvar, names)
                if a:
                    conds.append(a)
            val = load_expr(lang, inp.dtype, f"b{k}[{addr(j)}]")
            return f"(({' && '.join(conds)}) ? {val} : {zero_of(ct)})", ct

        tr = TreeRenderer(lang, leaf, _gather_fn(lang, self.inputs, names, self.itype, lambda: tr.lines),
                          lambda e: f"(int)({ix.r(e, {**names, 'z': '(' + addr(len(self.views) - 1) + ')'})})")
        val, vt = tr.render(self.tree)
        return tr.lines, val, vt


def render_reduce(lang: Language, in_shape: Sequence, axis: int, op: str, tree,
                  inputs: Sequence[KernelInput], out_dtype: dt.DType, dims_max: dict | None = None,
                  symbols: Sequence[str] = (), strategy: str | None = None,
                  sm_count: int = 132, chunks: int | None = None,
                  epilogue: ReduceEpilogue | None = None) -> list:
    """Kernels (one, or two for ``split``) computing out[o] = reduce_r tree(o, r); with an
    ``epilogue`` (one-kernel strategies only), out[o] = epilogue(reduced value at o)."""
    if op not in ("sum", "max"):
        raise ValueError(f"reduction op must be 'sum' or 'max', got {op!r}")
    names = ix.dim_names(symbols or _symbols_of(in_shape, inputs, tree))
    pl = _Plan(lang, tuple(in_shape), axis, tree, inputs, names, dims_max)
    Rm = ix.max_value(pl.R, dims_max)
    Om = ix.max_value(pl.O, dims_max)
    if strategy is None:
        inner = True
        outer_coalesced = False
        if pl.views and pl.leaves:
            v0 = pl.views[0]
            inner = pl.ax is None or same(v0.strides[pl.ax], 1)
            last_outer = max((k for k in range(len(pl.shape)) if k != pl.ax), default=None)
            outer_coalesced = last_outer is not None and same(v0.strides[last_outer], 1)
        strategy = choose_strategy(Rm, Om, inner, outer_coalesced, sm_count)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown reduction strategy {strategy!r}; expected one of {STRATEGIES}")
    ct = compute_type(out_dtype)
    used = set(pl.leaves) | pl.gathers
    bufs = [(f"in{k}", f"b{k}", inputs[k].dtype, True) for k in sorted(used) if not inputs[k].inlined]
    meta = {"strategy": strategy, "R": Rm, "O": Om}
    it = pl.itype
    store, ebufs, out_dt = _store_fn(lang, out_dtype, ct, it, names, epilogue)
    if epilogue is not None:
        meta["epilogue"] = True
    R = ix.r(pl.R, names)
    O = ix.r(pl.O, names)
    if strategy == "thread":
        g, stride = gtid(lang, it)
        body = [f"const {it} R = {R}, O = {O};", f"for ({it} o = {g}; o < O; o += {stride}) {{"]
        inner = pl.row_setup("o")
        inner += pl.accumulate(op, ct, it, "0", "R", "1")
        inner += store("o")
        body += ["  " + ln for ln in inner] + ["}"]
        return [finish(lang, "red", body, bufs + ebufs + [("out", "out", out_dt, False)], BLOCK, pl.O,
                       BLOCK, meta=meta)]
    if strategy in ("warp", "split"):
        C = chunks or (split_chunks(Rm, Om, sm_count) if strategy == "split" else 1)
        rows = pl.O if C == 1 else as_expr(pl.O) * C
        rows = rows if isinstance(rows, int) else (rows.args[0] if rows.op == "const" else rows)
        tgt_dt = out_dtype if C == 1 else _partial_dtype(out_dtype)
        body = [f"const {it} R = {R}, O = {O};",
                f"const int lane = {lang.thread_idx} & 31;",
                f"const {it} warp = (({it}){lang.block_idx} * {lang.block_dim} + {lang.thread_idx}) >> 5;",
                f"const {it} nwarps = (({it}){lang.block_dim} * {lang.grid_dim}) >> 5;"]
        if C == 1:
            body.append(f"for ({it} o = warp; o < O; o += nwarps) {{")
            inner = pl.row_setup("o")
            r0, r1 = "0", "R"
        else:
            body.append(f"const {it} CH = (R + {C - 1}) / {C};")
            body.append(f"for ({it} vr = warp; vr < O * {C}; vr += nwarps) {{")
            inner = [f"const {it} o = vr / {C}, ch = vr % {C};"] + pl.row_setup("o")
            inner.append(f"const {it} r0 = ch * CH, r1 = min(R, r0 + CH);")
            r0, r1 = "r0", "r1"
        inner += pl.accumulate(op, ct, it, f"{r0} + lane", r1, "32")
        inner += _warp_reduce(lang, op, ct, "acc")
        work = as_expr(rows) * 32 if not isinstance(rows, int) else rows * 32  # (a warp a row or chunk)
        if C > 1 and lang.merge_counter and tgt_dt.name in ("float32", "int32"):
            inner += _merge_in_place(lang, op, ct, tgt_dt, C, store)
            body += ["  " + ln for ln in inner] + ["}"]
            bufs1 = bufs + [("scratch", "part", tgt_dt, False), ("count", "cnt", dt.int32, False)] + ebufs + [
                ("out", "out", out_dt, False)]
            return [finish(lang, "red", body, bufs1, BLOCK, work, BLOCK,
                           meta={**meta, "chunks": C, "scratch": (tgt_dt, rows), "count": pl.O})]
        if C > 1 and epilogue is not None:
            raise ValueError("render_reduce: a two-kernel split reduction takes no epilogue")
        if C == 1:
            inner += ["if (lane == 0) {"] + ["  " + ln for ln in store("o")] + ["}"]
        else:
            inner.append(f"if (lane == 0) out[vr] = {store_expr(lang, tgt_dt, 'acc', ct)};")
        body += ["  " + ln for ln in inner] + ["}"]
        k1 = finish(lang, "red", body, bufs + (ebufs + [("out", "out", out_dt, False)] if C == 1 else
                                               [("scratch", "out", tgt_dt, False)]),
                    BLOCK, work, BLOCK,
                    meta={**meta, "chunks": C, "scratch": (tgt_dt, rows) if C > 1 else None})
        if C == 1:
            return [k1]
        k2 = _render_partials(lang, op, ct, tgt_dt, out_dtype, pl.O, C, names, it)
        return [k1, k2]
    # block per row
    body = [f"const {it} R = {R}, O = {O};",
            f"const int lane = {lang.thread_idx} & 31, wid = {lang.thread_idx} >> 5;",
            f"const int nw = {lang.block_dim} >> 5;",
            f"{lang.shared} {ct} lf_red[32];",
            f"for ({it} o = {lang.block_idx}; o < O; o += {lang.grid_dim}) {{"]
    inner = pl.row_setup("o")
    inner += pl.accumulate(op, ct, it, lang.thread_idx, "R", lang.block_dim)
    inner += _warp_reduce(lang, op, ct, "acc")
    inner.append("if (lane == 0) lf_red[wid] = acc;")
    inner.append(lang.barrier)
    inner.append("if (wid == 0) {")
    inner.append(f"  acc = lane < nw ? lf_red[lane] : {init_of(lang, op, ct)};")
    inner += ["  " + ln for ln in _warp_reduce(lang, op, ct, "acc")]
    inner += ["  if (lane == 0) {"] + ["    " + ln for ln in store("o")] + ["  }"]
    inner.append("}")
    inner.append(lang.barrier)
    body += ["  " + ln for ln in inner] + ["}"]
    return [finish(lang, "red", body, bufs + ebufs + [("out", "out", out_dt, False)], BLOCK, pl.O, 1,
                   meta=meta)]


def _merge_in_place(lang, op, ct, pdt, C, store) -> list:
    """The one-launch end of ``split``: the warp stores its chunk's partial, then counts itself
    in its row (cnt[o], zero between launches); the row's last warp reads the C partials past
    the L1, reduces them into out[o] and sets the count back to zero."""
    mc = lang.merge_counter
    lines = ["int last = 0;",
             "if (lane == 0) {",
             f"  part[vr] = {store_expr(lang, pdt, 'acc', ct)};",
             f"  {mc['fence']}  // the partial before the count",
             f"  last = {mc['add'].format(p='cnt + o')} == {C - 1};",
             "}"]
    lines += _warp_reduce(lang, "max", "int", "last")  # lane 0's answer to the whole warp
    lines += ["if (last) {",
              f"  {mc['fence']}",
              f"  acc = {init_of(lang, op, ct)};",
              f"  for (int c = lane; c < {C}; c += 32) acc = {combine(op, ct, 'acc', mc['load'].format(p=f'part + o * {C} + c'))};"]
    lines += ["  " + ln for ln in _warp_reduce(lang, op, ct, "acc")]
    lines += ["  if (lane == 0) {"] + ["    " + ln for ln in store("o")] + ["    cnt[o] = 0;", "  }", "}"]
    return lines


def _store_fn(lang, out_dtype, ct, it, names, epi):
    """(store(o) -> the statements writing row o's value ``acc``, the epilogue's input buffers,
    the dtype written). With an epilogue its tree is computed at o, its link reading ``acc`` as
    the reduction would have stored it (rounded to out_dtype), its other inputs through their
    views at the consumer's coordinates of o."""
    if epi is None:
        return (lambda o: [f"out[{o}] = {store_expr(lang, out_dtype, 'acc', ct)};"]), [], out_dtype
    tree = inline_scalars(epi.tree, epi.inputs)
    links = {epi.link: (as_stored(lang, out_dtype, "acc", ct), compute_type(out_dtype))}
    lines, ebufs = consumer_store(lang, tree, epi.inputs, links, epi.shape, epi.dtype, names, it, coord="ec")

    def store(o):
        return ["{", f"  const {it} n = {o};"] + ["  " + ln for ln in lines] + ["}"]

    return store, ebufs, epi.dtype


def _partial_dtype(d: dt.DType) -> dt.DType:
    return dt.float32 if d.is_float else d


def _warp_reduce(lang, op, ct, v) -> list:
    return ["#pragma unroll",
            f"for (int off = 16; off > 0; off >>= 1) {v} = {combine(op, ct, v, lang.shfl_xor.format(v=v, o='off'))};"]


def _render_partials(lang, op, ct, pdt, out_dtype, O, C, names, it) -> KernelSource:
    """Stage two of ``split``: reduce the C partials of each row."""
    body = [f"const {it} O = {ix.r(O, names)};",
            f"const int lane = {lang.thread_idx} & 31;",
            f"const {it} warp = (({it}){lang.block_idx} * {lang.block_dim} + {lang.thread_idx}) >> 5;",
            f"const {it} nwarps = (({it}){lang.block_dim} * {lang.grid_dim}) >> 5;",
            f"for ({it} o = warp; o < O; o += nwarps) {{",
            f"  {ct} acc = {init_of(lang, op, ct)};",
            f"  for (int c = lane; c < {C}; c += 32) acc = {combine(op, ct, 'acc', load_expr(lang, pdt, f'b0[o * {C} + c]'))};"]
    body += ["  " + ln for ln in _warp_reduce(lang, op, ct, "acc")]
    body.append(f"  if (lane == 0) out[o] = {store_expr(lang, out_dtype, 'acc', ct)};")
    body.append("}")
    bufs = [("scratch", "b0", pdt, True), ("out", "out", out_dtype, False)]
    work = as_expr(O) * 32
    return finish(lang, "red2", body, bufs, BLOCK, work if work.op != "const" else work.args[0], BLOCK,
                  meta={"chunks": C})

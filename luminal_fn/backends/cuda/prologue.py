"""RMS norm folded into the decode GEMVs that read its row: in a Llama decode step the one-row
``rms_norm_rows`` before the q/k/v projections (three merged siblings), before gate/up and
before the LM head costs a launch of its own (~2.5 us on an H200) to write a row that only the
next GEMV reads. Instead each block of the GEMV computes the row into shared memory
(``LfRmsRow`` in kernels/gemv.cu): it loads w before waiting for the kernel before, and x (2048
values for Llama-3.2-1B, served from L2) right after that wait, sums the squares with the same
terms in the same order as the norm kernel and stores
``TY(TR(x * r) * w)``: the same bits as the row it would have read. A folded GEMV runs one warp a
row, 8 rows a block, so that few blocks pay for the row. H200, the Llama-3.2-1B bf16 decode step
replayed alone (docs/benchmarks.md, run BV): 787.8 and 788.4 us folded, 822.8 and 822.4 us not
(33 launches fewer; q/k/v's launch 6.0 us with its norm, against 5.0 us plus the norm's). Tried
before it and slower: the normalised value computed at every load of x instead of once a block
(run BT: q/k/v 9.9 us), the GEMVs' own warps a row (run BU: 8.0 us, 2048 blocks in two waves),
and the GEMV scaling its sums by 1/rms (run BS: the row is then not rounded to the weights' type,
and the search rejected the decode step as disagreeing with the program by 2.6e-2).

Applied after the sibling merge and before the epilogue fold (epilogue.py renders a GEMV step's
prologue too) to an ``rms_norm_rows`` step when: it normalises one row (R at most 1 at the
bucket's largest dims; a symbolic R of 0 skips the launch), its literals are inlined, its
output is an arena buffer read by nothing but the GEMV steps right after it, each reading it
as its x from offset 0 over the whole row (K == D, the same dtype), none of them writing the
norm's input or weight, w an input or constant that no kernel of the step writes (it is loaded
before the wait for the kernel before), x and w can be read in aligned 16-byte vectors as the
norm kernel reads them (D and the row stride whole vectors of x), a thread holds at most
HOLD_MAX vectors of each and the row fits the shared-memory budget. The norm's step and its
buffer disappear; its x and w are read by the GEMV steps instead. ``LUMINAL_CUDA_RMS_PROLOGUE=0``
turns the fold off.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...ir.expr import as_expr, mod
from ..render import index as ix
from .siblings import MAX_UNROLLED, nk_shape, render_gemv_nk, skip_when_empty
from .switches import switch_on

GEMV_BLOCK = 256  # the threads of a lf_gemv_nk block (siblings.render_gemv_nk)
HOLD_MAX = 4  # 16-byte vectors of x and of w a thread holds (registers) while it computes the row
ROW_BYTES_MAX = 32 * 1024  # the row in shared memory (static shared memory is 48 KB a block)
SWITCH = "LUMINAL_CUDA_RMS_PROLOGUE"


@dataclass(frozen=True)
class RmsPrologue:
    """The x of a GEMV step computed in the kernel: ``bufs`` [(role, C name, dtype, const)] and
    ``ids`` (buffer ids) replace the x buffer, ``lines`` run before the GEMV, ``x`` (an
    LfRmsRow, which takes no offset) is what the GEMV reads; ``tag`` and ``label`` name the kernel
    kind and step. The GEMV reads x after its own wait for the kernel before it."""

    bufs: tuple
    ids: tuple
    lines: tuple
    x: str = "lf_rx"
    tag: str = "rms"
    label: str = "rms_norm_rows"


def fold_enabled() -> bool:
    """LUMINAL_CUDA_RMS_PROLOGUE: ``1`` (the default) folds, ``0`` keeps the norm's own launch."""
    return switch_on(SWITCH, True, "fold the one-row RMS norm into its GEMVs")


def fold_rms_prologues(pl) -> int:
    """Fold each eligible rms_norm_rows step into the GEMV step(s) right after it; returns how
    many norm steps disappeared."""
    if not fold_enabled():
        return 0
    steps = pl.steps
    folded = 0
    i = 0
    while i < len(steps):
        n = _readers_after(pl, i)
        if not n:
            i += 1
            continue
        norm = steps[i]
        steps[i:i + 1 + n] = [_with_prologue(pl, norm, s) for s in steps[i + 1:i + 1 + n]]
        folded += 1
        i += n
    return folded


def _static(e):
    e = as_expr(e)
    return e.args[0] if e.op == "const" else None


def _readers_after(pl, i) -> int:
    """How many GEMV steps right after step i read its one normalised row as their whole x and
    are its only readers (0: no fold)."""
    steps = pl.steps
    norm = steps[i]
    call = getattr(norm, "source", None) and norm.source.meta.get("_rms_rows")
    if call is None or len(norm.bufs) != 3 or call.inv_n is None or call.eps is None:
        return 0  # (a literal read from memory: its buffer would have to travel too)
    x_buf, w_buf, out = norm.bufs
    D = _static(call.D)
    if (pl.bufs[out].kind != "arena" or ix.max_value(call.rows, pl.dims_max) != 1 or D is None
            or call.block > GEMV_BLOCK or D * pl.bufs[out].dtype.itemsize > ROW_BYTES_MAX
            or not _vector_reads(call, D, pl.bufs[x_buf].dtype, pl.bufs[w_buf].dtype)
            or not _read_only(pl, w_buf)):
        return 0
    readers = [j for j, s in enumerate(steps) if j != i and out in s.bufs]
    if not readers or readers != list(range(i + 1, i + 1 + len(readers))):
        return 0
    for j in readers:
        if not _reads_row_as_x(pl, steps[j], out, D, call, (x_buf, w_buf)):
            return 0
    return len(readers)


def _read_only(pl, buf) -> bool:
    """Whether no kernel of the step writes ``buf`` (an input or a constant that no node stores
    into in place): the norm's weight is loaded before the wait for the kernel before."""
    if pl.bufs[buf].kind not in ("input", "const"):
        return False
    return all(pl.graph.nodes[nid].op in ("Input", "Constant") for nid, b in pl.node_buf.items() if b == buf)


def _vector_reads(call, D, x_dtype, w_dtype) -> bool:
    """Whether a block's threads can hold x and w in 16-byte vectors of x (V values) as the norm
    kernel reads them: D and x's row stride whole vectors, w contiguous, both offsets whole
    16-byte vectors (the arena and the inputs are 16-byte aligned), at most HOLD_MAX a thread."""
    v = 16 // x_dtype.itemsize
    align = max(v, 16 // w_dtype.itemsize)
    return (D % v == 0 and -(-D // (call.block * v)) <= HOLD_MAX and _static(call.w_stride) == 1
            and all(_static(mod(e, m)) == 0 for e, m in ((call.row_stride, v), (call.x_offset, align),
                                                         (call.w_offset, align))))


def _reads_row_as_x(pl, step, row, D, call, norm_inputs) -> bool:
    src = getattr(step, "source", None)
    segs = None if src is None else src.meta.get("_segments")
    if not segs or src.meta.get("_prologue") is not None or src.block != GEMV_BLOCK:
        return False
    if len(step.bufs) != 1 + 2 * len(segs) or step.bufs[0] != row or step.bufs.count(row) != 1:
        return False
    if any(s.x_offset != "0" or s.k != D or s.T != call.TY for s in segs):
        return False
    writes = step.bufs[-len(segs):]
    return not any(b in writes for b in norm_inputs)


def _one_warp_a_row(seg):
    """The segment run one warp a row: 8 rows a block, so that each block's row computation
    serves as many rows as it can and the launch has the fewest blocks (H200: q/k/v's merged
    launch with its norm folded took 8.0 us at its own 4 and 8 warps a row, 2048 blocks in two
    waves, run BU; 6.0 us one warp a row, 384 blocks, run BV)."""
    iters, blocks = nk_shape(seg.n, seg.k, 16 // seg.dtype.itemsize, 1, MAX_UNROLLED)
    return replace(seg, wpr=1, iters=iters, blocks=blocks)


def _with_prologue(pl, norm, step):
    call = norm.source.meta["_rms_rows"]
    names = ix.dim_names(pl.symbols)
    r = lambda e: ix.r(e, names)  # noqa: E731
    x_buf, w_buf, _ = norm.bufs
    lines = []
    skip = skip_when_empty(f"({r(call.rows)})")
    if _static(call.rows) is None and skip not in step.source.meta["_segments"][0].guard:
        lines.append(skip)  # 0 or 1 rows in a call of this bucket: nothing to do on 0
    D = _static(call.D)
    lines += [f"__shared__ __align__(16) {call.TY} lf_xs[{D}];",
              f"LfRmsRow<{call.TX}, {call.TW}, {call.TY}, {call.block}, {call.TR}, {D}> lf_rx{{rx + ({r(call.x_offset)}), "
              f"rw + ({r(call.w_offset)}), lf_xs, {call.inv_n}, {call.eps}}};"]
    pro = RmsPrologue(bufs=(("rms_x", "rx", pl.bufs[x_buf].dtype, True), ("rms_w", "rw", pl.bufs[w_buf].dtype, True)),
                      ids=(x_buf, w_buf), lines=tuple(lines))
    src = render_gemv_nk(pl.lang, [_one_warp_a_row(s) for s in step.source.meta["_segments"]], prologue=pro)
    src.meta["nodes"] = (norm.node,) + tuple(step.source.meta.get("nodes", (step.node,)))
    return replace(step, source=src, bufs=list(pro.ids) + list(step.bufs[1:]), label=f"{pro.label} + {step.label}")


__all__ = ["RmsPrologue", "fold_rms_prologues", "fold_enabled", "SWITCH"]

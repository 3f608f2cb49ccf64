"""RMS norm folded into the decode GEMVs that read its row: in a Llama decode step the one-row
``rms_norm_rows`` before the q/k/v projections (three merged siblings), before gate/up and
before the LM head costs a launch of its own (~2.5 us on an H200) to write a row that only the
next GEMV reads. Instead each block of that GEMV computes the row itself: it sums the squares
of x (2048 values for Llama-3.2-1B, served from L2 after the first block), writes
``x * (1 / sqrt(sum(x*x) * inv_n + eps)) * w`` rounded to the GEMV's dtype into shared memory,
and runs the unchanged GEMV over that copy (``lf_rms_row_to`` in kernels/rms_norm.cu: the same
sums in the same order as the norm kernel, so the same bits as the row it would have stored).

Applied after the sibling merge and before the epilogue fold (epilogue.py renders a GEMV step's
prologue too) to an ``rms_norm_rows`` step when: it normalises one row (R at most 1 at the
bucket's largest dims; a symbolic R of 0 skips the launch), its literals are inlined, its
output is an arena buffer read by nothing but the GEMV steps right after it, each reading it
as its x from offset 0 over the whole row (K == D, the same dtype), none of them writing the
norm's input or weight, and the row fits the shared-memory budget. The norm's step and its
buffer disappear; its x and w are read by the GEMV steps instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ...ir.expr import as_expr
from ..render import index as ix
from .siblings import render_gemv_nk, skip_when_empty

ROW_BYTES_MAX = 32 * 1024  # the normalised row in shared memory (static shared is 48 KB a block)
GEMV_BLOCK = 256  # the threads of a lf_gemv_nk block (siblings.render_gemv_nk)


@dataclass(frozen=True)
class RmsPrologue:
    """The x of a GEMV step computed in the kernel: ``bufs`` [(role, C name, dtype, const)] and
    ``ids`` (buffer ids) replace the x buffer, ``lines`` run before the GEMV, ``x`` is the
    pointer the GEMV reads; ``tag`` and ``label`` name the kernel kind and step."""

    bufs: tuple
    ids: tuple
    lines: tuple
    x: str = "lf_xs"
    tag: str = "rms"
    label: str = "rms_norm_rows"


def fold_rms_prologues(pl) -> int:
    """Fold each eligible rms_norm_rows step into the GEMV step(s) right after it; returns how
    many norm steps disappeared. Off unless ``LUMINAL_CUDA_RMS_PROLOGUE=1``: on the H200 (run N,
    docs/benchmarks.md) the decode candidates timed 1.363 and 1.254 ms without it and 1.450 and
    1.385 ms with it - every GEMV block recomputing the row (16k blocks in the LM head) costs more
    than the launch it saves."""
    if os.environ.get("LUMINAL_CUDA_RMS_PROLOGUE", "0") in ("0", "false", ""):
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
            or call.block > GEMV_BLOCK or D * pl.bufs[out].dtype.itemsize > ROW_BYTES_MAX):
        return 0
    readers = [j for j, s in enumerate(steps) if j != i and out in s.bufs]
    if not readers or readers != list(range(i + 1, i + 1 + len(readers))):
        return 0
    for j in readers:
        if not _reads_row_as_x(pl, steps[j], out, D, call, (x_buf, w_buf)):
            return 0
    return len(readers)


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


def _with_prologue(pl, norm, step):
    call = norm.source.meta["_rms_rows"]
    names = ix.dim_names(pl.symbols)
    r = lambda e: ix.r(e, names)  # noqa: E731
    x_buf, w_buf, _ = norm.bufs
    D = _static(call.D)
    lines = []
    skip = skip_when_empty(f"({r(call.rows)})")
    if _static(call.rows) is None and skip not in step.source.meta["_segments"][0].guard:
        lines.append(skip)  # 0 or 1 rows in a call of this bucket: nothing to do on 0
    lines += [f"__shared__ __align__(16) {call.TY} lf_xs[{D}];",
              f"lf_rms_row_to<{call.TX}, {call.TW}, {call.TY}, {call.block}, {GEMV_BLOCK}, {call.TR}>("
              f"rx + ({r(call.x_offset)}), (long long)({r(call.row_stride)}), rw + ({r(call.w_offset)}), "
              f"(long long)({r(call.w_stride)}), lf_xs, {D}, {call.inv_n}, {call.eps});"]
    pro = RmsPrologue(bufs=(("rms_x", "rx", pl.bufs[x_buf].dtype, True), ("rms_w", "rw", pl.bufs[w_buf].dtype, True)),
                      ids=(x_buf, w_buf), lines=tuple(lines))
    src = render_gemv_nk(pl.lang, list(step.source.meta["_segments"]), prologue=pro)
    src.meta["nodes"] = (norm.node,) + tuple(step.source.meta.get("nodes", (step.node,)))
    return replace(step, source=src, bufs=list(pro.ids) + list(step.bufs[1:]), label=f"{pro.label} + {step.label}")


__all__ = ["RmsPrologue", "fold_rms_prologues", "ROW_BYTES_MAX"]

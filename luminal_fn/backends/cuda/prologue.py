"""RMS norm folded into the decode GEMVs that read its row: in a Llama decode step the one-row
``rms_norm_rows`` before the q/k/v projections (three merged siblings), before gate/up and
before the LM head costs a launch of its own (~2.5 us on an H200) to write a row that only the
next GEMV reads. Two ways to fold it, chosen by ``LUMINAL_CUDA_RMS_PROLOGUE``:

- ``scale``: the GEMV reads the norm's input x and weight w instead of the row (``LfRmsX`` in
  kernels/gemv.cu). Each load multiplies x by w and adds up x*x on the side; each dot product
  is scaled by ``1 / sqrt(sum(x*x) * inv_n + eps)`` as it is stored, since
  ``W @ (x * r * w) == r * (W @ (x * w))``. Nothing runs before the weight stream starts, and
  the row is never rounded to the GEMV's dtype (so the values differ from the unfolded plan's
  by that rounding). Needs the norm to round nothing between x * r and the weight multiply.
- ``row`` (or ``1``): each block of the GEMV computes the row itself before its GEMV: it sums
  the squares of x (2048 values for Llama-3.2-1B, served from L2 after the first block), writes
  ``x * (1 / sqrt(sum(x*x) * inv_n + eps)) * w`` rounded to the GEMV's dtype into shared
  memory, and runs the unchanged GEMV over that copy (``lf_rms_row_to`` in kernels/rms_norm.cu:
  the same sums in the same order as the norm kernel, so the same bits as the row it would have
  stored).

Applied after the sibling merge and before the epilogue fold (epilogue.py renders a GEMV step's
prologue too) to an ``rms_norm_rows`` step when: it normalises one row (R at most 1 at the
bucket's largest dims; a symbolic R of 0 skips the launch), its literals are inlined, its
output is an arena buffer read by nothing but the GEMV steps right after it, each reading it
as its x from offset 0 over the whole row (K == D, the same dtype), none of them writing the
norm's input or weight, and (``row``) the row fits the shared-memory budget or (``scale``) x
and w are read in aligned 16-byte vectors. The norm's step and its buffer disappear; its x
and w are read by the GEMV steps instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ...ir.expr import as_expr, mod
from ..render import index as ix
from .siblings import render_gemv_nk, skip_when_empty

ROW_BYTES_MAX = 32 * 1024  # the normalised row in shared memory (static shared is 48 KB a block)
GEMV_BLOCK = 256  # the threads of a lf_gemv_nk block (siblings.render_gemv_nk)


@dataclass(frozen=True)
class RmsPrologue:
    """The x of a GEMV step computed in the kernel: ``bufs`` [(role, C name, dtype, const)] and
    ``ids`` (buffer ids) replace the x buffer, ``lines`` run before the GEMV, ``x`` is what the
    GEMV reads (a pointer into shared memory, or with ``scaled`` the LfRmsX the GEMV scales its
    sums by, which takes no offset); ``waits_inside``: the kernel reads nothing an earlier kernel
    wrote before the GEMV's own wait; ``tag`` and ``label`` name the kernel kind and step."""

    bufs: tuple
    ids: tuple
    lines: tuple
    x: str = "lf_xs"
    scaled: bool = False
    tag: str = "rms"
    label: str = "rms_norm_rows"

    @property
    def waits_inside(self) -> bool:
        return self.scaled

    def x_at(self, offset: str) -> str:
        """The GEMV's x argument for a segment reading x from ``offset`` (C)."""
        return self.x if self.scaled else f"{self.x} + ({offset})"


SWITCH = "LUMINAL_CUDA_RMS_PROLOGUE"


def fold_mode() -> str | None:
    """How rms_norm_rows folds into the GEMVs after it: ``"scale"``, ``"row"`` or None (off), from
    LUMINAL_CUDA_RMS_PROLOGUE (``0``/``off``, ``1``/``row``, ``scale``)."""
    value = os.environ.get(SWITCH, "0").strip().lower()
    if value in ("0", "off", "false", ""):
        return None
    if value in ("1", "row"):
        return "row"
    if value == "scale":
        return "scale"
    raise ValueError(f"{SWITCH}={value!r}: expected 0 (off), row (or 1) or scale")


def fold_rms_prologues(pl) -> int:
    """Fold each eligible rms_norm_rows step into the GEMV step(s) right after it; returns how
    many norm steps disappeared. ``row`` is off by default: on the H200 (run N,
    docs/benchmarks.md) the decode candidates timed 1.363 and 1.254 ms without it and 1.450 and
    1.385 ms with it - every GEMV block recomputing the row (16k blocks in the LM head) costs more
    than the launch it saves."""
    mode = fold_mode()
    if mode is None:
        return 0
    steps = pl.steps
    folded = 0
    i = 0
    while i < len(steps):
        n = _readers_after(pl, i, mode)
        if not n:
            i += 1
            continue
        norm = steps[i]
        steps[i:i + 1 + n] = [_with_prologue(pl, norm, s, mode) for s in steps[i + 1:i + 1 + n]]
        folded += 1
        i += n
    return folded


def _static(e):
    e = as_expr(e)
    return e.args[0] if e.op == "const" else None


def _readers_after(pl, i, mode) -> int:
    """How many GEMV steps right after step i read its one normalised row as their whole x and
    are its only readers (0: no fold)."""
    steps = pl.steps
    norm = steps[i]
    call = getattr(norm, "source", None) and norm.source.meta.get("_rms_rows")
    if call is None or len(norm.bufs) != 3 or call.inv_n is None or call.eps is None:
        return 0  # (a literal read from memory: its buffer would have to travel too)
    x_buf, w_buf, out = norm.bufs
    D = _static(call.D)
    if pl.bufs[out].kind != "arena" or ix.max_value(call.rows, pl.dims_max) != 1 or D is None:
        return 0
    if mode == "row" and (call.block > GEMV_BLOCK or D * pl.bufs[out].dtype.itemsize > ROW_BYTES_MAX):
        return 0
    if mode == "scale" and not _scalable(call, 16 // pl.bufs[out].dtype.itemsize):
        return 0
    readers = [j for j, s in enumerate(steps) if j != i and out in s.bufs]
    if not readers or readers != list(range(i + 1, i + 1 + len(readers))):
        return 0
    for j in readers:
        if not _reads_row_as_x(pl, steps[j], out, D, call, (x_buf, w_buf)):
            return 0
    return len(readers)


def _scalable(call, v: int) -> bool:
    """Whether the GEMV can read the norm's x and w itself in v-element vectors (the arena and the
    inputs are 16-byte aligned) and scale its sums: the norm rounds nothing before w multiplies."""
    return (call.TR == "float" and _static(call.w_stride) == 1
            and all(_static(mod(o, v)) == 0 for o in (call.x_offset, call.w_offset)))


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


def _with_prologue(pl, norm, step, mode):
    call = norm.source.meta["_rms_rows"]
    names = ix.dim_names(pl.symbols)
    r = lambda e: ix.r(e, names)  # noqa: E731
    x_buf, w_buf, _ = norm.bufs
    D = _static(call.D)
    lines = []
    skip = skip_when_empty(f"({r(call.rows)})")
    if _static(call.rows) is None and skip not in step.source.meta["_segments"][0].guard:
        lines.append(skip)  # 0 or 1 rows in a call of this bucket: nothing to do on 0
    x = f"rx + ({r(call.x_offset)})"
    w = f"rw + ({r(call.w_offset)})"
    if mode == "scale":
        lines.append(f"const LfRmsX<{call.TX}, {call.TW}> lf_rx{{{x}, {w}, {call.inv_n}, {call.eps}}};")
        extra = {"x": "lf_rx", "scaled": True, "tag": "rms_scale"}
    else:
        lines += [f"__shared__ __align__(16) {call.TY} lf_xs[{D}];",
                  f"lf_rms_row_to<{call.TX}, {call.TW}, {call.TY}, {call.block}, {GEMV_BLOCK}, {call.TR}>("
                  f"{x}, (long long)({r(call.row_stride)}), {w}, (long long)({r(call.w_stride)}), lf_xs, {D}, "
                  f"{call.inv_n}, {call.eps});"]
        extra = {}
    pro = RmsPrologue(bufs=(("rms_x", "rx", pl.bufs[x_buf].dtype, True), ("rms_w", "rw", pl.bufs[w_buf].dtype, True)),
                      ids=(x_buf, w_buf), lines=tuple(lines), **extra)
    src = render_gemv_nk(pl.lang, list(step.source.meta["_segments"]), prologue=pro)
    src.meta["nodes"] = (norm.node,) + tuple(step.source.meta.get("nodes", (step.node,)))
    return replace(step, source=src, bufs=list(pro.ids) + list(step.bufs[1:]), label=f"{pro.label} + {step.label}")


__all__ = ["RmsPrologue", "fold_rms_prologues", "fold_mode", "ROW_BYTES_MAX", "SWITCH"]

"""Each GEMV step asks L2 for the head of the next GEMV's weights before its blocks end.

Between two GEMVs of a decode step run small kernels (RoPE, the KV scatter, attention, the RMS
norm): 1-5 us in all on an H200 during which HBM is mostly idle, and then the next GEMV starts
its weight stream from nothing. So each GEMV kernel, after its whole body, requests the first
bytes of every weight the next GEMV step of the plan reads (``lf_l2_prefetch_share`` in the CUDA
prelude, each block its share): they stream into the 50 MB L2 while the small kernels run, and the
next GEMV finds them there. The requests are fire and forget (nothing waits for them) and only
touch weights, so results are unchanged; below sm_90 (no bulk prefetch) the call does nothing.

A pair of GEMV steps (steps with ``meta["_weights"]``: lf_gemv_nk, merged, with an epilogue or a
prologue) is prefetched across when only kernel steps lie between them: a host step (a cuBLAS
call) between them streams its own operands. Per weight segment of the next GEMV the span read is
``((n - 1) * ldw + k)`` elements from its offset; all spans are cut by one factor so that together
they fit the budget, ``LUMINAL_CUDA_L2_PREFETCH_NEXT`` bytes (DEFAULT_BUDGET, 0: off, because
it was slower on the H200; kept as a switch for devices with other L2 and HBM balances). Segments whose offset or leading dim is symbolic, and weights that are not constants or
inputs (written by some step, perhaps one in between), are left out.

Runs last among the plan passes (the steps it changes are not merged again); the prefetched
weights become extra const buffers ``pf0``, ``pf1``... of the GEMV step, so lifetimes see them.
"""
from __future__ import annotations

import os
from dataclasses import replace

from ..render.kernels import finish

SWITCH = "LUMINAL_CUDA_L2_PREFETCH_NEXT"
# Off by default: on the H200 (run S, the Llama-3.2-1B bf16 decode step replayed alone) it made
# the step slower, 841 us without, 954 us at 8 MiB, 1022 us at 32 MiB: the GEMVs themselves got
# slower (the head's bulk requests compete with the next GEMV's own stream and its row prefetch)
DEFAULT_BUDGET = 0
UNIT = 16  # the bulk prefetch moves whole 16-byte units
PREFETCHED_KINDS = ("const", "input")  # there before the step runs (arena ones are computed)


def budget() -> int:
    raw = os.environ.get(SWITCH, str(DEFAULT_BUDGET)).strip()
    try:
        return max(0, int(raw))
    except ValueError:
        raise ValueError(f"{SWITCH}={raw!r}: give a byte count, such as {DEFAULT_BUDGET} (0: off)") from None


def _weights(step):
    src = getattr(step, "source", None)
    return None if src is None else src.meta.get("_weights")


def _literal(c: str):
    """The value of a C expression that is a plain integer literal, else None."""
    try:
        return int(str(c).strip())
    except ValueError:
        return None


def heads(pl, step, limit: int) -> list:
    """[(buffer id, offset in elements, bytes, dtype)]: the head of each weight segment of GEMV
    ``step`` to prefetch, all cut by one factor to fit ``limit`` bytes (multiples of UNIT)."""
    spans = []
    for slot, seg in step.source.meta["_weights"]:
        off, ldw = _literal(seg.w_offset), _literal(seg.ldw)
        buf = step.bufs[slot]
        if off is None or ldw is None or pl.bufs[buf].kind not in PREFETCHED_KINDS:
            continue
        spans.append((buf, off, ((seg.n - 1) * ldw + seg.k) * seg.dtype.itemsize, seg.dtype))
    whole = sum(s[2] for s in spans)
    out = []
    for buf, off, span, d in spans:
        nbytes = span if whole <= limit else span * limit // whole  # (integers: no rounding up)
        nbytes -= nbytes % UNIT
        if nbytes > 0:
            out.append((buf, off, nbytes, d))
    return out


def _with_prefetch(pl, step, wanted: list):
    """``step`` rendered again with ``wanted`` (see heads) prefetched after its body."""
    src = step.source
    bufs, extra, names = list(src.meta["_bufs"]), [], {}
    for buf, _, _, d in wanted:
        if buf not in names:
            names[buf] = f"pf{len(names)}"
            bufs.append((names[buf], names[buf], d, True))
            extra.append(buf)
    # the body may end early (the zero-row guard, a merged GEMV's return after its segment): run
    # it as a function so that every block still reaches the prefetch
    body = ["auto lf_main = [&]() {"] + ["  " + ln for ln in src.meta["_body"]] + ["};", "lf_main();"]
    for buf, off, nbytes, _ in wanted:
        at = names[buf] if off == 0 else f"{names[buf]} + {off}"  # (elements of the weight's type)
        body.append(f"lf_l2_prefetch_share({at}, {nbytes});")
    meta = {k: v for k, v in src.meta.items() if k not in ("_body", "_bufs")}
    meta["prefetches_next"] = sum(w[2] for w in wanted)
    new = finish(pl.lang, src.kind, body, bufs, src.block, src.work, src.per_block, src.grid_cap,
                 meta=meta, shared_bytes=src.shared_bytes)
    return replace(step, source=new, bufs=list(step.bufs) + extra)


def prefetch_next_weights(pl) -> int:
    """Make each GEMV step of ``pl.steps`` followed, past kernel steps only, by another GEMV step
    prefetch that one's weights (see the module docstring); returns how many steps changed."""
    limit = budget()
    if limit <= 0:
        return 0
    steps = pl.steps
    gemvs = [i for i, s in enumerate(steps) if _weights(s)]
    changed = 0
    for i, j in zip(gemvs, gemvs[1:]):
        if any(getattr(steps[k], "source", None) is None for k in range(i + 1, j)):
            continue  # a host step between: cuBLAS streams its own operands
        wanted = heads(pl, steps[j], limit)
        if wanted:
            steps[i] = _with_prefetch(pl, steps[i], wanted)
            changed += 1
    return changed


__all__ = ["prefetch_next_weights", "heads", "budget", "DEFAULT_BUDGET", "SWITCH"]

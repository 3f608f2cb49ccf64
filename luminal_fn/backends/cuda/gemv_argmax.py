"""The greedy pick folded into the LM head's GEMV launch.

A greedy decode step ends with the LM head (one GEMV, with its epilogue: the widening of the
logits to float32) and argmax_rows over its one row: a second launch that waits for the first
and reads the 128256 logits again (about 9 us of a step on an H200, run CX). Here the argmax
step becomes part of the GEMV's launch (kernels/argmax.cu, ``lf_am_fold_finish``): the
epilogue's store of logit n also takes (the value as stored, n) into the thread's best pair,
and after the GEMV each block puts its best into one 64-bit key with atomicMax; the launch's
last block writes the index. The logits are still stored (the values are read back as stored,
so the pick sees the bits the unfolded argmax would read).

Folded only when the argmax_rows step comes right after a single Linear-layout GEMV whose
epilogue writes the buffer it reads, reads all of that buffer in order as one row, and nothing
else touches the buffer. ``LUMINAL_CUDA_GEMV_ARGMAX=0`` turns the pass off (for A/B runs).
"""
from __future__ import annotations

from dataclasses import replace

from ...ir import dtypes as dt
from ...ir.expr import same
from ..render import index as ix
from ..render.kernels import finish
from .epilogue import _only_between, fold_adjacent
from .switches import switch_on

SWITCH = "LUMINAL_CUDA_GEMV_ARGMAX"
_TAIL = ", epilogue);"  # how epilogue.py's single GEMV call ends


def enabled() -> bool:
    return switch_on(SWITCH, True, "the argmax inside the GEMV's launch")


def fold_gemv_argmax(pl) -> int:
    """Fold each eligible argmax_rows step into the GEMV launch before it; returns how many."""
    if not enabled():
        return 0
    return fold_adjacent(pl.steps, lambda s1, s2: _argmax_of(pl, s1, s2))


def _single_gemv_call(step):
    """The body's last line when it is epilogue.py's single lf_gemv_nk_to call, else None."""
    src = getattr(step, "source", None)
    body = src.meta.get("_body") if src is not None else None
    if not body or "_weights" not in src.meta or len(src.meta["_weights"]) != 1:
        return None
    call = body[-1]
    return call if call.startswith("lf_gemv_nk_to<") and call.endswith(_TAIL) else None


def _argmax_of(pl, s1, s2):
    call = _single_gemv_call(s1)
    src2 = getattr(s2, "source", None)
    if call is None or src2 is None or src2.kind != "argmax_rows":
        return None
    node = pl.graph.nodes[s2.node]
    y = s1.bufs[-1]  # the epilogue's output (its "out" binding comes last)
    if s1.source.meta["_bufs"][-1][0] != "out" or pl.input_buf(node, 0) != y or s2.bufs[0] != y:
        return None
    src, view = node.inputs[0]
    n = ix.numel(pl.graph.nodes[src].shape)
    one_row = (view.is_contiguous and view.mask is None and ix.is_zero(view.offset)
               and same(ix.numel(view.shape), n) and same(ix.numel(node.shape), 1))
    if not one_row or not _only_between(pl, y, s1, s2):
        return None
    counts = pl.zeroed_counters(4, ("gemv argmax key and count", node.id))  # key: 2 ints, count: 1
    take = ["float lf_am_v = -LF_INF;", "int lf_am_i = 0x7fffffff;",
            "auto lf_am_store = [&](int n, float acc0) {",
            "  epilogue(n, acc0);",
            "  lf_am_take(lf_ld(out[n]), n, lf_am_v, lf_am_i);",
            "};"]
    done = ["lf_am_fold_finish<256>(lf_am_v, lf_am_i, (unsigned long long*)am_cnt, am_cnt + 2, "
            "gridDim.x, am_out);"]
    meta = s1.source.meta
    body = meta["_body"][:-1] + take + [call[:-len(_TAIL)] + ", lf_am_store);"] + done
    bufs = list(meta["_bufs"]) + [("count", "am_cnt", dt.int32, False), ("index", "am_out", dt.int32, False)]
    keep = {k: v for k, v in meta.items() if not k.startswith("_") or k == "_weights"}
    src1 = s1.source
    new = finish(pl.lang, f"{src1.kind}_argmax", body, bufs, src1.block, src1.work, src1.per_block,
                 src1.grid_cap, meta={**keep, "nodes": (*meta.get("nodes", (s1.node,)), s2.node)},
                 shared_bytes=src1.shared_bytes)
    return replace(s2, source=new, bufs=list(s1.bufs) + [counts, s2.bufs[-1]],
                   label=f"{s1.label} + argmax")


__all__ = ["SWITCH", "enabled", "fold_gemv_argmax"]

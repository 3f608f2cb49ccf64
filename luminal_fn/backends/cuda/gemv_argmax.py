"""The greedy pick folded into the LM head's GEMV launch.

A greedy decode step ends with the LM head (one GEMV, with its epilogue: the widening of the
logits to float32) and argmax_rows over its one row: a launch that reads the 128256 logits
again (4.8 us alone on an H200, run CX). Here the epilogue's store of logit n also takes (the
value as stored, n) into the thread's best pair; after the GEMV each block merges its pairs and
puts the best into one 64-bit key with a fire-and-forget atomicMax (kernels/argmax.cu,
``lf_am_fold_block``), and the argmax step becomes a one-thread kernel that turns the key into
the index and zeroes it (``lf_am_key_index``). (Finding the launch's last block instead, as
argmax_rows does, costs each of the LM head's 16032 blocks a fence and a counted atomic before
it may end: the decode step took 30 us longer that way, run DA.)

Folded only when the argmax_rows step comes right after a single Linear-layout GEMV whose
epilogue writes the buffer it reads with one store, reads all of that buffer in order as one
row, and nothing else touches the buffer. Off by default until a GPU run times this form
against the separate argmax_rows launch (the counted form lost; this one is untimed):
``LUMINAL_CUDA_GEMV_ARGMAX=1`` turns it on.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...ir import dtypes as dt
from ...ir.expr import same
from ..render import index as ix
from ..render.kernels import finish
from .epilogue import _only_between, fold_adjacent
from .switches import switch_on

SWITCH = "LUMINAL_CUDA_GEMV_ARGMAX"
_TAIL = ", epilogue);"  # how epilogue.py's single GEMV call ends
_LAMBDA = "auto epilogue = [&](int n, float acc0) {"  # and its epilogue lambda starts
_STORE = re.compile(r"^(\s*)out\[n\] = (.+);$")


DEFAULT = False  # (see the module's docstring)


def enabled() -> bool:
    return switch_on(SWITCH, DEFAULT, "the argmax inside the GEMV's launch")


def fold_gemv_argmax(pl) -> int:
    """Fold each eligible argmax_rows step into the GEMV launch before it; returns how many."""
    return fold_adjacent(pl.steps, lambda s1, s2: _argmax_of(pl, s1, s2)) if enabled() else 0


def _single_gemv_call(step):
    """The body's last line when it is epilogue.py's single lf_gemv_nk_to call, else None."""
    src = getattr(step, "source", None)
    body = src.meta.get("_body") if src is not None else None
    if not body or "_weights" not in src.meta or len(src.meta["_weights"]) != 1:
        return None
    call = body[-1]
    return call if call.startswith("lf_gemv_nk_to<") and call.endswith(_TAIL) else None


def _taking_epilogue(body):
    """The body with the epilogue's one store of out also taking the stored value into the
    thread's pair (declared before the lambda), else None."""
    start = [k for k, ln in enumerate(body) if ln.startswith(_LAMBDA)]
    if len(start) != 1:
        return None
    end = body.index("};", start[0])
    stores = [k for k in range(start[0] + 1, end) if _STORE.match(body[k])]
    if len(stores) != 1:
        return None
    k = stores[0]
    pad, value = _STORE.match(body[k]).groups()
    take = [f"{pad}const auto lf_am_s = {value};", f"{pad}out[n] = lf_am_s;",
            f"{pad}lf_am_take(lf_ld(lf_am_s), n, lf_am_v, lf_am_i);"]
    decl = ["float lf_am_v = -LF_INF;", "int lf_am_i = 0x7fffffff;"]
    return body[:start[0]] + decl + body[start[0]:k] + take + body[k + 1:]


def _argmax_of(pl, s1, s2):
    """[the GEMV step taking the argmax, the key's one-thread step], or None."""
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
    body = _taking_epilogue(s1.source.meta["_body"][:-1])
    if not one_row or body is None or not _only_between(pl, y, s1, s2):
        return None
    key = pl.zeroed_counters(2, ("gemv argmax key", node.id))  # 8 bytes: one 64-bit key
    meta = s1.source.meta
    body += [call, f"lf_am_fold_block<{s1.source.block}>(lf_am_v, lf_am_i, (unsigned long long*)am_key);"]
    bufs = list(meta["_bufs"]) + [("count", "am_key", dt.int32, False)]
    keep = {k: v for k, v in meta.items() if not k.startswith("_") or k == "_weights"}
    src1 = s1.source
    gemv = finish(pl.lang, f"{src1.kind}_argmax", body, bufs, src1.block, src1.work, src1.per_block,
                  src1.grid_cap, meta=keep, shared_bytes=src1.shared_bytes)
    index = finish(pl.lang, "argmax_key", ["lf_am_key_index((unsigned long long*)am_key, out);"],
                   [("count", "am_key", dt.int32, False), ("out", "out", node.dtype, False)], 32, 1, 1,
                   meta={"hand": True})
    return [replace(s1, source=gemv, bufs=list(s1.bufs) + [key], label=f"{s1.label} + argmax"),
            replace(s2, source=index, bufs=[key, s2.bufs[-1]], label="argmax_rows (the GEMV's key)")]


__all__ = ["SWITCH", "enabled", "fold_gemv_argmax"]

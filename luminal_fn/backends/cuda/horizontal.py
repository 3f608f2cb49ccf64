"""Independent small kernels that sit next to each other in a plan run as one launch.

A decode step ends each attention block with several tiny kernels that do not read each other's
results: RoPE of q and of k, the k and v cache scatters. Each launch costs about as much as its
work (0.7 us inside a CUDA graph on the H200), so adjacent independent grid-stride kernels are
rendered again as one kernel: blocks [0, G1) run the first body, [G1, G1 + G2) the second, each
body seeing its own block index and block count, so its grid-stride loop covers its own work as
before. The work is the same; only the launch is shared.

A step joins the launch before it when
- both are grid-stride kernels with the same block size: no barriers, shuffles or shared memory,
  and no hand device function that reads the block index itself (``MERGEABLE_HAND_KINDS`` lists
  the hand kinds whose functions are pure arithmetic);
- neither writes a buffer the other reads or writes (a merged launch gives no order between them).

``LUMINAL_CUDA_MERGE_INDEPENDENT=0`` turns the pass off.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..render.kernels import finish
from .launch import launch_shape
from .switches import switch_on

MAX_PARTS = 4
MERGEABLE_HAND_KINDS = ("rope_half", "rope")
_NOT_GRID_STRIDE = ("__syncthreads", "__shared__", "__shfl", "lf_shfl", "lf_block_", "lf_warp_")


def _mergeable(step) -> bool:
    src = getattr(step, "source", None)
    if src is None or "_body" not in src.meta or src.meta.get("grid3") is not None:
        return False
    if src.meta.get("hand") and src.kind not in MERGEABLE_HAND_KINDS:
        return False
    if src.shared_bytes or src.meta.get("waits_inside"):
        return False
    body = "\n".join(src.meta["_body"])
    return not any(tok in body for tok in _NOT_GRID_STRIDE)


def _writes(step) -> set:
    return {b for b, (_, _, _, const) in zip(step.bufs, step.source.meta["_bufs"]) if not const}


def _independent(group: list, step) -> bool:
    mine, theirs = set(step.bufs), set()
    for g in group:
        theirs |= set(g.bufs)
        if _writes(g) & mine:
            return False
    return not (_writes(step) & theirs)


def _rename(lines: list, names: dict) -> list:
    """``lines`` with each C identifier in ``names`` replaced (whole words only)."""
    pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    return [pat.sub(lambda m: names[m.group(1)], ln) for ln in lines]


def _merged(pl, group: list):
    lang = pl.lang
    block = group[0].source.block
    bufs, body, start = [], [], 0
    for p, step in enumerate(group):
        src = step.source
        blocks = launch_shape(src, pl.dims_max, pl.sm_count)[0][0]
        names = {c: f"p{p}_{c}" for _, c, _, _ in src.meta["_bufs"]}
        names[lang.block_idx] = "lf_bx"
        names[lang.grid_dim] = "lf_gx"
        bufs += [(f"p{p}_{role}", names[c], d, const) for role, c, d, const in src.meta["_bufs"]]
        head = "if" if p == 0 else "} else if"
        body.append(f"{head} ({lang.block_idx} < {start + blocks}) {{")
        body.append(f"  const int lf_bx = {lang.block_idx} - {start}, lf_gx = {blocks};")
        body += ["  " + ln for ln in _rename(src.meta["_body"], names)]
        start += blocks
    body.append("}")
    hand = any(s.source.meta.get("hand") for s in group)
    meta = {"grid3": (start, 1, 1), "nodes": tuple(s.node for s in group), "parts": len(group)}
    if hand:
        meta["hand"] = True
    src = finish(lang, "merged", body, bufs, block, 1, 1, meta=meta)
    return replace(group[0], source=src, bufs=[b for s in group for b in s.bufs],
                   label=" + ".join(s.label for s in group))


def merge_independent_steps(pl) -> None:
    """Replace runs of adjacent independent grid-stride kernel steps in ``pl.steps`` (up to
    MAX_PARTS each) by one step each."""
    if not switch_on("LUMINAL_CUDA_MERGE_INDEPENDENT", True, "merge adjacent independent kernels"):
        return
    steps, out, i = pl.steps, [], 0
    while i < len(steps):
        group = [steps[i]]
        j = i + 1
        if _mergeable(steps[i]):
            while (j < len(steps) and len(group) < MAX_PARTS and _mergeable(steps[j])
                   and steps[j].source.block == group[0].source.block and _independent(group, steps[j])):
                group.append(steps[j])
                j += 1
        out.append(group[0] if len(group) == 1 else _merged(pl, group))
        i = j
    steps[:] = out


__all__ = ["merge_independent_steps", "MAX_PARTS", "MERGEABLE_HAND_KINDS"]

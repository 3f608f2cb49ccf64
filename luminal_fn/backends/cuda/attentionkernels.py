"""The attention kinds on CUDA (kernels/attention.cu):

- ``attention_rows``, the kernel optimize/rules/specialize_attention.egg offers for the
  grouped-query attention the Llama step traces (semantics: backends/numpy/attention_kernels.py):
  one block per query row, three passes over the keys, the traced literals rendered as float
  literals (read from memory when one is not a scalar Constant);
- ``attention``, attr-driven (q, k, v and a causal/scale attr; no rule offers it yet), lowered to
  the flash-decoding and prefill kernels.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ...ir import dtypes as dt
from ...ir.expr import as_expr, same, to_int_or_expr
from ..render import index as ix
from .handkernels import hand_source, rexpr, storage
from .plan import lowerer
from .rowkernels import _at_most, _direct, _lead, _scalar_operand
from .switches import switch_count, switch_on

SCORES_IN_SHARED = 4096  # the largest bucket C whose scores stay in shared memory (16 KiB)
PART_KEYS = 128  # the fewest keys a block takes when a row's keys are split (flash decoding)
# Warps of a split kernel's block, two blocks an SM (H200 run Y: 16-warp blocks, one an SM with
# all registers, 2.2 waves of 288 blocks, TPOT 1.26 ms at a 1000-token context; 64 registers for
# two an SM spilled, and cost 7.8 us a layer at c = 40 in a bucket up to 2048, run X)
SPLIT_WARPS = 8
MAX_PARTS = 32
SPLIT_SWITCH = "LUMINAL_CUDA_ATTN_SPLIT"
WARPS_SWITCH = "LUMINAL_CUDA_ATTN_WARPS"
# The split kernel's launch bound: blocks an SM it is compiled to fit (registers: 2 -> 120,
# 3 -> 72, 4 -> 47 with nvcc 13.5, none spilled). A block's registers also decide how many blocks
# of the GEMV launched after it under PDL fit beside it. H200 (runs CR-CS, Llama-1B decode step
# in a bucket up to 2048): 3 takes c = 40 from 776 to 758 us and c = 1000 from 1002 to 1005; 4 is
# as fast at c = 40 and 10 us slower at c = 1000. LUMINAL_CUDA_ATTN_SPLIT_BLOCKS sets it.
SPLIT_BLOCKS_PER_SM = 3
SPLIT_BLOCKS_SWITCH = "LUMINAL_CUDA_ATTN_SPLIT_BLOCKS"


def split_blocks_per_sm() -> int:
    """SPLIT_BLOCKS_PER_SM, or LUMINAL_CUDA_ATTN_SPLIT_BLOCKS (1 to 8) when set, for A/B runs."""
    return switch_count(SPLIT_BLOCKS_SWITCH, SPLIT_BLOCKS_PER_SM, "the split kernel's blocks an SM", 1, 8)


def _online_softmax_allowed(pl, node, switch: str) -> bool:
    """Whether a variant that runs an online softmax (running max and sum: the split rows, the
    tiles) may be planned: ``switch`` not 0/off/false, and the traced shift x - max(x) (neg = -1,
    which rescaling by the running max relies on)."""
    if not switch_on(switch, True, "allow the online-softmax variant"):
        return False
    neg = pl.kernel_input(node, 3).scalar
    return neg is not None and float(neg) == -1.0


def _parts(pl, node, rows_max: int, c_max: int) -> int:
    """Blocks a row's keys are split among (lf_attn_rows' PARTS): as many as two blocks an SM
    hold at once when the rows alone are fewer (a decode step: one query row per head; a grid of
    one wave, SPLIT_WARPS-warp blocks two an SM), and at most one per
    PART_KEYS keys of the bucket's largest C; 1 (no split) otherwise, when the traced softmax
    shift is not x - max(x) (neg = -1, which the parts' merge relies on), or with
    ``LUMINAL_CUDA_ATTN_SPLIT=0``."""
    if not _online_softmax_allowed(pl, node, SPLIT_SWITCH):
        return 1
    want = 2 * pl.sm_count // max(rows_max, 1)
    return max(1, min(want, -(-c_max // PART_KEYS), MAX_PARTS))


MANY_ROWS_PER_SM = 4  # rows an SM at the bucket's largest dims from which a row's block has at most 4 warps
MANY_ROWS_WARPS = 4


def row_warps(c_max: int, parts: int, rows_max: int, sm_count: int) -> int:
    """Warps of a row's block: one for every 16 keys of the bucket's largest C (2 to 16, or
    SPLIT_WARPS with a split), at most MANY_ROWS_WARPS when the rows alone fill the device (a
    prompt's: 32 heads x 64 tokens, 2048 rows), unless LUMINAL_CUDA_ATTN_WARPS gives the number
    (2, 4, 8 or 16). H200 run AR, the 32-token Llama-3.2-1B prompt (c up to 128): 8 warps 7.85 us
    a layer and the step replayed alone in 1352.8-1353.2 us, 4 warps 4.77-4.80 us and 1300.8-1301.6
    us, 2 warps 21.9-22.4 us and 1506.6-1507.0 us."""
    v = os.environ.get(WARPS_SWITCH, "").strip()
    if v:
        if v not in ("2", "4", "8", "16"):
            raise ValueError(f"{WARPS_SWITCH}={v!r}: expected 2, 4, 8 or 16 warps a row")
        return int(v)
    warps = min(16 if parts == 1 else SPLIT_WARPS, max(2, 1 << max(0, (c_max // 16) - 1).bit_length()))
    if rows_max >= MANY_ROWS_PER_SM * sm_count:
        warps = min(warps, MANY_ROWS_WARPS)
    return warps


def _unit_last(view) -> bool:
    return same(view.strides[-1], 1) or same(view.shape[-1], 1)


@dataclass(frozen=True)
class AttnRowsCall:
    """An lf_attn_rows call as rendered, less its output (kept in ``meta["_attn_rows"]`` so that
    fold_attention_stores can render it again with another output dtype and layout): the
    template arguments before and after the output types, and the C arguments before and after
    the output's pointer and strides."""

    types: str
    tuning: str
    head: str
    tail: str
    fn: str = "lf_attn_rows"  # or lf_attn_tiles (a long prompt's rows, tuning = QS, R, TK, EM)

    def line(self, ty: str, tr: str, strides: tuple) -> str:
        ys = ", ".join(f"(long long)({x})" for x in strides)
        return f"{self.fn}<{self.types}, {ty}, {tr}, {self.tuning}>({self.head}, out, {ys}, {self.tail});"


# lf_attn_tiles' (rows a block, keys a tile, the largest E and Ev) by head size: 128-wide heads take
# half the rows and keys so that the block's shared memory stays within 48 KiB
TILE_SHAPES = ((64, 64, 32), (128, 32, 16))  # (largest head, R, TK)
# the bucket's largest S from which a prompt's rows are tiled. H200 runs BD and BE
# (benchmarks/prompt_attention_sweep.py, Llama-3.2-1B bf16 step ms, tiles / one row a block): in a
# bucket of prompts up to 64 tokens, 32 tokens 1.50 / 1.48, 64 tokens 1.64 / 2.17, 32 after 64
# 1.60 / 1.94; up to 1024, 16 after 1000 3.57 / 5.21, 16 alone 1.80 / 1.78.
TILES_MIN_S = 64
TILES_SWITCH = "LUMINAL_CUDA_ATTN_TILES"
TILES_FROM_SWITCH = "LUMINAL_CUDA_ATTN_TILES_FROM"
TILE_BLOCKS_PER_SM = 3  # lf_attn_tiles' launch bound (at most 170 registers a thread)


def tiles_from() -> int:
    """The bucket's largest S from which rows are tiled: TILES_MIN_S, or
    LUMINAL_CUDA_ATTN_TILES_FROM when set (for sweeps: benchmarks/prompt_attention_sweep.py)."""
    return switch_count(TILES_FROM_SWITCH, TILES_MIN_S, "a prompt length in tokens, such as 128", 1)


def _tiles(pl, node, G, S, E, Ev):
    """(QS, R, TK, EM) of lf_attn_tiles (QS positions of each of the G query heads in a block of R
    rows, keys in tiles of TK, heads zero-padded to EM), or None for one row a block
    (lf_attn_rows): tiles when the bucket's prompts reach TILES_MIN_S tokens (a key read once a
    block of R rows instead of once a row: the 1000-token prompt's attention_rows took 9.2 ms a
    layer on the H200), E and Ev are at most 128, G divides R and the traced shift is x - max(x)
    (the online softmax relies on it). ``LUMINAL_CUDA_ATTN_TILES=0`` turns it off."""
    g = to_int_or_expr(G)
    if not isinstance(g, int) or g < 1 or _at_most(pl, S) < tiles_from():
        return None
    head = max(_at_most(pl, E), _at_most(pl, Ev))
    shape = next(((em, r, tk) for em, r, tk in TILE_SHAPES if head <= em and r % g == 0), None)
    if shape is None or not _online_softmax_allowed(pl, node, TILES_SWITCH):
        return None
    em, r, tk = shape
    return r // g, r, tk, em


@lowerer("attention_rows")
def lower_attention_rows(pl, node):
    Hk, G, S, C, E, Ev = node.attrs["params"]
    r = lambda e: rexpr(pl, e)  # noqa: E731
    bufs, ids, types = [], [], []
    views = []
    for k in range(3):  # q (Hk, G, S, E), k (Hk, C, E), v (Hk, C, Ev): unit stride along the last axis
        b, view = _direct(pl, node, k, _unit_last)
        d = pl.kernel_input(node, k).dtype
        bufs.append((f"in{k}", f"b{k}", d, True))
        ids.append(b)
        types.append(storage(pl, d))
        views.append(view)
    b_m, mv = _direct(pl, node, 6, _unit_last)
    bufs.append(("in6", "b6", pl.kernel_input(node, 6).dtype, True))
    ids.append(b_m)
    types.append(storage(pl, pl.kernel_input(node, 6).dtype))
    neg = _scalar_operand(pl, node, 3, bufs, ids)
    log2e = _scalar_operand(pl, node, 4, bufs, ids)
    scale = _scalar_operand(pl, node, 5, bufs, ids)
    qv, kv, vv = views
    mh, ms = _lead(mv)
    c_max = _at_most(pl, C)
    rows = as_expr(Hk) * G * S
    rows_max = _at_most(pl, rows)
    tiles = _tiles(pl, node, G, S, E, Ev)
    parts = 1 if tiles else _parts(pl, node, rows_max, c_max)
    split = ""
    if parts > 1:  # the parts' (max, sum, values) and the per-row counts (zero between launches)
        ids.append(pl.scratch(dt.float32, rows_max * parts * (2 + _at_most(pl, Ev))))
        ids.append(pl.zeroed_counters(rows_max, ("attention_rows count", node.id)))
        bufs += [("scratch", "part", dt.float32, False), ("count", "cnt", dt.int32, False)]
        split = ", part, cnt"
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    ne, nev = (-(-_at_most(pl, x) // 32) for x in (E, Ev))
    cs = -(-c_max // 32) * 32 if c_max <= SCORES_IN_SHARED else 0
    if tiles:  # 128 threads a block of R rows
        threads, per_block, tuning, fn = 128, tiles[1], ", ".join(map(str, tiles)), "lf_attn_tiles"
    else:
        threads = 32 * row_warps(c_max, parts, rows_max, pl.sm_count)
        per_block, fn = 1, "lf_attn_rows"
        tuning = f"{threads}, {ne}, {nev}, {cs}" + (f", {parts}, {PART_KEYS}" if parts > 1 else "")
    call = AttnRowsCall(
        ", ".join(types), tuning,
        f"b0 + ({r(qv.offset)}), (long long)({r(qv.strides[0])}), (long long)({r(qv.strides[1])}), "
        f"(long long)({r(qv.strides[2])}), "
        f"b1 + ({r(kv.offset)}), (long long)({r(kv.strides[0])}), (long long)({r(kv.strides[1])}), "
        f"b2 + ({r(vv.offset)}), (long long)({r(vv.strides[0])}), (long long)({r(vv.strides[1])}), "
        f"b6 + ({r(mv.offset)}), (long long)({r(mh)}), (long long)({r(ms)})",
        f"{r(Hk)}, {r(G)}, {r(S)}, {r(C)}, {r(E)}, {r(Ev)}, {neg}, {log2e}, {scale}{split}", fn)
    ty = storage(pl, node.dtype)
    strides = tuple(r(x) for x in _contiguous_strides(G, S, Ev))
    # (tiles: a block for each QS positions of a kv head's G query heads, so the grid is exact)
    work = as_expr(Hk) * ((as_expr(S) + (tiles[0] - 1)) // tiles[0]) * tiles[1] if tiles else rows * parts
    src = hand_source(pl, "attention_rows", [call.line(ty, ty, strides)], bufs, threads, work, per_block,
                      meta={"_attn_rows": call, "parts": parts,
                            "min_blocks": split_blocks_per_sm() if parts > 1 else TILE_BLOCKS_PER_SM if tiles else 0,
                            "tiles": tiles})
    pl.add_kernel(src, ids, node.id, "attention_rows")


def _contiguous_strides(G, S, Ev) -> tuple:
    """The output's (hk, g, s, e) strides as the node lays it out: (Hk, G, S, Ev) contiguous."""
    return (as_expr(G) * S * Ev, as_expr(S) * Ev, Ev, 1)


# ---- attention ---------------------------------------------------------------------------------
CAUSAL = {None: 0, False: 0, "none": 0, 0: 0, True: 1, "top_left": 1, 1: 1, "bottom_right": 2, 2: 2}


def _attn_operand(pl, node, k):
    """(buffer, offset, (sb, sh, sl), shape4) of a (..., H, L, D) operand."""
    view = node.inputs[k][1]
    nd = len(view.shape)
    if not 2 <= nd <= 4:
        raise NotImplementedError(f"attention kernel: operand {k} must have 2 to 4 dims, got {view.shape}")
    ok = (view.mask is None and same(view.strides[-1], 1) and pl.kernel_input(node, k).scalar is None)
    if ok:
        b = pl.input_buf(node, k)
    else:
        b, view = pl.materialize(node, k)
    pad = 4 - nd
    shape = (1,) * pad + tuple(view.shape)
    strides = (0,) * pad + tuple(view.strides)
    return b, view.offset, strides[:3], shape


@lowerer("attention")
def lower_attention(pl, node):
    T = storage(pl, node.dtype)
    bq, oq, sq, shq = _attn_operand(pl, node, 0)
    bk, ok_, sk, shk = _attn_operand(pl, node, 1)
    bv, ov, sv, shv = _attn_operand(pl, node, 2)
    B, Hq, Lq, D = shq
    _, Hkv, Lk, Dk = shk
    if not isinstance(D, int) or D % 32 or D > 256 or not same(D, Dk) or not same(shv[-1], D):
        raise NotImplementedError(f"attention kernel: head dim must be a static multiple of 32 up to "
                                  f"256 and equal for q, k, v (got q {shq}, k {shk}, v {shv})")
    for t in (pl.graph.nodes[node.inputs[j][0]].dtype for j in range(3)):
        if t != node.dtype:
            raise NotImplementedError(f"attention kernel: q, k, v must have the output dtype {node.dtype}")
    if isinstance(Hq, int) and isinstance(Hkv, int) and Hq % Hkv:
        raise ValueError(f"attention: {Hkv} key/value heads do not divide {Hq} query heads")
    causal = CAUSAL.get(node.attrs.get("causal", 0))
    if causal is None:
        raise ValueError(f"attention: causal must be none/top_left/bottom_right, got {node.attrs.get('causal')!r}")
    scale = node.attrs.get("scale")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    bufs = [("in0", "b0", node.dtype, True), ("in1", "b1", node.dtype, True), ("in2", "b2", node.dtype, True)]
    ids = [bq, bk, bv]
    r = lambda e: rexpr(pl, e)  # noqa: E731
    kv = node.attrs.get("kv_len")
    if len(node.inputs) > 3:  # a runtime length (int32 scalar buffer)
        bufs.append(("in3", "b3", dt.int32, True))
        ids.append(pl.input_buf(node, 3))
        kv_code = f"b3[{r(node.inputs[3][1].offset)}]"
    else:
        kv_code = r(Lk if kv is None else kv)
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    body = ["LfAttn p;",
            f"p.qb = {r(sq[0])}; p.qh = {r(sq[1])}; p.ql = {r(sq[2])};",
            f"p.kb = {r(sk[0])}; p.kh = {r(sk[1])}; p.kl = {r(sk[2])};",
            f"p.vb = {r(sv[0])}; p.vh = {r(sv[1])}; p.vl = {r(sv[2])};",
            f"p.B = {r(B)}; p.Hq = {r(Hq)}; p.Hkv = {r(Hkv)}; p.Lq = {r(Lq)}; p.Lk = {r(Lk)};",
            f"p.kv_len = {kv_code}; p.causal = {causal}; p.scale = {scale!r}f;"]
    Lq_max = ix.max_value(Lq, pl.dims_max) or 1
    args = f"b0 + ({r(oq)}), b1 + ({r(ok_)}), b2 + ({r(ov)}), out, p"
    if Lq_max <= 4 and node.attrs.get("variant") != "prefill" or node.attrs.get("variant") == "decode":
        body.append(f"lf_attn_decode<{T}, {D}, 4>({args});")
        grid3 = (Lq, Hq, B)
        variant = "decode"
    else:
        tk = 32 if D <= 128 else 8
        body.append(f"lf_attn_prefill<{T}, {D}, {tk}>({args});")
        grid3 = ((as_expr(Lq) + 15) // 16, Hq, B)
        variant = "prefill"
    src = hand_source(pl, "attention", body, bufs, 128, 1, 1, meta={"variant": variant}, grid3=grid3)
    pl.add_kernel(src, ids, node.id, f"attention ({variant})")

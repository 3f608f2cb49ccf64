"""CUDA lowerings of sort_rows and argsort_rows (ir/composites.py; semantics in
backends/numpy/sort_kernels.py): kernels/sort.cu's bitonic network over unique 64-bit keys
(value word, position). Rows of up to LF_SORT_TILE (4096) keys at the bucket's largest dims are
one launch, a block a row in shared memory. Longer rows keep their keys in a global scratch of
rows x P (P the length rounded up to a power of two) and take several launches over the whole
grid, so one long row is not one SM's work: for P = 2^20, 22 (the tiles, 36 wide steps in 12
launches, 8 tile merges, the outputs). A smaller call in the same bucket runs the same launches; those of stages
past its own P return at once.

top_k_rows (the first K positions of the descending order) sorts each tile of a longer row and
keeps its first K keys, then one block a row sorts those candidates (kernels/sort.cu,
lf_top_k_*): two launches where a whole sort of a vocabulary row took 17. Past K = 2048 it is the
whole sort, its first K written out."""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.expr import as_expr
from .handkernels import hand_source, rexpr, row_view, storage
from .plan import lowerer
from .rowkernels import _at_most, _direct

SORT_BLOCK = 512  # a row's tile in shared memory
STEP_BLOCK = 256  # the launches over every key (a step of the wider stages, the outputs)
SORT_TILE = 4096  # kernels/sort.cu's LF_SORT_TILE
STEPS_AT_ONCE = 4  # the wide steps one launch takes (kernels/sort.cu's lf_sort_steps: 16 keys a thread)
TOP_K_MAX = SORT_TILE // 2  # kernels/sort.cu's lf_top_k_merge keeps K candidates beside a batch


def padded_length(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def _lower_sort(pl, node, kind: str, desc: int, first=None):
    """The sorted elements (sort_rows) or positions (argsort_rows, top_k_rows) of x's rows, the
    ``first`` of each (default all N)."""
    b_x, xv = _direct(pl, node, 0, lambda v: row_view(v) is not None)
    off, rs, rows, N = row_view(xv)
    xd = pl.kernel_input(node, 0).dtype
    TX = storage(pl, xd)
    x = f"b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)})"
    R, n = rexpr(pl, rows), rexpr(pl, N)
    F = n if first is None else str(first)
    outs = "out, (int*)0" if kind == "sort_rows" else f"({TX}*)0, out"
    x_buf = ("in0", "b0", xd, True)
    out_buf = ("out", "out", node.dtype, False)
    p_max = padded_length(_at_most(pl, N))
    if p_max <= SORT_TILE:  # one launch: a block a row, in shared memory
        body = [f"lf_sort_rows<{TX}, {SORT_BLOCK}>({x}, {R}, {n}, {F}, {desc}, {outs});"]
        pl.add_kernel(hand_source(pl, kind, body, [x_buf, out_buf], SORT_BLOCK, rows, 1),
                      [b_x, pl.node_buf[node.id]], node.id, kind)
        return
    # longer rows: the keys in a scratch (int32 pairs, 256-byte aligned, read as 64-bit keys),
    # each launch over the whole grid (kernels/sort.cu, steps 1-4)
    keys = pl.scratch(dt.int32, 2 * _at_most(pl, rows) * p_max)
    g_buf = ("scratch", "sk", dt.int32, False)
    g = f"(unsigned long long*)sk, {p_max}LL"
    tiles = as_expr(rows) * (p_max // SORT_TILE)

    def launch(label, body, bufs, ids, block, work, per_block):
        pl.add_kernel(hand_source(pl, f"{kind}_{label}", body, bufs, block, work, per_block),
                      ids, node.id, f"{kind} ({label})")

    launch("tiles", [f"lf_sort_tiles<{TX}, {SORT_BLOCK}>({x}, {R}, {n}, {desc}, {g});"],
           [x_buf, g_buf], [b_x, keys], SORT_BLOCK, tiles, 1)
    k = 2 * SORT_TILE
    while k <= p_max:
        j = k // 2
        while j >= SORT_TILE:  # up to STEPS_AT_ONCE steps a launch, their keys in registers
            S = min(STEPS_AT_ONCE, (j // SORT_TILE).bit_length())
            launch("step", [f"lf_sort_steps<{STEP_BLOCK}, {S}>({R}, {n}, {g}, {k}, {j});"], [g_buf], [keys],
                   STEP_BLOCK, as_expr(rows) * (p_max >> S), STEP_BLOCK * 4)
            j >>= S
        launch("merge", [f"lf_sort_merge_tiles<{SORT_BLOCK}>({R}, {n}, {g}, {k});"], [g_buf], [keys],
               SORT_BLOCK, tiles, 1)
        k *= 2
    launch("out", [f"lf_sort_out<{TX}, {STEP_BLOCK}>({x}, {R}, {F}, (const unsigned long long*)sk, "
                   f"{p_max}LL, {outs});"], [x_buf, g_buf, out_buf], [b_x, keys, pl.node_buf[node.id]],
           STEP_BLOCK, as_expr(rows) * (N if first is None else first), STEP_BLOCK * 4)


@lowerer("sort_rows")
def lower_sort_rows(pl, node):
    _lower_sort(pl, node, "sort_rows", int(node.attrs["params"][2]))


@lowerer("argsort_rows")
def lower_argsort_rows(pl, node):
    _lower_sort(pl, node, "argsort_rows", int(node.attrs["params"][2]))


@lowerer("top_k_rows")
def lower_top_k_rows(pl, node):
    K = int(node.attrs["params"][2])
    b_x, xv = _direct(pl, node, 0, lambda v: row_view(v) is not None)
    off, rs, rows, N = row_view(xv)
    p_max = padded_length(_at_most(pl, N))
    if p_max <= SORT_TILE or K > TOP_K_MAX:  # the whole sort, its first K out
        _lower_sort(pl, node, "top_k_rows", 1, first=K)
        return
    xd = pl.kernel_input(node, 0).dtype
    tiles_max = _at_most(pl, rows) * (p_max // SORT_TILE)
    cand = pl.scratch(dt.int32, 2 * tiles_max * K)  # (int32 pairs read as 64-bit keys)
    x = f"b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), {rexpr(pl, rows)}, {rexpr(pl, N)}, {K}"
    g = "(unsigned long long*)sk"
    pl.add_kernel(hand_source(pl, "top_k_rows_tiles", [f"lf_top_k_tiles<{storage(pl, xd)}, {SORT_BLOCK}>({x}, {g});"],
                              [("in0", "b0", xd, True), ("scratch", "sk", dt.int32, False)], SORT_BLOCK,
                              as_expr(rows) * (p_max // SORT_TILE), 1),
                  [b_x, cand], node.id, "top_k_rows (tiles)")
    body = [f"lf_top_k_merge<{SORT_BLOCK}>({rexpr(pl, rows)}, {rexpr(pl, N)}, {K}, {g}, out);"]
    pl.add_kernel(hand_source(pl, "top_k_rows", body, [("scratch", "sk", dt.int32, False),
                                                       ("out", "out", node.dtype, False)], SORT_BLOCK, rows, 1),
                  [cand, pl.node_buf[node.id]], node.id, "top_k_rows")


__all__ = ["SORT_BLOCK", "SORT_TILE", "STEP_BLOCK", "TOP_K_MAX", "lower_argsort_rows", "lower_sort_rows",
           "lower_top_k_rows", "padded_length"]

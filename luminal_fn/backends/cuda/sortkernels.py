"""CUDA lowerings of sort_rows and argsort_rows (ir/composites.py; semantics in
backends/numpy/sort_kernels.py), kernels/sort.cu. Each element is a 64-bit key (an order-keeping
word of its value, its position). Rows of up to LF_SORT_TILE (4096) keys at the bucket's largest
dims are one launch, a block a row: a bitonic network over the unique keys in shared memory.
Longer rows take an LSD radix sort, stable (so ties keep their positions), a pass a byte of the
word (float32 / int32 4, float16 / bfloat16 2 on their own 16 bits, bool 1), each pass three
launches over rows x tiles of RADIX_TILE keys: every tile's digit counts, a block a row to turn
them into every tile's first place for each digit, and the scatter (the tile's keys stably
ranked in shared memory by per-warp ballots, then written to their places). The first pass reads
x, the middle ones ping-pong between two key scratches, the last writes the outputs (the first
F of each row): 12 launches for a float32 row of 10^6 (the bitonic network took 22). A smaller
call in the same bucket runs the same grids; its own rows and length bound every loop.

top_k_rows (the first K positions of the descending order) sorts each tile of a longer row and
keeps its first K keys, then one block a row sorts those candidates (kernels/sort.cu,
lf_top_k_*): two launches. Past K = 2048 it is the whole sort, its first K written out."""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.expr import as_expr
from .handkernels import hand_source, rexpr, row_view, storage
from .plan import lowerer
from .rowkernels import _at_most, _direct

SORT_BLOCK = 512  # a row's tile in shared memory
SORT_TILE = 4096  # kernels/sort.cu's LF_SORT_TILE
TOP_K_MAX = SORT_TILE // 2  # kernels/sort.cu's lf_top_k_merge keeps K candidates beside a batch
RADIX_TILE = 4096  # kernels/sort.cu's LF_RADIX_TILE (its block: LF_RADIX_BLOCK)
RADIX_BLOCK = 256
RADIX_SCAN_BLOCK = 1024  # lf_radix_scan: a block a row


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
    # longer rows: the radix passes (kernels/sort.cu, lf_radix_*), a byte of the element's word each
    passes, rows_max, n_max = xd.itemsize, _at_most(pl, rows), _at_most(pl, N)
    tiles_max = -(-n_max // RADIX_TILE)
    hist = pl.scratch(dt.int32, rows_max * 256 * tiles_max)
    keys = [pl.scratch(dt.int32, 2 * rows_max * n_max) for _ in range(min(passes - 1, 2))]  # (64-bit keys)
    work = as_expr(rows) * tiles_max
    for p in range(passes):
        shift, last = 32 + 8 * p, p == passes - 1
        bufs, ids, g_in, g_out = [x_buf], [b_x], "(const unsigned long long*)0", "(unsigned long long*)0"
        if p > 0:
            bufs.append(("scratch_keys", "gi", dt.int32, True))
            ids.append(keys[(p - 1) % 2])
            g_in = "(const unsigned long long*)gi"
        counts = f"lf_radix_count<{TX}>({x}, {R}, {n}, {desc}, {shift}, {g_in}, h);"
        pl.add_kernel(hand_source(pl, f"{kind}_count", [counts], bufs + [("scratch", "h", dt.int32, False)],
                                  RADIX_BLOCK, work, 1), ids + [hist], node.id, f"{kind} (counts {p})")
        pl.add_kernel(hand_source(pl, f"{kind}_scan", [f"lf_radix_scan<{RADIX_SCAN_BLOCK}>({R}, {n}, h);"],
                                  [("scratch", "h", dt.int32, False)], RADIX_SCAN_BLOCK, rows, 1),
                      [hist], node.id, f"{kind} (places {p})")
        if last:
            tail, tail_ids, out = [out_buf], [pl.node_buf[node.id]], outs
        else:  # (the next pass's keys; no outputs)
            tail, tail_ids = [("scratch_keys_out", "go", dt.int32, False)], [keys[p % 2]]
            g_out, out = "(unsigned long long*)go", f"({TX}*)0, (int*)0"
        body = [f"lf_radix_scatter<{TX}>({x}, {R}, {n}, {F}, {desc}, {shift}, {g_in}, h, {g_out}, {out});"]
        pl.add_kernel(hand_source(pl, f"{kind}_scatter", body, bufs + [("scratch", "h", dt.int32, True)] + tail,
                                  RADIX_BLOCK, work, 1), ids + [hist] + tail_ids, node.id, f"{kind} (scatter {p})")


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


__all__ = ["RADIX_BLOCK", "RADIX_TILE", "SORT_BLOCK", "SORT_TILE", "TOP_K_MAX", "lower_argsort_rows",
           "lower_sort_rows", "lower_top_k_rows", "padded_length"]

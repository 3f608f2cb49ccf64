"""CUDA lowerings of sort_rows and argsort_rows (ir/composites.py; semantics in
backends/numpy/sort_kernels.py): one block a row runs kernels/sort.cu's bitonic network over
unique 64-bit keys (value word, position). A row of up to LF_SORT_TILE (4096) keys is sorted in
shared memory; a longer one also needs its keys in a global scratch of rows x P (P the row's
length rounded up to a power of two, at the bucket's largest dims)."""
from __future__ import annotations

from ...ir import dtypes as dt
from .handkernels import hand_source, rexpr, row_view, storage
from .plan import lowerer
from .rowkernels import _at_most, _direct

SORT_BLOCK = 512
SORT_TILE = 4096  # kernels/sort.cu's LF_SORT_TILE


def padded_length(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def _lower_sort(pl, node, kind: str):
    b_x, xv = _direct(pl, node, 0, lambda v: row_view(v) is not None)
    off, rs, rows, N = row_view(xv)
    TX = storage(pl, pl.kernel_input(node, 0).dtype)
    desc = int(node.attrs["params"][2])
    bufs = [("in0", "b0", pl.kernel_input(node, 0).dtype, True)]
    ids = [b_x]
    p_max = padded_length(_at_most(pl, N))
    scratch = "(unsigned long long*)0, 0"
    if p_max > SORT_TILE:  # (int32 pairs: 256-byte aligned, read as 64-bit keys)
        ids.append(pl.scratch(dt.int32, 2 * _at_most(pl, rows) * p_max))
        bufs.append(("scratch", "sk", dt.int32, False))
        scratch = f"(unsigned long long*)sk, {p_max}LL"
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    outs = "out, (int*)0" if kind == "sort_rows" else f"({TX}*)0, out"
    body = [f"lf_sort_rows<{TX}, {SORT_BLOCK}>(b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), "
            f"{rexpr(pl, rows)}, {rexpr(pl, N)}, {desc}, {scratch}, {outs});"]
    src = hand_source(pl, kind, body, bufs, SORT_BLOCK, rows, 1)
    pl.add_kernel(src, ids, node.id, kind)


@lowerer("sort_rows")
def lower_sort_rows(pl, node):
    _lower_sort(pl, node, "sort_rows")


@lowerer("argsort_rows")
def lower_argsort_rows(pl, node):
    _lower_sort(pl, node, "argsort_rows")


__all__ = ["SORT_BLOCK", "SORT_TILE", "lower_argsort_rows", "lower_sort_rows", "padded_length"]

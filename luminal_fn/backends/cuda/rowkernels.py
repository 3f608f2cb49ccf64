"""CUDA lowerings of the row kernels optimize/rules/specialize_norms.egg offers (rms_norm_rows,
softmax_rows; semantics in backends/numpy/row_kernels.py): one block per row calling the device
functions at the end of kernels/rms_norm.cu and kernels/softmax.cu. The traced literals (1/D,
eps, -1, log2(e), the attention scale) are scalar Constants, rendered into the wrapper as float
literals; one held in memory instead is read from its buffer. And argmax_rows
(specialize_argmax.egg, kernels/argmax.cu): a row split over blocks when there are few rows; and
scan_rows (ir/composites.py, kernels/scan.cu): cumsum / cumprod, a block a row.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import dtypes as dt
from ...ir.expr import as_expr, same
from ...ir.ops import RMS_ROWS_ROUNDING
from ...ir.view import View
from ..render import index as ix
from ..render.tree import literal
from .handkernels import _pow2_threads, hand_source, rexpr, row_view, storage
from .plan import lowerer


def _scalar_operand(pl, node, k, bufs, ids) -> str:
    """C code of the float value of input k, a 1-element view of a literal."""
    ki = pl.kernel_input(node, k)
    if ki.scalar is not None:
        return literal(pl.lang, float(ki.scalar), "float32")[0]
    name = f"b{k}"
    bufs.append((f"in{k}", name, ki.dtype, True))
    ids.append(pl.input_buf(node, k))
    return f"lf_ld({name}[{rexpr(pl, node.inputs[k][1].offset)}])"


def _direct(pl, node, k, ok) -> tuple:
    """(buffer, view) of input k: as it lies when ``ok(view)``, else a contiguous copy."""
    view = node.inputs[k][1]
    if pl.kernel_input(node, k).scalar is None and view.mask is None and ok(view):
        return pl.input_buf(node, k), view
    return pl.materialize(node, k)


@dataclass(frozen=True)
class RmsRowsCall:
    """What an rms_norm_rows step passes lf_rms_rows (kept in its source's ``meta["_rms_rows"]``
    for plan passes such as prologue.py's fold into the next GEMV): the C storage types, the
    block size, the Exprs of the x and w views, and the C code of the literals (None when one
    is read from a buffer)."""

    TX: str
    TW: str
    TY: str
    block: int
    x_offset: object
    row_stride: object
    rows: object
    D: object
    w_offset: object
    w_stride: object
    inv_n: str | None
    eps: str | None
    TR: str = "float"  # the type x * r is rounded to before the weight multiply (float: none)


@lowerer("rms_norm_rows")
def lower_rms_norm_rows(pl, node):
    b_x, xv = _direct(pl, node, 0, lambda v: row_view(v) is not None)
    off, rs, rows, D = row_view(xv)
    b_w, wv = _direct(pl, node, 3, lambda v: len(v.shape) == 1)
    bufs = [("in0", "b0", pl.kernel_input(node, 0).dtype, True),
            ("in3", "b3", pl.kernel_input(node, 3).dtype, True)]
    ids = [b_x, b_w]
    inv_n = _scalar_operand(pl, node, 1, bufs, ids)
    eps = _scalar_operand(pl, node, 2, bufs, ids)
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    Dm = _at_most(pl, D)
    threads = _pow2_threads(Dm // 8, hi=256)
    TX, TW = (storage(pl, pl.kernel_input(node, k).dtype) for k in (0, 3))
    TY = storage(pl, node.dtype)
    TR = pl.lang.storage.get(RMS_ROWS_ROUNDING.get(int(node.attrs["params"][2])), "float")
    body = [f"lf_rms_rows<{TX}, {TW}, {TY}, {threads}, {TR}>(b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), "
            f"b3 + ({rexpr(pl, wv.offset)}), (long long)({rexpr(pl, wv.strides[0])}), out, "
            f"{rexpr(pl, rows)}, {rexpr(pl, D)}, {inv_n}, {eps});"]
    inlined = [pl.kernel_input(node, k).scalar is not None for k in (1, 2)]
    call = RmsRowsCall(TX, TW, TY, threads, off, rs, rows, D, wv.offset, wv.strides[0],
                       inv_n if inlined[0] else None, eps if inlined[1] else None, TR)
    src = hand_source(pl, "rms_norm_rows", body, bufs, threads, rows, 1, meta={"_rms_rows": call})
    pl.add_kernel(src, ids, node.id, "rms_norm_rows")


def _rows(view: View) -> bool:
    """A (H, S, D) or (S, D) read with a unit stride along D (any strides for h and s)."""
    return len(view.shape) in (2, 3) and (same(view.strides[-1], 1) or same(view.shape[-1], 1))


def _lead(view: View) -> tuple:
    """The (per h, per s) strides of a _rows view (per h 0 for a 2-D one: H = 1)."""
    return (0, view.strides[0]) if len(view.shape) == 2 else (view.strides[0], view.strides[1])


@lowerer("softmax_rows")
def lower_softmax_rows(pl, node):
    scaled = len(node.inputs) == 5
    H, S, D = (1,) * (3 - len(node.shape)) + tuple(node.shape)
    b_a, av = _direct(pl, node, 0, _rows)
    bufs = [("in0", "b0", pl.kernel_input(node, 0).dtype, True)]
    ids = [b_a]
    TA, TY = storage(pl, pl.kernel_input(node, 0).dtype), storage(pl, node.dtype)
    if scaled:
        b_m, mv = _direct(pl, node, 4, _rows)
        bufs.append(("in4", "b4", pl.kernel_input(node, 4).dtype, True))
        ids.append(b_m)
        TM = storage(pl, pl.kernel_input(node, 4).dtype)
        mh, ms = _lead(mv)
        mask = f"b4 + ({rexpr(pl, mv.offset)}), (long long)({rexpr(pl, mh)}), (long long)({rexpr(pl, ms)})"
    else:
        TM, mask = "float", "(const float*)0, 0LL, 0LL"
    neg = _scalar_operand(pl, node, 1, bufs, ids)
    log2e = _scalar_operand(pl, node, 2, bufs, ids)
    scale = _scalar_operand(pl, node, 3, bufs, ids) if scaled else "1.0f"
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    threads = _pow2_threads(_at_most(pl, D) // 4, hi=256)
    r = lambda e: rexpr(pl, e)  # noqa: E731
    ah, as_ = _lead(av)
    body = [f"lf_softmax_rows<{TA}, {TM}, {TY}, {threads}, {'true' if scaled else 'false'}>("
            f"b0 + ({r(av.offset)}), (long long)({r(ah)}), (long long)({r(as_)}), "
            f"{mask}, out, {r(H)}, {r(S)}, {r(D)}, {neg}, {log2e}, {scale});"]
    rows = as_expr(H) * S
    src = hand_source(pl, "softmax_rows", body, bufs, threads, rows, 1)
    pl.add_kernel(src, ids, node.id, "softmax_rows")


ARGMAX_BLOCK = 256
ARGMAX_PASS = 4  # elements a thread scans in one pass of lf_argmax_rows


def argmax_parts(rows_max: int, n_max: int, sm_count: int) -> int:
    """Blocks a row for lf_argmax_rows: enough that a thread scans one pass, within two blocks
    an SM over all rows; one when the rows alone fill the device."""
    if rows_max >= sm_count:
        return 1
    return max(1, min(2 * sm_count // max(rows_max, 1), -(-n_max // (ARGMAX_BLOCK * ARGMAX_PASS))))


@lowerer("argmax_rows")
def lower_argmax_rows(pl, node):
    b_x, xv = _direct(pl, node, 0, lambda v: row_view(v) is not None)
    off, rs, rows, N = row_view(xv)
    rows_max = _at_most(pl, rows)
    parts = argmax_parts(rows_max, _at_most(pl, N), pl.sm_count)
    bufs = [("in0", "b0", pl.kernel_input(node, 0).dtype, True)]
    ids = [b_x]
    split = "(float*)0, (int*)0, (int*)0"
    if parts > 1:  # each block's (value, index) pair, and the per-row counts (zero between launches)
        ids += [pl.scratch(dt.float32, rows_max * parts), pl.scratch(dt.int32, rows_max * parts),
                pl.zeroed_counters(rows_max, ("argmax_rows count", node.id))]
        bufs += [("scratch", "pv", dt.float32, False), ("scratch_index", "pi", dt.int32, False),
                 ("count", "cnt", dt.int32, False)]
        split = "pv, pi, cnt"
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    TX = storage(pl, pl.kernel_input(node, 0).dtype)
    body = [f"lf_argmax_rows<{TX}, {ARGMAX_BLOCK}>(b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), "
            f"{rexpr(pl, rows)}, {rexpr(pl, N)}, {parts}, {split}, out);"]
    src = hand_source(pl, "argmax_rows", body, bufs, ARGMAX_BLOCK, as_expr(rows) * parts, 1,
                      meta={"parts": parts})
    pl.add_kernel(src, ids, node.id, "argmax_rows")


SCAN_BLOCK = 256
SCAN_PART_MIN = 4096  # the least a part of a split row holds (4 chunks of 4 * SCAN_BLOCK)


def scan_parts(rows_max: int, n_max: int, sm_count: int) -> int:
    """How many blocks scan one row (kernels/scan.cu): one when the rows fill the device or are
    short, else enough parts (each at least SCAN_PART_MIN) for about two blocks an SM, at most a
    block's threads (each combines one part's total: the parts stay in order)."""
    if rows_max >= sm_count or n_max < 4 * SCAN_PART_MIN:
        return 1
    return max(1, min(2 * sm_count // max(rows_max, 1), n_max // SCAN_PART_MIN, SCAN_BLOCK))


@lowerer("scan_rows")
def lower_scan_rows(pl, node):
    """kernels/scan.cu (float32 / int32: what the front end names): a block a row, or for a few
    long rows two launches over their parts (the parts' totals, then the scans)."""
    b_x, xv = _direct(pl, node, 0, lambda v: row_view(v) is not None)
    off, rs, rows, N = row_view(xv)
    xd = pl.kernel_input(node, 0).dtype
    if xd not in (dt.float32, dt.int32) or node.dtype != xd:
        raise ValueError(f"scan_rows: {xd.name} rows into {node.dtype.name}; the kernel scans float32 or "
                         "int32 in their own dtype (frontend/numpy/_reduce.py names only those)")
    T = storage(pl, xd)
    op = int(node.attrs["params"][2])
    parts = scan_parts(_at_most(pl, rows), _at_most(pl, N), pl.sm_count)
    x = f"b0 + ({rexpr(pl, off)}), (long long)({rexpr(pl, rs)}), {rexpr(pl, rows)}, {rexpr(pl, N)}, {parts}"
    x_buf, out_buf = ("in0", "b0", xd, True), ("out", "out", node.dtype, False)
    bufs, ids, tot = [x_buf], [b_x], f"({T}*)0"
    work = as_expr(rows) * parts
    if parts > 1:
        tot_id = pl.scratch(xd, _at_most(pl, rows) * parts)
        body = [f"lf_scan_part_totals<{T}, {op}, {SCAN_BLOCK}>({x}, pt);"]
        src = hand_source(pl, "scan_rows_totals", body, [x_buf, ("scratch", "pt", xd, False)], SCAN_BLOCK,
                          work, 1, meta={"parts": parts})
        pl.add_kernel(src, [b_x, tot_id], node.id, "scan_rows (part totals)")
        bufs, ids, tot = [x_buf, ("scratch", "pt", xd, True)], [b_x, tot_id], "pt"
    body = [f"lf_scan_rows<{T}, {op}, {SCAN_BLOCK}>({x}, {tot}, out);"]
    src = hand_source(pl, "scan_rows", body, bufs + [out_buf], SCAN_BLOCK, work, 1, meta={"parts": parts})
    ids.append(pl.node_buf[node.id])
    pl.add_kernel(src, ids, node.id, "scan_rows")


def _at_most(pl, e) -> int:
    v = ix.max_value(e, pl.dims_max)
    return int(v) if v else 1024


__all__ = ["RmsRowsCall", "argmax_parts", "lower_argmax_rows", "lower_rms_norm_rows", "lower_scan_rows",
           "lower_softmax_rows", "scan_parts"]

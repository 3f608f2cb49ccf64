"""The MLX backend's model kernels (optimize/rules/specialize_models.egg) as MLX ops.

name                 inputs (read through their views)              params
embedding_bag        table (any shape), rows (N,), stride (1,)      B L D [R]
                     out[b, d] = sum_l table.flat[clip(rows[b*L + l] * stride + d)]
                     (R > 0: rows are raw indices, first clip(i + (i < 0) * R, 0, R - 1))
embedding_bag_multi  [prefix (B, P, D) if P > 0], then K triples table_k, rows_k, stride_k
                                                                    B P K L D [R_0 .. R_K-1]
                     out (B, P+K, D): out[:, :P] = prefix, out[:, P+k] = embedding_bag of table k
embedding_bag_multi_raw  [prefix], then K quadruples table_k, raw rows_k, stride_k (1,), n_k (1,)
                                                                    B P K L D
                     the same, rows_k normalised with n_k (read on the device; n_k <= 0: as given)
dlrm_interact        T (B, F, D)                                    B F D
                     out[b, p] = dot(T[b, i_p], T[b, j_p]), (i_p, j_p) in tril_indices(F, -1)
conv2d_bias          x (C, H, W) or (N, C, H, W), w (C_out, C*kh*kw), b (C_out,)
                                                                    kh kw sh sw dh dw pad_top pad_left H_out W_out
linear_bias          x (M, K), w (K, N), b (N,)                     M N K      out = x @ w + b
matmul_t             a (Bt, M, K), b (Bt, N, K)                     Bt M N K   out = a @ b^T

The semantics are those of the NumPy backend's kernels (backends/numpy/model_kernels.py): float
math accumulates in float32, integer math in the node's dtype (bool in int32, then != 0), the
result is stored in the node's dtype. mx.matmul and mx.conv_general take floating types only, so
integer products are a broadcast multiply and sum (wrapping like NumPy's int32 arithmetic).
"""
from __future__ import annotations

import mlx.core as mx
import numpy as np

from ...ir import dtypes as dt
from .ops import cast, gather_flat, op

MODEL_KINDS = ("embedding_bag", "dlrm_interact", "conv2d_bias", "linear_bias", "matmul_t")
MULTI_TABLE_KINDS = ("embedding_bag_multi", "embedding_bag_multi_raw")


def params_of(node, dims) -> list:
    """The node's integer params at these dims (symbolic ones evaluated)."""
    return [p if isinstance(p, int) else int(p.evaluate(dims)) for p in node.attrs["params"]]


def acc_dtype(d: dt.DType):
    """float32 for float (and half) nodes, int32 for int32 and bool nodes."""
    return mx.float32 if d.is_float else mx.int32


def _store(x, d: dt.DType):
    return cast(x, d)


def product(a, b, acc):
    """a (..., M, K) @ b (..., K, N) in ``acc`` (mx.matmul for floats)."""
    a, b = a.astype(acc), b.astype(acc)
    if acc == mx.float32:
        return mx.matmul(a, b)
    return mx.sum(mx.expand_dims(a, -1) * mx.expand_dims(b, -3), axis=-2)


def bag_params(node, dims, kind: str, fixed: int, tables: int) -> tuple:
    """(the ``fixed`` leading params, the row count R_k of each table; 0 where the rows are
    used as given): the R list is absent or holds one R per table."""
    prm = params_of(node, dims)
    if len(prm) not in (fixed, fixed + tables):
        raise ValueError(f"MLX {kind} (node %{node.id}): expected {fixed} params, or {fixed} and "
                         f"one row count per table ({tables}), got {prm!r}")
    return prm[:fixed], (prm[fixed:] or [0] * tables)


def normalise_rows(rows, n: int):
    """Raw lnp.take indices into n > 0 rows as lnp.take normalises them: negatives count from
    the end, then clipped into [0, n - 1]; n <= 0: the rows as given."""
    if n <= 0:
        return rows
    return mx.clip(mx.where(rows < 0, rows + n, rows), 0, n - 1)


def bag_sums(table, rows, stride, b: int, l: int, d: int, acc, n_rows: int = 0):
    """(B, D) sums of fixed-size bags over the table's row-major elements (Gather clamps);
    rows normalised first when ``n_rows`` > 0."""
    rows = normalise_rows(rows.reshape(-1)[: b * l].astype(mx.int32), n_rows)
    stride = stride.reshape(-1)[:1].astype(mx.int32)
    idx = rows.reshape(b, l, 1) * stride + mx.arange(d, dtype=mx.int32)  # (B, L, D) flat indices
    return mx.sum(gather_flat(table, idx).astype(acc), axis=1)


@op("embedding_bag")
def _embedding_bag(node, readers):
    r_table, r_rows, r_stride = readers

    def step(vals, dims):
        (b, l, d), (nr,) = bag_params(node, dims, "embedding_bag", 3, 1)
        acc = acc_dtype(node.dtype)
        out = bag_sums(r_table(vals, dims), r_rows(vals, dims), r_stride(vals, dims), b, l, d, acc, nr)
        return _store(out, node.dtype)

    return step


def multi_inputs(node, readers, p: int, k: int, per: int = 3) -> tuple:
    """(prefix reader or None, [(table, rows, stride[, row count]) readers] per table), checked;
    ``per`` = 4 for embedding_bag_multi_raw."""
    first = 1 if p else 0
    if len(readers) != first + per * k:
        kind = "embedding_bag_multi_raw" if per == 4 else "embedding_bag_multi"
        raise ValueError(f"MLX {kind} (node %{node.id}): P={p}, K={k} needs "
                         f"{first + per * k} inputs, got {len(readers)}")
    return (readers[0] if p else None), [readers[first + per * j: first + per * j + per] for j in range(k)]


def normalise_rows_by(rows, n):
    """normalise_rows with the row count a (1,) array on the device (n <= 0: rows as given)."""
    n = n.reshape(-1)[:1].astype(mx.int32)
    fixed = mx.maximum(mx.minimum(mx.where(rows < 0, rows + n, rows), n - 1), 0)
    return mx.where(n > 0, fixed, rows)


def raw_tables(node, readers, vals, dims, p: int, k: int) -> tuple:
    """(prefix reader or None, [(table, normalised rows, stride)] arrays) of an
    embedding_bag_multi_raw node: the rows normalised here with each table's row-count input."""
    prefix, tables = multi_inputs(node, readers, p, k, 4)
    out = []
    for r_table, r_rows, r_stride, r_n in tables:
        rows = normalise_rows_by(r_rows(vals, dims).reshape(-1).astype(mx.int32), r_n(vals, dims))
        out.append((r_table(vals, dims), rows, r_stride(vals, dims)))
    return prefix, out


@op("embedding_bag_multi")
def _embedding_bag_multi(node, readers):
    def step(vals, dims):
        b, p, k, l, d = params_of(node, dims)[:5]
        _, nrs = bag_params(node, dims, "embedding_bag_multi", 5, k)
        prefix, tables = multi_inputs(node, readers, p, k)
        acc = acc_dtype(node.dtype)
        parts = [] if prefix is None else [prefix(vals, dims).astype(acc)]
        for (r_table, r_rows, r_stride), nr in zip(tables, nrs):
            bags = bag_sums(r_table(vals, dims), r_rows(vals, dims), r_stride(vals, dims), b, l, d, acc, nr)
            parts.append(mx.expand_dims(bags, 1))
        return _store(mx.concatenate(parts, axis=1), node.dtype)

    return step


@op("embedding_bag_multi_raw")
def _embedding_bag_multi_raw(node, readers):
    def step(vals, dims):
        b, p, k, l, d = params_of(node, dims)[:5]
        prefix, tables = raw_tables(node, readers, vals, dims, p, k)
        acc = acc_dtype(node.dtype)
        parts = [] if prefix is None else [prefix(vals, dims).astype(acc)]
        for table, rows, stride in tables:
            parts.append(mx.expand_dims(bag_sums(table, rows, stride, b, l, d, acc), 1))
        return _store(mx.concatenate(parts, axis=1), node.dtype)

    return step


def tril_pairs(f: int) -> tuple:
    """(i, j) int32 index arrays of the strict lower triangle, numpy.tril_indices(f, -1) order."""
    li, lj = np.tril_indices(f, -1)
    return mx.array(li.astype(np.int32)), mx.array(lj.astype(np.int32))


@op("dlrm_interact")
def _dlrm_interact(node, readers):
    (r_t,) = readers

    def step(vals, dims):
        _, f, _ = params_of(node, dims)
        t = r_t(vals, dims).astype(acc_dtype(node.dtype))
        li, lj = tril_pairs(f)
        # only the F(F-1)/2 products: rows i and j of each sample, multiplied and summed over D
        out = mx.sum(mx.take(t, li, axis=1) * mx.take(t, lj, axis=1), axis=-1)
        return _store(out, node.dtype)

    return step


def conv2d_bias(x, w, bias, prm: list, acc):
    """The direct conv of the NumPy kernel: x (N, C, H, W) zero-padded by (pad_top, pad_left) on
    the low sides (and as much as the taps need on the high sides), out (N, C_out, H_out, W_out)."""
    kh, kw, sh, sw, dh, dw, pt, pl, ho, wo = prm
    n, c, h, wd = x.shape
    co = w.shape[0]
    need_h = (ho - 1) * sh + (kh - 1) * dh + 1
    need_w = (wo - 1) * sw + (kw - 1) * dw + 1
    x = x.astype(acc)
    xp = mx.pad(x, [(0, 0), (0, 0), (pt, max(0, need_h - pt - h)), (pl, max(0, need_w - pl - wd))])
    xp = xp[:, :, :need_h, :need_w]
    w4 = w.astype(acc).reshape(co, c, kh, kw)
    b4 = bias.astype(acc).reshape(1, co, 1, 1)
    if acc == mx.float32:  # MLX's convolution: NHWC input, (C_out, kh, kw, C) weight
        y = mx.conv_general(xp.transpose(0, 2, 3, 1), w4.transpose(0, 2, 3, 1), stride=(sh, sw),
                            kernel_dilation=(dh, dw))
        return y.transpose(0, 3, 1, 2) + b4
    out = mx.broadcast_to(b4, (n, co, ho, wo))
    for i in range(kh):  # integers: one (C_out, C) x (C, H_out*W_out) product per tap
        for j in range(kw):
            win = xp[:, :, i * dh: i * dh + (ho - 1) * sh + 1: sh, j * dw: j * dw + (wo - 1) * sw + 1: sw]
            out = out + product(w4[:, :, i, j], win.reshape(n, c, ho * wo), acc).reshape(n, co, ho, wo)
    return out


@op("conv2d_bias")
def _conv2d_bias(node, readers):
    r_x, r_w, r_b = readers

    def step(vals, dims):
        x = r_x(vals, dims)
        batched = x.ndim == 4
        out = conv2d_bias(x if batched else mx.expand_dims(x, 0), r_w(vals, dims), r_b(vals, dims),
                          params_of(node, dims), acc_dtype(node.dtype))
        return _store(out if batched else out[0], node.dtype)

    return step


@op("linear_bias")
def _linear_bias(node, readers):
    r_x, r_w, r_b = readers

    def step(vals, dims):
        acc = acc_dtype(node.dtype)
        out = product(r_x(vals, dims), r_w(vals, dims), acc) + r_b(vals, dims).astype(acc)
        return _store(out, node.dtype)

    return step


@op("matmul_t")
def _matmul_t(node, readers):
    r_a, r_b = readers

    def step(vals, dims):
        out = product(r_a(vals, dims), mx.swapaxes(r_b(vals, dims), -1, -2), acc_dtype(node.dtype))
        return _store(out, node.dtype)

    return step


__all__ = ["MODEL_KINDS", "MULTI_TABLE_KINDS", "normalise_rows_by", "raw_tables", "params_of", "acc_dtype", "bag_params", "bag_sums",
           "normalise_rows", "tril_pairs",
           "conv2d_bias", "multi_inputs"]

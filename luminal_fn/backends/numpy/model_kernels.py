"""The NumPy backend's model kernels (issue 7): the reference semantics of the ``(Kernel name ...)``
terms that optimize/rules/specialize_models.egg adds. Each builder receives an LLIR ``CustomOp`` node
(``attrs["name"]``, ``attrs["params"]``: ints or Exprs) whose inputs are already read through
their views (logical arrays, in the rule's IList order) and returns a step(vals, dims).

name            inputs                                      params
embedding_bag   table (any shape), rows (N,), stride (1,)   B L D [R]
                out[b, d] = sum_l table.flat[clip(rows[b*L + l] * stride + d)]  (Gather clamps)
                with R > 0 the rows are raw lnp.take indices, first normalised as lnp.take
                does: clip(i + (i < 0) * R, 0, R - 1)  (normalise_rows)
embedding_bag_multi  [prefix (B, P, D) if P > 0], then K triples table_k, rows_k, stride_k
                                                            B P K L D [R_0 .. R_K-1]
                out (B, P+K, D): out[:, :P] = prefix; out[:, P+k] = embedding_bag of table k
                (rows_k normalised with R_k when the R list is there and R_k > 0)
embedding_bag_multi_raw  [prefix], then K quadruples table_k, rows_k (raw), stride_k (1,), n_k (1,)
                                                            B P K L D
                the same with every rows_k raw lnp.take indices normalised with n_k (n_k <= 0: as given)
dlrm_interact   T (B, F, D)                                 B F D
                out[b, p] = dot(T[b, i_p], T[b, j_p]) for (i_p, j_p) in tril_indices(F, -1)
conv2d_bias     x (C, H, W) or (N, C, H, W), w (C_out, C*kh*kw), b (C_out,)
                                                            kh kw sh sw dh dw pad_top pad_left H_out W_out
                out[o, y, x'] = b[o] + sum w[o, (c*kh + i)*kw + j] * x[c, y*sh + i*dh - pt, x'*sw + j*dw - pl]
                (zero outside x; with a batch dim, per sample: out (N, C_out, H_out, W_out))
linear_bias     x (M, K), w (K, N), b (N,)                  M N K        out = x @ w + b
matmul_t        a (Bt, M, K), b (Bt, N, K)                  Bt M N K     out = a @ b^T (per batch)

Floating-point math runs in float32 (as the HLIR primitives do), integer math in the node's
dtype; results are stored in the node's dtype.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from .executor import kernel

MODEL_KERNELS = ("embedding_bag", "dlrm_interact", "conv2d_bias", "linear_bias", "matmul_t")
# the multi-table embedding-bag (K stacked bags, one launch); listed apart so MODEL_KERNELS keeps
# naming the kernels every backend with model kernels has
MULTI_TABLE_KERNELS = ("embedding_bag_multi", "embedding_bag_multi_raw")


def _params(node, dims) -> list:
    return [p if isinstance(p, int) else int(p.evaluate(dims)) for p in node.attrs["params"]]


def _acc(node):
    """The accumulation dtype: float32 for float kernels (as the HLIR primitives), else the
    node's own integer dtype."""
    return np.float32 if node.dtype.is_float else dt.to_numpy(node.dtype)


def _as(x, dtype):
    x = np.asarray(x)
    return x if x.dtype == dtype else x.astype(dtype)


def _store(node, out):
    return np.ascontiguousarray(out, dtype=dt.to_numpy(node.dtype))


def normalise_rows(rows, n: int):
    """Raw lnp.take indices into n rows as lnp.take normalises them (n > 0): negatives count
    from the end, then clipped into [0, n - 1] (JAX's clamp); n <= 0: the rows as given."""
    if n <= 0:
        return rows
    return np.clip(np.where(rows < 0, rows + n, rows), 0, n - 1)


def bag_params(node, dims, kind: str, fixed: int, tables: int):
    """(the ``fixed`` leading params, the row count R_k of each table): the R list is absent
    (all 0: rows used as given) or one R per table."""
    prm = _params(node, dims)
    if len(prm) not in (fixed, fixed + tables):
        raise ValueError(f"{kind} (node %{getattr(node, 'id', '?')}): expected {fixed} params, or "
                         f"{fixed} and one row count per table ({tables}), got {prm!r}")
    return prm[:fixed], (prm[fixed:] or [0] * tables)


@kernel("embedding_bag")
def _embedding_bag(node, readers):
    r_table, r_rows, r_stride = readers

    def step(vals, dims):
        (b, l, d), (nr,) = bag_params(node, dims, "embedding_bag", 3, 1)
        flat = np.ascontiguousarray(r_table(vals, dims)).reshape(-1)
        rows = normalise_rows(np.asarray(r_rows(vals, dims)).reshape(-1)[: b * l].astype(np.int64), nr)
        stride = int(np.asarray(r_stride(vals, dims)).reshape(-1)[0])
        return _store(node, bag_sums(flat, rows, stride, b, l, d, _acc(node)))

    return step


def bag_sums(flat, rows, stride: int, b: int, l: int, d: int, acc):
    """(B, D) sums of fixed-size bags over a flat table, indices clamped as Gather clamps."""
    if flat.size == 0:
        return np.zeros((b, d), acc)
    idx = rows.reshape(b, l, 1) * stride + np.arange(d, dtype=np.int64)
    return np.sum(np.take(flat, idx, mode="clip"), axis=1, dtype=acc)


@kernel("embedding_bag_multi")
def _embedding_bag_multi(node, readers):
    return _multi_step(node, readers, "embedding_bag_multi", 3)


@kernel("embedding_bag_multi_raw")
def _embedding_bag_multi_raw(node, readers):
    return _multi_step(node, readers, "embedding_bag_multi_raw", 4)


def _multi_step(node, readers, kind: str, per: int):
    """K stacked bags; ``per`` inputs per table: (table, rows, stride) with the row counts as
    params (or none), or (table, raw rows, stride, row count) for the raw kernel."""
    def step(vals, dims):
        b, p, k, l, d = _params(node, dims)[:5]
        _, nrs = bag_params(node, dims, kind, 5, 0 if per == 4 else k)
        if len(readers) != (1 if p else 0) + per * k:
            raise ValueError(f"{kind} (node %{getattr(node, 'id', '?')}): P={p}, K={k} "
                             f"needs {(1 if p else 0) + per * k} inputs, got {len(readers)}")
        acc = _acc(node)
        out = np.zeros((b, p + k, d), acc)
        if p:
            out[:, :p] = readers[0](vals, dims)
        for j in range(k):
            first = (1 if p else 0) + per * j
            r_table, r_rows, r_stride = readers[first: first + 3]
            flat = np.ascontiguousarray(r_table(vals, dims)).reshape(-1)
            rows = np.asarray(r_rows(vals, dims)).reshape(-1)[: b * l].astype(np.int64)
            nr = int(np.asarray(readers[first + 3](vals, dims)).reshape(-1)[0]) if per == 4 else nrs[j]
            rows = normalise_rows(rows, nr)
            stride = int(np.asarray(r_stride(vals, dims)).reshape(-1)[0])
            out[:, p + j] = bag_sums(flat, rows, stride, b, l, d, acc)
        return _store(node, out)

    return step


def tril_pairs(f: int):
    """(i, j) index arrays of the strict lower triangle in numpy.tril_indices(f, -1) order."""
    return np.tril_indices(f, -1)


@kernel("dlrm_interact")
def _dlrm_interact(node, readers):
    (r_t,) = readers

    def step(vals, dims):
        _, f, _ = _params(node, dims)
        t = _as(r_t(vals, dims), _acc(node))
        li, lj = tril_pairs(f)
        # only the F(F-1)/2 products: rows i and j of each sample, multiplied and summed over D
        return _store(node, np.einsum("bpd,bpd->bp", t[:, li, :], t[:, lj, :]))

    return step


@kernel("conv2d_bias")
def _conv2d_bias(node, readers):
    r_x, r_w, r_b = readers

    def step(vals, dims):
        kh, kw, sh, sw, dh, dw, pt, pl, ho, wo = _params(node, dims)
        acc = _acc(node)
        x, w, b = (_as(r(vals, dims), acc) for r in (r_x, r_w, r_b))
        batched = x.ndim == 4
        if not batched:
            x = x[None]
        n, c, h, wd = x.shape
        co = w.shape[0]
        need_h = (ho - 1) * sh + (kh - 1) * dh + 1
        need_w = (wo - 1) * sw + (kw - 1) * dw + 1
        xp = np.zeros((n, c, max(need_h, pt + h), max(need_w, pl + wd)), acc)
        xp[:, :, pt:pt + h, pl:pl + wd] = x
        w4 = w.reshape(co, c, kh, kw)
        out = np.broadcast_to(b.reshape(1, co, 1, 1), (n, co, ho, wo)).astype(acc)
        # one (C_out, C) @ (C, H_out*W_out) product per kernel tap: no patch matrix
        for i in range(kh):
            for j in range(kw):
                win = xp[:, :, i * dh: i * dh + (ho - 1) * sh + 1: sh, j * dw: j * dw + (wo - 1) * sw + 1: sw]
                out += np.einsum("oc,nchw->nohw", w4[:, :, i, j], win)
        return _store(node, out if batched else out[0])

    return step


@kernel("linear_bias")
def _linear_bias(node, readers):
    r_x, r_w, r_b = readers

    def step(vals, dims):
        acc = _acc(node)
        x, w, b = (_as(r(vals, dims), acc) for r in (r_x, r_w, r_b))
        return _store(node, np.matmul(x, w) + b)

    return step


@kernel("matmul_t")
def _matmul_t(node, readers):
    r_a, r_b = readers

    def step(vals, dims):
        a, b = _as(r_a(vals, dims), _acc(node)), _as(r_b(vals, dims), _acc(node))
        return _store(node, np.matmul(a, np.swapaxes(b, -1, -2)))

    return step


__all__ = ["MODEL_KERNELS", "MULTI_TABLE_KERNELS", "bag_params", "bag_sums", "normalise_rows", "tril_pairs"]

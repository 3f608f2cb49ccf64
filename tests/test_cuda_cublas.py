"""The direct cuBLAS calls of the CUDA backend, checked on the CPU: the argument lists that
``gemm_plan`` builds for strided row-major views are executed by a NumPy model of
cublasGemmStridedBatchedEx (column-major, leading dimensions, batch strides) over flat buffers,
and must give A @ B. The GPU runs the same lists through cuBLAS in test_cuda.py."""
import numpy as np
import pytest

from luminal_fn.backends.cuda.cublas import OP_N, batches, gemm_plan, operand
from luminal_fn.ir.view import View


def _colmajor(flat, off, rows, cols, ld):
    idx = off + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    return flat[idx]


def _emulate(calls, a_flat, b_flat, c_flat, item, item_c=None):
    item_c = item_c or item  # (C of another dtype than A and B: its byte offsets)
    for (opa, opb, m, n, k, boff, _bt, ldb, sb, aoff, _at, lda, sa, coff, _ct, ldc, sc, count) in calls:
        for i in range(count):
            x = (_colmajor(b_flat, boff // item + i * sb, m, k, ldb) if opa == OP_N
                 else _colmajor(b_flat, boff // item + i * sb, k, m, ldb).T)
            y = (_colmajor(a_flat, aoff // item + i * sa, k, n, lda) if opb == OP_N
                 else _colmajor(a_flat, aoff // item + i * sa, n, k, lda).T)
            res = x @ y
            base = coff // item_c + i * sc
            idx = base + np.arange(m)[:, None] + np.arange(n)[None, :] * ldc
            c_flat[idx] = res


def _logical(flat, view):
    idx = np.full(view.shape, view.offset, dtype=np.int64)
    for ax, (d, s) in enumerate(zip(view.shape, view.strides)):
        shape = [1] * len(view.shape)
        shape[ax] = d
        idx = idx + (np.arange(d) * s).reshape(shape)
    return flat[idx]


def _check(va, a_flat, vb, b_flat, out_shape):
    calls = gemm_plan(va, vb, out_shape, "float32")
    assert calls is not None
    c_flat = np.full(int(np.prod(out_shape)), np.nan)
    _emulate(calls, a_flat, b_flat, c_flat, 4)
    want = _logical(a_flat, va) @ _logical(b_flat, vb)
    np.testing.assert_allclose(c_flat.reshape(out_shape), want, rtol=1e-12, atol=1e-12)
    return calls


rng = np.random.default_rng(0)


@pytest.mark.parametrize("a_t", [False, True])
@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("m,k,n", [(5, 7, 3), (1, 6, 4), (4, 1, 3), (3, 5, 1), (1, 1, 1)])
def test_2d_products_in_every_layout(a_t, b_t, m, k, n):
    a_flat, b_flat = rng.standard_normal(200), rng.standard_normal(200)
    va = View((m, k), (1, m), 3) if a_t else View((m, k), (k, 1), 3)
    vb = View((k, n), (1, k), 2) if b_t else View((k, n), (n + 2, 1), 2)  # padded rows
    calls = _check(va, a_flat, vb, b_flat, (m, n))
    assert len(calls) == 1


def test_batched_broadcast_and_collapsed_batches():
    a_flat, b_flat = rng.standard_normal(2000), rng.standard_normal(2000)
    # (2, 3) batches of (4, 5) @ (5, 6): A contiguous, B shared by every batch (strides 0)
    va = View((2, 3, 4, 5), (60, 20, 5, 1), 0)
    vb = View((2, 3, 5, 6), (0, 0, 6, 1), 7)
    calls = _check(va, a_flat, vb, b_flat, (2, 3, 4, 6))
    assert len(calls) == 1 and calls[0][-1] == 6  # one call of 6 batches
    # B transposed per batch and batch axes that do not collapse for A (a sliced outer axis)
    va = View((2, 3, 4, 5), (100, 20, 5, 1), 1)
    vb = View((2, 3, 5, 6), (90, 30, 1, 5), 0)
    calls = _check(va, a_flat, vb, b_flat, (2, 3, 4, 6))
    assert len(calls) == 2 and all(c[-1] == 3 for c in calls)


def test_layouts_without_a_unit_stride_need_a_copy():
    assert operand(3, 4, 8, 2) is None  # every other column
    assert gemm_plan(View((3, 4), (8, 2), 0), View((4, 2), (2, 1), 0), (3, 2), "float32") is None
    assert gemm_plan(View((3, 4), (4, 1), 0), View((4, 2), (0, 1), 0), (3, 2), "float32") is None


def test_batches_collapse_only_regular_axes():
    runs = batches((2, 1, 3), (30, 99, 10), (0, 5, 0))
    assert len(runs) == 1 and runs[0][1] == 6
    runs = batches((2, 3), (40, 10), (3, 1))
    assert len(runs) == 2 and runs[1][0] == (40, 3)

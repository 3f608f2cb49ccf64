"""lnp.linalg.solve, inv, det, slogdet and matrix_power (frontend/numpy/_linalg_solve.py:
Gauss-Jordan with partial pivoting) against numpy.linalg in float64."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import DTypeError, ShapeError

R = np.random.default_rng(21)
A = R.standard_normal((2, 3, 4, 4)).astype(np.float32)  # batched 4x4
A[0, 1] = [[0, 0, 1, 2], [0, 3, 0, 1], [2, 1, 0, 0], [1, 0, 4, 0]]  # zero pivots: rows must swap
B = R.standard_normal((3, 4, 2)).astype(np.float32)  # its batch broadcasts against A's
V = R.standard_normal(4).astype(np.float32)


def _close(got, want, rtol=2e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()))


def test_solve_inv_det_slogdet_match_numpy():
    f = lf.jit(lambda a, b, v: (lnp.linalg.solve(a, b), lnp.linalg.solve(a[1, 2], v), lnp.linalg.inv(a),
                                lnp.linalg.det(a), lnp.linalg.slogdet(a)))
    a64 = A.astype(np.float64)
    x, xv, ai, d, (sign, logabs) = f(A, B, V)
    _close(x, np.linalg.solve(a64, B.astype(np.float64)))
    _close(xv, np.linalg.solve(a64[1, 2], V.astype(np.float64)))
    _close(ai, np.linalg.inv(a64))
    _close(d, np.linalg.det(a64))
    ws, wl = np.linalg.slogdet(a64)
    np.testing.assert_array_equal(np.asarray(sign), ws)
    _close(logabs, wl)
    # eagerly (the NumPy backend through lf.Array), and int input computed in float32
    _close(lnp.linalg.inv(A[0, 1]), np.linalg.inv(a64[0, 1]))
    _close(lnp.linalg.det(np.array([[2, 1], [1, 3]], np.int32)), 5.0)


def test_permutations_singular_matrices_and_sizes_zero_and_one():
    perm = np.eye(4, dtype=np.float32)[[2, 0, 3, 1]]  # det = sign of the permutation
    assert float(lnp.linalg.det(perm)) == np.linalg.det(perm.astype(np.float64))
    singular = np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], np.float32)
    assert float(lnp.linalg.det(singular)) == 0.0  # a zero pivot: no NaN from the steps after it
    sign, logabs = lnp.linalg.slogdet(singular)
    assert float(sign) == 0.0 and float(logabs) == -np.inf
    assert not np.all(np.isfinite(np.asarray(lnp.linalg.inv(singular))))  # JAX's inf/NaN, not garbage
    assert float(lnp.linalg.det(np.zeros((0, 0), np.float32))) == 1.0
    _close(lnp.linalg.solve(np.array([[4.0]], np.float32), np.array([2.0], np.float32)), np.array([0.5]))


def test_slogdet_past_the_float32_range():
    a = (np.diag([1e10, -1e10, 1e10, 1e10, 1e10]) + 0.1).astype(np.float32)  # det ~ -1e50
    sign, logabs = lnp.linalg.slogdet(a)
    ws, wl = np.linalg.slogdet(a.astype(np.float64))
    assert float(sign) == ws
    np.testing.assert_allclose(float(logabs), wl, rtol=1e-6)
    assert np.isinf(float(lnp.linalg.det(a)))  # the product itself overflows, as in float32


@pytest.mark.parametrize("k", [0, 1, 2, 5, -1, -3])
def test_matrix_power(k):
    a = (A[1] / 2).astype(np.float32)
    got = lf.jit(lambda x: lnp.linalg.matrix_power(x, k))(a)
    _close(got, np.linalg.matrix_power(a.astype(np.float64), k), rtol=1e-3)


def test_errors_name_the_function_and_shapes():
    with pytest.raises(ShapeError, match=r"linalg.inv: the last two axes must be square, got shape \(2, 3\)"):
        lnp.linalg.inv(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError, match=r"linalg.det: needs a matrix"):
        lnp.linalg.det(np.ones(3, np.float32))
    with pytest.raises(ShapeError, match=r"linalg.solve: b of shape \(3,\) does not fit a of shape \(4, 4\)"):
        lnp.linalg.solve(A[0, 0], np.ones(3, np.float32))
    with pytest.raises(DTypeError, match="linalg.solve: float16 is too coarse"):
        lnp.linalg.solve(A[0, 0].astype(np.float16), V)
    with pytest.raises(ShapeError, match="matrix_power: the exponent must be a static int"):
        lnp.linalg.matrix_power(A[0, 0], 1.5)

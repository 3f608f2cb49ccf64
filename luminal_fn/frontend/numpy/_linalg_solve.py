"""Small dense linear algebra for ``lnp.linalg``: solve, inv, det, slogdet and matrix_power.

A matrix of static size n is reduced by Gauss-Jordan elimination with partial pivoting, written
out as n steps over the whole (batched) array: each step finds the pivot row (the largest |value|
in the column at or below the diagonal), swaps it in by a gather, scales it and subtracts it from
every other row. That is LAPACK's getrf/getrs choice of pivots, unblocked, in the array's float
dtype (float32: NumPy computes in float64), and n kernels' worth of graph, so it is meant for
small matrices (tens of rows). A singular matrix cannot raise under jit: as in JAX, its solve and
inverse come out inf or NaN and its determinant 0.
"""
from __future__ import annotations

import operator

from ...ir import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..tracer import Tracer, _ctx_of, broadcast_shapes, broadcast_to, cast, lift, static_int
from . import _math as m
from ._creation import arange, eye
from ._index import take_along_axis
from ._linalg import matmul
from ._reduce import argmax, sum as rsum
from ._shape import _slice_axis, concatenate, expand_dims, reshape, squeeze

__all__ = ["solve", "inv", "det", "slogdet", "matrix_power"]


def _square(a, fn: str) -> Tracer:
    a = lift(a, _ctx_of(a))
    if a.ndim < 2:
        raise ShapeError(f"linalg.{fn}: needs a matrix (at least 2-D), got shape {a.shape}")
    n = static_int(a.shape[-1], f"linalg.{fn}: the matrix size")
    if static_int(a.shape[-2], f"linalg.{fn}: the matrix size") != n:
        raise ShapeError(f"linalg.{fn}: the last two axes must be square, got shape {a.shape}")
    if not a.dtype.is_float:
        a = cast(a, dt.float32)  # NumPy: float64
    elif a.dtype in dt.HALF:
        raise DTypeError(f"linalg.{fn}: {a.dtype} is too coarse for elimination (NumPy refuses "
                         "half precision too); cast to float32 first")
    return a


def _row(m_: Tracer, j: int) -> Tracer:
    """m_[..., j:j+1, :] (a view)."""
    return _slice_axis(m_, m_.ndim - 2, j, j + 1)


def _col(m_: Tracer, j: int) -> Tracer:
    """m_[..., :, j:j+1] (a view)."""
    return _slice_axis(m_, m_.ndim - 1, j, j + 1)


def _eliminate(aug: Tracer, n: int, skip_zero_pivots: bool = False):
    """Gauss-Jordan with partial pivoting on the rows of aug (..., n, n + k), whose first n
    columns are the matrix: (the reduced aug, [pivot of each step], [swap happened]). A zero
    pivot divides by zero (a singular solve comes out inf/NaN) unless ``skip_zero_pivots``: then
    that step eliminates nothing, as LAPACK's getrf, and the later pivots stay finite (det)."""
    rows = reshape(arange(n), (n, 1))
    pivots, swaps = [], []
    for j in range(n):
        below = _slice_axis(_col(aug, j), aug.ndim - 2, j, n)  # (..., n - j, 1)
        p = m.add(argmax(m.absolute(below), axis=-2, keepdims=True), j)  # (..., 1, 1): pivot row
        is_j = m.equal(rows, j)  # (n, 1)
        # rows j and p trade places: row r reads row src[r]
        src = m.where(is_j, p, m.where(m.equal(rows, p), j, rows))  # (..., n, 1)
        aug = take_along_axis(aug, broadcast_to(src, src.shape[:-1] + (aug.shape[-1],)), axis=-2)
        pivot = _col(_row(aug, j), j)  # (..., 1, 1)
        pivots.append(pivot)
        swaps.append(m.not_equal(p, j))
        divisor, other = pivot, is_j
        if skip_zero_pivots:  # the column is zero at and below the diagonal: nothing to remove
            divisor = m.where(m.equal(pivot, 0.0), 1.0, pivot)
            other = m.logical_or(other, m.equal(pivot, 0.0))
        scaled = m.true_divide(_row(aug, j), divisor)  # the pivot row, its pivot 1
        factor = m.where(other, 0.0, _col(aug, j))  # what each other row subtracts
        aug = m.subtract(aug, m.multiply(factor, scaled))
        aug = m.where(is_j, scaled, aug)
    return aug, pivots, swaps


def solve(a, b):
    """x with a @ x = b (NumPy 2's rules: b of shape (..., n) is one vector per matrix, else
    (..., n, k) columns); batch axes broadcast."""
    ctx = _ctx_of(a, b)
    a = _square(lift(a, ctx), "solve")
    b = lift(b, ctx)
    n = a.shape[-1]
    vector = b.ndim == 1  # NumPy 2: only a 1-D b is a vector; (..., n, k) otherwise
    if vector:
        b = expand_dims(b, -1)
    if b.ndim < 2 or static_int(b.shape[-2], "linalg.solve: b's rows") != n:
        raise ShapeError(f"linalg.solve: b of shape {b.shape[:-1] if vector else b.shape} does not "
                         f"fit a of shape {a.shape} (it needs {n} rows)")
    d = dt.promote(a.dtype, b.dtype if b.dtype.is_float else a.dtype)
    a, b = cast(a, d), cast(b, d)
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op="linalg.solve")
    a = broadcast_to(a, tuple(batch) + (n, n))
    b = broadcast_to(b, tuple(batch) + tuple(b.shape[-2:]))
    aug, _, _ = _eliminate(concatenate([a, b], axis=-1), n)
    x = _slice_axis(aug, aug.ndim - 1, n, aug.shape[-1])
    return squeeze(x, -1) if vector else x


def inv(a):
    """The inverse of each matrix (..., n, n): solve(a, I)."""
    a = _square(a, "inv")
    n = a.shape[-1]
    ident = broadcast_to(cast(eye(n), a.dtype), a.shape)
    aug, _, _ = _eliminate(concatenate([a, ident], axis=-1), n)
    return _slice_axis(aug, aug.ndim - 1, n, 2 * n)


def _pivots_and_sign(a: Tracer):
    n = a.shape[-1]
    if n == 0:
        return [], lift(1.0, a._ctx, a.dtype)
    _, pivots, swaps = _eliminate(a, n, skip_zero_pivots=True)
    swapped = rsum(concatenate([cast(s, dt.int32) for s in swaps], axis=-1), axis=-1)  # (..., 1)
    sign = m.subtract(1.0, m.multiply(2.0, cast(m.fmod(swapped, 2), a.dtype)))
    return pivots, squeeze(sign, -1)


def det(a):
    """The determinant of each matrix: the product of the pivots, negated for an odd number of
    row swaps."""
    a = _square(a, "det")
    pivots, sign = _pivots_and_sign(a)
    out = broadcast_to(sign, a.shape[:-2])
    for p in pivots:
        out = m.multiply(out, squeeze(squeeze(p, -1), -1))
    return out


def slogdet(a):
    """(sign, log|det|) of each matrix, as NumPy: the log summed over the pivots (no overflow
    where the product itself would leave the float range); sign 0 and logabsdet -inf when
    singular."""
    a = _square(a, "slogdet")
    pivots, sign = _pivots_and_sign(a)
    sign = broadcast_to(sign, a.shape[:-2])
    logabs = m.multiply(sign, 0.0)
    for p in pivots:
        p = squeeze(squeeze(p, -1), -1)
        sign = m.multiply(sign, m.sign(p))
        logabs = m.add(logabs, m.log(m.absolute(p)))
    return sign, logabs


def matrix_power(a, n):
    """a @ a @ ... (n times) by repeated squaring; n = 0 gives the identity, a negative n the
    power of the inverse."""
    try:
        k = operator.index(n)
    except TypeError:
        raise ShapeError(f"linalg.matrix_power: the exponent must be a static int, got {n!r}") from None
    a = lift(a, _ctx_of(a))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or not isinstance(a.shape[-1], int):
        raise ShapeError(f"linalg.matrix_power: needs square matrices of static size, got shape {a.shape}")
    if k < 0:
        a, k = inv(a), -k
    if k == 0:
        return broadcast_to(cast(eye(a.shape[-1]), a.dtype), a.shape)
    out, sq = None, a
    while k:
        if k & 1:
            out = sq if out is None else matmul(out, sq)
        k >>= 1
        if k:
            sq = matmul(sq, sq)
    return out

"""Polynomials as coefficient vectors, highest power first (NumPy's poly* functions), and the
1-D convolution that multiplies them. Lengths are static: they fix the results' shapes.

A convolution is a matmul: the zero-padded signal's sliding windows (a strided view, no copy)
times the reversed kernel, so the optimizer's GEMV and GEMM kernels run it."""
from __future__ import annotations

from ...ir import dtypes as dt
from ..errors import ArgumentError, ShapeError
from ..tracer import Tracer, _ctx_of, cast, lift, static_int
from . import _math as _m
from ._creation import arange, zeros
from ._linalg import matmul
from ._numeric import _joined_dtype
from ._shape import _slice_axis, concatenate, flip, pad, unfold

__all__ = ["convolve", "correlate", "polyadd", "polysub", "polymul", "polyder", "polyint",
           "polydiv", "poly"]

_MODES = ("full", "same", "valid")


def _vector(x, ctx, fn: str, what: str) -> tuple:
    """(x as a 1-D Tracer, its static length)."""
    t = lift(x, ctx)
    if t.ndim == 0:
        t = t.reshape((1,))
    if t.ndim != 1:
        raise ShapeError(f"{fn}: {what} must be 1-D, got shape {t.shape}")
    n = static_int(t.shape[0], f"{fn}: the length of {what}")
    return t, n


def _pair(a, v, fn: str):
    """(a, len a, v, len v) in their joined dtype; bool inputs as int32 (see _like_inputs)."""
    ctx = _ctx_of(a, v)
    (a, n), (v, m) = _vector(a, ctx, fn, "a"), _vector(v, ctx, fn, "v")
    if n == 0 or m == 0:
        raise ShapeError(f"{fn}: a and v must not be empty (lengths {n} and {m})")
    d = _joined_dtype([a, v])
    return cast(a, dt.int32 if d.is_bool else d), n, cast(v, dt.int32 if d.is_bool else d), m


def _like_inputs(out: Tracer, a, v) -> Tracer:
    """Bool inputs give bool, as NumPy's (any of the ands): the int32 sums tested against 0."""
    if lift(a, out._ctx).dtype.is_bool and lift(v, out._ctx).dtype.is_bool:
        return _m.not_equal(out, 0)
    return out


def _full_convolution(a: Tracer, n: int, v: Tracer, m: int) -> Tracer:
    """out[k] = sum_j a[k - j] v[j], k = 0 .. n + m - 2."""
    if m == 1:
        return _m.multiply(a, v)
    windows = unfold(pad(a, (m - 1, m - 1)), 0, m)  # (n + m - 1, m): windows[k, j] = a[k + j - (m - 1)]
    return matmul(windows, flip(v, 0))


def _mode_slice(full: Tracer, n: int, m: int, mode: str, fn: str) -> Tracer:
    if mode not in _MODES:
        raise ArgumentError(f"{fn}: mode must be one of {_MODES}, got {mode!r}")
    if mode == "full":
        return full
    long, short = max(n, m), min(n, m)
    if mode == "same":
        start = (short - 1) // 2
        return _slice_axis(full, 0, start, start + long)
    return _slice_axis(full, 0, short - 1, long)


def convolve(a, v, mode="full"):
    """NumPy's convolve of two 1-D arrays; modes "full", "same" and "valid"."""
    a0, v0 = a, v
    a, n, v, m = _pair(a, v, "convolve")
    return _like_inputs(_mode_slice(_full_convolution(a, n, v, m), n, m, mode, "convolve"), a0, v0)


def correlate(a, v, mode="valid"):
    """NumPy's correlate of two 1-D real arrays: c[k] = sum_n a[n + k] v[n]; its default mode is
    "valid". When v is the longer, NumPy's result comes out reversed, and so does this."""
    a0, v0 = a, v
    a, n, v, m = _pair(a, v, "correlate")
    if m > n:
        return flip(correlate(v0, a0, mode), 0)
    return _like_inputs(_mode_slice(_full_convolution(a, n, flip(v, 0), m), n, m, mode, "correlate"), a0, v0)


def _aligned(a1, a2, fn: str):
    """The two coefficient vectors padded in front to one length, in their joined dtype."""
    ctx = _ctx_of(a1, a2)
    (p, n), (q, m) = _vector(a1, ctx, fn, "a1"), _vector(a2, ctx, fn, "a2")
    d = _joined_dtype([p, q])
    p, q = cast(p, d), cast(q, d)
    if n < m:
        p = pad(p, (m - n, 0))
    elif m < n:
        q = pad(q, (n - m, 0))
    return p, q


def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded with leading zeros)."""
    p, q = _aligned(a1, a2, "polyadd")
    return _m.add(p, q)


def polysub(a1, a2):
    """The difference of two polynomials."""
    p, q = _aligned(a1, a2, "polysub")
    return _m.subtract(p, q)


def polymul(a1, a2):
    """The product of two polynomials: their full convolution."""
    return convolve(a1, a2)


def polyder(p, m=1):
    """The m-th derivative: float32 for float coefficients, int32 for integer ones."""
    m = _order(m, "polyder")
    p, n = _vector(p, _ctx_of(p), "polyder", "p")
    if p.dtype.is_bool:
        p = cast(p, dt.int32)
    for _ in range(m):
        if n <= 1:
            return zeros((0,), p.dtype) if n == 1 else p
        powers = cast(arange(n - 1, 0, -1), p.dtype)
        p, n = _m.multiply(_slice_axis(p, 0, 0, n - 1), powers), n - 1
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative, with integration constants ``k`` (a scalar, or m of them, the
    first for the first integration), as NumPy's polyint; float32 coefficients."""
    m = _order(m, "polyint")
    p, n = _vector(p, _ctx_of(p), "polyint", "p")
    ks = [0.0] * m if k is None else (list(k) if isinstance(k, (list, tuple)) else [k] * m)
    if len(ks) != m:
        raise ArgumentError(f"polyint: k must be a scalar or {m} constants (one an integration), got {len(ks)}")
    p = cast(p, dt.float32)
    for c in ks:
        divisors = cast(arange(n, 0, -1), dt.float32)
        const = cast(lift(c, p._ctx).reshape((1,)), dt.float32)
        p, n = concatenate([_m.true_divide(p, divisors), const]), n + 1
    return p


def _order(m, fn: str) -> int:
    if not isinstance(m, int) or isinstance(m, bool) or m < 0:
        raise ArgumentError(f"{fn}: the order m must be a non-negative int, got {m!r}")
    return m


def polydiv(u, v):
    """(quotient, remainder) of polynomial division, float32. As JAX's polydiv: the remainder
    keeps u's length (leading zeros are not trimmed: its length would depend on values)."""
    ctx = _ctx_of(u, v)
    (u, nu), (v, nv) = _vector(u, ctx, "polydiv", "u"), _vector(v, ctx, "polydiv", "v")
    u, v = cast(u, dt.float32), cast(v, dt.float32)
    if nv == 0 or nu == 0:
        raise ShapeError(f"polydiv: u and v must not be empty (lengths {nu} and {nv})")
    steps = max(nu - nv + 1, 0)
    scale = _m.reciprocal(_slice_axis(v, 0, 0, 1))
    quotient, r = [], u
    for k in range(steps):  # long division: each step clears the remainder's leading term
        d = _m.multiply(scale, _slice_axis(r, 0, k, k + 1))
        quotient.append(d)
        r = _m.subtract(r, pad(_m.multiply(d, v), (k, nu - nv - k)))
    q = concatenate(quotient) if quotient else zeros((1,), dt.float32)
    return q, r


def poly(seq_of_zeros):
    """The monic polynomial with these roots (1-D, real); for a matrix NumPy takes its
    eigenvalues, which are not computed here."""
    z = lift(seq_of_zeros, _ctx_of(seq_of_zeros))
    if z.ndim == 2:
        raise ShapeError("poly: a matrix's characteristic polynomial needs its eigenvalues, which "
                         "luminal_fn does not compute; pass the roots as a 1-D array")
    z, n = _vector(z, z._ctx, "poly", "seq_of_zeros")
    z = cast(z, dt.float32)
    out = lift(1.0, z._ctx).reshape((1,))
    for k in range(n):
        root = _slice_axis(z, 0, k, k + 1)
        factor = concatenate([lift(1.0, z._ctx).reshape((1,)), _m.negative(root)])
        out = _full_convolution(out, k + 1, factor, 2)
    return out

"""Exact int32 arithmetic (frontend/numpy/_integer.py) against NumPy on int32, over the whole range.

Floor division, bitwise and/or/xor and shifts are built from float32 quotients refined by exact
remainders, and from floored remainders by powers of two; each result must equal NumPy's bit for
bit, wraparound included. Before this module, ``x // 3`` was off by up to ~20 for |x| > 2^24 and
``&``, ``|``, ``^`` on int32 arrays were the logical forms (bool results).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import DTypeError

R = np.random.default_rng(33)
EDGES = np.array([-2**31, -2**31 + 1, 2**31 - 1, 2**31 - 2, 0, 1, -1, 2, -2, 3, -3, 2**24 + 1,
                  -2**24 - 1, 2**30, -2**30, -2**30 - 1, 2**30 - 1, 255, -256, 65535], np.int32)


def _ints(n, lo=-2**31, hi=2**31):
    return np.concatenate([EDGES, R.integers(lo, hi, size=n - len(EDGES))]).astype(np.int32)


A = _ints(400)
B = np.concatenate([R.integers(-2**31, 2**31, 150), R.integers(-9, 10, 150),
                    R.integers(-2**16, 2**16, 100)]).astype(np.int32)


def same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    bad = np.flatnonzero(got.ravel() != want.ravel())
    assert bad.size == 0, (f"{bad.size} differ, e.g. got {got.ravel()[bad[:4]]} want "
                           f"{want.ravel()[bad[:4]]} at {bad[:4]}")


@pytest.mark.parametrize("name,op", [("and", lambda x, y: x & y), ("or", lambda x, y: x | y),
                                     ("xor", lambda x, y: x ^ y),
                                     ("bitwise_and", lambda x, y: lnp.bitwise_and(x, y))])
def test_bitwise_of_two_arrays(name, op):
    ref = {"bitwise_and": np.bitwise_and}.get(name, op)
    same(lf.jit(op)(A, B), ref(A, B))


@pytest.mark.parametrize("c", [0, 1, 0xF, 0xF0F, 0x7FFFFFFF, -1, -256, -2**31, 12345, 0x55555555])
def test_bitwise_with_a_constant(c):
    got = lf.jit(lambda x: (x & c, x | c, x ^ c, c & x, c | x, c ^ x))(A)
    for g, w in zip(got, (A & c, A | c, A ^ c, c & A, c | A, c ^ A)):
        same(g, w)


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_floor_divide_and_mod_full_range(backend):
    """On MLX the integer remainder took |a|, which wraps at INT_MIN (INT_MIN % 7 gave 2), and
    INT_MIN % -1 stops the process there (a CPU trap): both are handled by the backend."""
    if backend == "mlx":
        pytest.importorskip("mlx.core", reason="MLX is not installed (pip install 'luminal-fn[mlx]')")
    a, b = np.concatenate([A, [-2**31, -2**31]]).astype(np.int32), np.concatenate([B, [-1, 7]]).astype(np.int32)
    with np.errstate(divide="ignore", over="ignore"):  # B holds zeros: NumPy gives 0 there, and so must we
        q, r, f = a // b, a % b, np.fmod(a, np.where(b == 0, 1, b)) * (b != 0)
    same(lf.jit(lambda x, y: x // y, backend=backend)(a, b), q)
    same(lf.jit(lambda x, y: x % y, backend=backend)(a, b), r)
    same(lf.jit(lambda x, y: lnp.fmod(x, y), backend=backend)(a, b), f.astype(np.int32))
    got_q, got_r = lf.jit(lambda x, y: lnp.divmod(x, y), backend=backend)(a, b)
    same(got_q, q)
    same(got_r, r)
    for k in (1, 2, 3, -3, 7, -1, 1000003, 2**30, -2**31):
        with np.errstate(over="ignore"):
            same(lf.jit(lambda x: x // k, backend=backend)(A), A // np.int32(k))


def test_division_by_zero_is_zero_as_in_numpy():
    z = np.zeros_like(A)
    with np.errstate(divide="ignore"):
        same(lf.jit(lambda x, y: (x // y))(A, z), A // z)
        same(lf.jit(lambda x, y: (x % y))(A, z), A % z)


@pytest.mark.parametrize("k", [0, 1, 3, 7, 8, 16, 24, 30, 31, 32, 40, -1])
def test_shifts_by_a_constant(k):
    same(lf.jit(lambda x: x >> k)(A), np.right_shift(A, np.int32(k)))
    same(lf.jit(lambda x: x << k)(A), np.left_shift(A, np.int32(k)))


def test_shifts_by_an_array_of_counts():
    counts = (R.integers(-4, 40, A.shape)).astype(np.int32)
    same(lf.jit(lambda x, c: x >> c)(A, counts), np.right_shift(A, counts))
    same(lf.jit(lambda x, c: x << c)(A, counts), np.left_shift(A, counts))
    same(lf.jit(lambda c: 1 << c)(np.arange(32, dtype=np.int32)),
         np.left_shift(np.int32(1), np.arange(32, dtype=np.int32)))


def test_int4_unpacking_as_quantised_weights_use_it():
    """Eight 4-bit values packed in each int32, unpacked with shifts and a mask."""
    nib = R.integers(0, 16, (6, 8)).astype(np.int64)
    packed = np.sum(nib << (4 * np.arange(8)), axis=1).astype(np.uint32).view(np.int32)
    got = lf.jit(lambda p: (p[:, None] >> (4 * lnp.arange(8))) & 0xF)(packed)
    same(got, nib.astype(np.int32))


def test_bool_operands_are_logical_and_promote_with_ints():
    t, u = np.array([True, False, True, False]), np.array([True, True, False, False])
    got = lf.jit(lambda a, b: (a & b, a | b, a ^ b, ~a))(t, u)
    for g, w in zip(got, (t & u, t | u, t ^ u, ~t)):
        same(g, w)
    n = np.array([6, 7, -1, 4], np.int32)
    same(lf.jit(lambda a, b: a & b)(t, n), t & n)
    same(lf.jit(lambda a, b: a << b)(t, u), (t << u).astype(np.int32))


def test_eager_arrays_use_the_bitwise_forms():
    x = lnp.asarray(np.array([12, 10, -7], np.int32))
    same(x & 6, np.array([12, 10, -7], np.int32) & 6)
    same(x >> 1, np.array([12, 10, -7], np.int32) >> 1)


def test_float_operands_are_refused_with_the_function_named():
    with pytest.raises(DTypeError, match="bitwise_and: not supported for float operands"):
        lf.jit(lambda x: x & 1)(np.ones(3, np.float32))
    with pytest.raises(DTypeError, match="right_shift"):
        lf.jit(lambda x: x >> 1)(np.ones(3, np.float32))


_ALL_OPS = lf.jit(lambda a, b: (a // b, a % b, a & b, a | b, a ^ b, a >> 5, a << 3, a & 0x0FF0))


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.int32, 16), y=hnp.arrays(np.int32, 16))
def test_hypothesis_full_range(x, y):
    with np.errstate(divide="ignore", over="ignore"):
        want = (x // y, x % y, x & y, x | y, x ^ y, x >> 5, x << 3, x & 0x0FF0)
    for g, w in zip(_ALL_OPS(x, y), want):
        same(g, w)


def test_min_of_int32_holding_int_min():
    """min was -max(-x), and -INT_MIN wraps to INT_MIN: min([INT_MIN, 5, 7]) came out 5. It is
    now ~max(~x) for integers (~x = -1 - x reverses the order of every int32)."""
    x = np.array([[-2**31, 5, 7], [3, 2**31 - 1, -1], [-2**31, -2**31, 2**31 - 1]], np.int32)
    got = lf.jit(lambda x: (lnp.min(x), lnp.min(x, axis=1), lnp.amin(x, axis=0, initial=-3),
                            lnp.min(x, axis=1, where=x > 0, initial=100), x.min(axis=0)))(x)
    want = (x.min(), x.min(axis=1), x.min(axis=0, initial=-3),
            np.min(x, axis=1, where=x > 0, initial=100), x.min(axis=0))
    for g, w in zip(got, want):
        same(g, np.asarray(w, np.int32))


def test_integer_power_of_arrays_is_exact_and_wraps():
    """int ** int arrays went through float32 (7 ** 11 came out 1977328128, NumPy 1977326743);
    now by squaring over the exponent's bits, wrapping as NumPy's int32 does."""
    r = np.random.default_rng(8)
    x = np.concatenate([[3, -2, 7, 0, 1, -1, 12, 2**20, -1, -1, 0, 5, -2**31, 2**31 - 1],
                        r.integers(-50, 50, 30), r.integers(-2**31, 2**31, 10)]).astype(np.int32)
    y = np.concatenate([[2, 3, 11, 0, 5, 7, 9, 2, 4, 5, 0, 31, 2, 3], r.integers(0, 40, 30),
                        r.integers(0, 2**31, 10)]).astype(np.int32)
    with np.errstate(over="ignore"):
        same(lf.jit(lambda a, b: a ** b)(x, y), x ** y)
    # negative exponents: 1 / x^|y| truncated toward zero (NumPy raises)
    same(lf.jit(lambda a, b: a ** b)(np.array([1, -1, -1, 2, -3], np.int32), np.array([-1, -2, -3, -1, -2], np.int32)),
         np.array([1, 1, -1, 0, 0], np.int32))


def test_gcd_and_lcm_match_numpy_over_the_whole_range():
    """Euclid's remainders, a fixed 48 steps: consecutive Fibonacci numbers (Euclid's worst
    case) near 2^31, signs, zeros and INT_MIN included; lcm wraps as NumPy's does."""
    fib = [1, 1]
    while fib[-1] < 2**31:
        fib.append(fib[-1] + fib[-2])
    worst = np.array([fib[-2], fib[-3], -fib[-2], fib[-4]], np.int32)
    a = np.concatenate([A, worst, [0, 0, -2**31, -2**31, -2**31, 12, -12, 7]]).astype(np.int32)
    b = np.concatenate([np.resize(B, len(A)), np.roll(worst, 1), [0, 5, 0, -2**31, 6, 18, -18, 0]]).astype(np.int32)
    small = R.integers(-60, 61, (2, 200)).astype(np.int32)
    a, b = np.concatenate([a, small[0]]), np.concatenate([b, small[1]])
    g, m = lf.jit(lambda x, y: (lnp.gcd(x, y), lnp.lcm(x, y)))(a, b)
    np.testing.assert_array_equal(np.asarray(g), np.gcd(a, b))
    np.testing.assert_array_equal(np.asarray(m), np.lcm(a, b))
    assert int(lnp.gcd(np.int32(12), 18)) == 6 and int(lnp.lcm(4, np.int32(-6))) == 12
    with pytest.raises(DTypeError, match="gcd: not supported for float"):
        lnp.gcd(np.float32([1.0]), 2)
    with pytest.raises(DTypeError, match="lcm: not supported for bool"):
        lnp.lcm(np.array([True]), np.array([False]))

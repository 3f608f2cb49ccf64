"""block, dsplit, ix_, choose, fromfunction, apply_over_axes, tril/triu_indices_from, geomspace,
modf, bitwise_count, unwrap, and rounding at infinity, each against NumPy."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

R = np.random.default_rng(41)


def _r(*shape):
    return R.standard_normal(shape).astype(np.float32)


def test_block_matches_numpy():
    A, B, C, D = _r(2, 2), _r(2, 3), _r(1, 2), _r(1, 3)
    np.testing.assert_array_equal(lf.jit(lambda a, b, c, d: lnp.block([[a, b], [c, d]]))(A, B, C, D),
                                  np.block([[A, B], [C, D]]))
    v = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(lnp.block([v, 7, v[:2]]), np.block([v, 7, v[:2]]))
    np.testing.assert_array_equal(lnp.block([[[v]], [[v]]]), np.block([[[v]], [[v]]]))  # 3-D from 1-D pieces
    np.testing.assert_array_equal(lnp.block(A), np.block(A))
    with pytest.raises(lf.ShapeError, match=r"block: the lists in arrays are nested to different depths"):
        lnp.block([[A], B])
    with pytest.raises(lf.ShapeError, match=r"block: arrays\[0\] is an empty list"):
        lnp.block([[], [A]])


def test_dsplit_ix_and_index_grids():
    x = _r(2, 3, 4)
    for got, want in zip(lnp.dsplit(x, 2), np.dsplit(x, 2)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(lnp.dsplit(x, [1, 3]), np.dsplit(x, [1, 3])):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(lf.ShapeError, match="dsplit: needs an array of at least 3 dims"):
        lnp.dsplit(x[0], 2)
    rows, cols = np.array([0, 1], np.int32), np.array([2, 0, 1], np.int32)
    got = lf.jit(lambda a, r, c: a[lnp.ix_(r, c)])(x[0], rows, cols)
    np.testing.assert_array_equal(got, x[0][np.ix_(rows, cols)])
    for g, w in zip(lnp.ix_([True, False, True], [1, 2]), np.ix_([True, False, True], [1, 2])):
        np.testing.assert_array_equal(g, w)
    for f, nf in [(lnp.tril_indices_from, np.tril_indices_from), (lnp.triu_indices_from, np.triu_indices_from)]:
        for k in (-1, 0, 2):
            for g, w in zip(f(np.ones((3, 5)), k), nf(np.ones((3, 5)), k)):
                np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(lnp.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
                                  np.fromfunction(lambda i, j: i * 10 + j, (3, 4)))
    np.testing.assert_array_equal(lnp.fromfunction(lambda i: i % 2, (5,), dtype=int),
                                  np.fromfunction(lambda i: i % 2, (5,), dtype=int))


def test_choose_in_every_mode():
    ch = [np.arange(5, dtype=np.int32) * k for k in (1, 10, 100)]
    a = np.array([0, 2, 1, 2, 0], np.int32)
    np.testing.assert_array_equal(lnp.choose(a, ch), np.choose(a, ch))
    wild = np.array([3, -1, 4, 5, -7], np.int32)
    for mode in ("wrap", "clip"):
        got = lf.jit(lambda i: lnp.choose(i, ch, mode=mode))(wild)
        np.testing.assert_array_equal(got, np.choose(wild, ch, mode=mode), err_msg=mode)
    # broadcasting of the index against the choices, and float choices
    fl = [_r(3, 1), _r(1, 4)]
    idx = np.array([[0, 1, 1, 0]], np.int32)
    np.testing.assert_array_equal(lnp.choose(idx, fl), np.choose(idx, fl))
    with pytest.raises(lf.LuminalError, match="choose: an index in a is outside"):
        lnp.choose(wild, ch)
    with pytest.raises(lf.LuminalError, match="choose: mode='raise' checks the indices, and a is traced"):
        lf.jit(lambda i: lnp.choose(i, ch))(a)


def test_apply_over_axes_matches_numpy():
    x = _r(2, 3, 4)
    for axes in (0, [0, 2], (1, 2)):
        np.testing.assert_allclose(lnp.apply_over_axes(lnp.sum, x, axes), np.apply_over_axes(np.sum, x, axes),
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lnp.apply_over_axes(lambda a, ax: lnp.max(a, axis=ax, keepdims=True), x, [1]),
                               np.apply_over_axes(np.max, x, [1]))


@pytest.mark.parametrize("args", [(1, 1000, 4), (1, 256, 9, False), (-1, -16, 5), (0.5, 2.0, 7), (3, 3, 4),
                                  (10.0, 1.0, 6)])
def test_geomspace_matches_numpy(args):
    got = lf.jit(lambda: lnp.geomspace(*args))()
    want = np.geomspace(*args).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_geomspace_refuses_zero_and_mixed_signs():
    with pytest.raises(lf.ArgumentError, match="geomspace"):
        lnp.geomspace(0, 10, 3)
    with pytest.raises(lf.ArgumentError, match="geomspace"):
        lnp.geomspace(-1, 10, 3)


def test_rounding_keeps_infinities_and_big_values():
    v = np.array([np.inf, -np.inf, np.nan, 1e30, -2.5, 2.5, 3e9, 8388607.5, -8388608.5, 0.49999997, -0.5],
                 np.float32)
    for name in ("trunc", "floor", "ceil", "rint", "fix", "around"):
        np.testing.assert_array_equal(lf.jit(getattr(lnp, name))(v), getattr(np, name)(v), err_msg=name)


def test_modf_matches_numpy():
    v = np.array([-3.5, 0.0, 2.25, np.inf, -np.inf, np.nan, -3.0, 1e-40, 123456.78, -1e30], np.float32)
    frac, whole = lf.jit(lnp.modf)(v)
    wf, ww = np.modf(v)
    np.testing.assert_array_equal(frac, wf)
    np.testing.assert_array_equal(whole, ww)
    f_int, w_int = lnp.modf(np.int32([3, -4]))
    assert f_int.dtype == np.float32
    np.testing.assert_array_equal(w_int, [3.0, -4.0])


def test_bitwise_count_matches_numpy():
    ints = np.concatenate([np.array([0, 1, -1, 7, -8, 2**31 - 1, -2**31, 255], np.int32),
                           R.integers(-2**31, 2**31, 200, dtype=np.int64).astype(np.int32)])
    got = lf.jit(lnp.bitwise_count)(ints)
    np.testing.assert_array_equal(got, np.bitwise_count(ints).astype(np.int32))
    np.testing.assert_array_equal(lnp.bitwise_count(np.array([True, False])), [1, 0])
    with pytest.raises(lf.DTypeError, match="bitwise_count: not supported for float32"):
        lnp.bitwise_count(np.float32([1.0]))


@pytest.mark.parametrize("period,discont", [(2 * np.pi, None), (2 * np.pi, 4.0), (360.0, None), (4.0, 1.0)])
def test_unwrap_matches_numpy(period, discont):
    steps = R.uniform(-0.45, 0.45, (3, 40)) * period
    ph = np.cumsum(steps, axis=1)
    wrapped = ((ph + period / 2) % period - period / 2).astype(np.float32)
    got = lf.jit(lambda p: lnp.unwrap(p, discont=discont, period=period))(wrapped)
    want = np.unwrap(wrapped.astype(np.float64), discont=discont, period=period)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * period)
    np.testing.assert_allclose(lnp.unwrap(wrapped.T, axis=0), np.unwrap(wrapped.T.astype(np.float64), axis=0),
                               rtol=1e-5, atol=1e-3)

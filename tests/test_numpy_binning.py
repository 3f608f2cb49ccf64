"""digitize, bincount, histogram, interp, isin, the flat-index helpers, select, piecewise,
lexsort, fill_diagonal and put against NumPy, inside lf.jit and eagerly.

Where a traced value cannot raise (out-of-range indices, negative counts), the NumPy reference
applies the documented JAX behaviour (clip, drop) explicitly.
"""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import DTypeError, IndexError_, ShapeError, TracingError

from lnp_exact import assert_same, make  # noqa: E402

R = np.random.default_rng(7)
F32, I32 = np.float32, np.int32


def both(f, *args, backend=None):
    """f's results inside lf.jit (on ``backend``, else the default) and eagerly."""
    return lf.jit(f, backend=backend)(*args), f(*args)


def same_both(f, want, *args, backend=None):
    for got in both(f, *args, backend=backend):
        assert_same(got, want)


def close_both(f, want, *args, rtol=1e-6, atol=1e-6):
    for got in both(f, *args):
        got = [got] if not isinstance(got, (tuple, list)) else got
        ws = [want] if not isinstance(want, (tuple, list)) else want
        for g, w in zip(got, ws):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape and g.dtype == np.float32, (g.shape, w.shape, g.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


# ---- digitize -------------------------------------------------------------------------------------
XD = np.array([[-1.0, 0.0, 0.5, 1.0], [2.0, 2.5, 3.0, 9.0], [np.nan, 1.5, 2.0, -0.0]], F32)


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("decreasing", [False, True])
def test_digitize_on_edges_nan_and_both_directions(right, decreasing):
    bins = np.array([0.0, 1.0, 2.0, 2.0, 3.0], F32)
    if decreasing:
        bins = bins[::-1].copy()
    want = np.digitize(XD, bins, right=right)
    same_both(lambda x, b: lnp.digitize(x, b, right=right), want, XD, bins)
    # bins captured as a constant: the direction is checked at trace time
    assert_same(lf.jit(lambda x: lnp.digitize(x, bins, right=right))(XD), want)


def test_digitize_int_and_bool_inputs_and_empty_bins():
    xi = make((5, 3), I32)
    bins = np.array([-5, 0, 0, 4], I32)
    same_both(lambda x, b: lnp.digitize(x, b), np.digitize(xi, bins), xi, bins)
    same_both(lambda x: lnp.digitize(x, np.array([0.5, 1.5], F32), right=True),
              np.digitize(xi, np.array([0.5, 1.5], F32), right=True), xi)
    xb = np.array([True, False, True])
    same_both(lambda x: lnp.digitize(x, np.array([0, 1], I32)), np.digitize(xb, np.array([0, 1])), xb)
    empty = np.zeros(0, F32)
    same_both(lambda x: lnp.digitize(x, empty), np.digitize(XD, empty), XD)


def test_digitize_errors():
    with pytest.raises(ShapeError, match="digitize: bins must be monotonically"):
        lnp.digitize(XD, np.array([0.0, 2.0, 1.0], F32))
    with pytest.raises(ShapeError, match=r"digitize: bins must be 1-D, got shape \(2, 2\)"):
        lf.jit(lambda x, b: lnp.digitize(x, b))(XD, np.ones((2, 2), F32))


# ---- bincount -------------------------------------------------------------------------------------
XB = np.array([0, 1, 1, 5, 3, 3, 3, 0], I32)


def test_bincount_concrete_x_sizes_from_the_data():
    assert_same(lnp.bincount(XB), np.bincount(XB))
    assert_same(lnp.bincount(XB, minlength=9), np.bincount(XB, minlength=9))
    w = R.standard_normal(XB.shape).astype(F32)
    got = lnp.bincount(XB, weights=w)
    np.testing.assert_allclose(np.asarray(got), np.bincount(XB, weights=w), rtol=1e-6)
    assert got.dtype == lnp.float32
    wi = np.arange(8, dtype=I32)
    assert_same(lnp.bincount(XB, wi), np.bincount(XB, wi).astype(F32))  # NumPy sums in float64
    assert_same(lnp.bincount(np.array([True, False, True])), np.bincount(np.array([True, False, True])))
    assert_same(lnp.bincount(np.zeros(0, I32)), np.bincount(np.zeros(0, I32)))
    assert_same(lnp.bincount(np.zeros(0, I32), minlength=3), np.bincount(np.zeros(0, I32), minlength=3))
    # a captured (concrete) x inside jit needs no length either
    assert_same(lf.jit(lambda: lnp.bincount(XB))(), np.bincount(XB))


def test_bincount_traced_with_length_drops_large_and_clips_negative():
    x = np.array([0, 2, 2, 7, -3, 4, 1], I32)
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], F32)
    want = np.bincount(np.clip(x, 0, None)[np.clip(x, 0, None) < 5], minlength=5)
    assert_same(lf.jit(lambda x: lnp.bincount(x, length=5))(x), want)
    keep = np.clip(x, 0, None) < 5
    want_w = np.bincount(np.clip(x, 0, None)[keep], weights=w[keep], minlength=5).astype(F32)
    assert_same(lf.jit(lambda x, w: lnp.bincount(x, w, length=5))(x, w), want_w)
    # length wins over minlength (as JAX), and a concrete x with length= is cut the same way
    assert_same(lf.jit(lambda x: lnp.bincount(x, minlength=9, length=3))(np.abs(x)),
                np.bincount(np.abs(x)[np.abs(x) < 3], minlength=3))
    assert_same(lnp.bincount(XB, length=2), np.bincount(XB)[:2])


def test_bincount_errors():
    with pytest.raises(ShapeError, match="bincount: .*traced x.*pass a static length="):
        lf.jit(lambda x: lnp.bincount(x))(XB)
    with pytest.raises(IndexError_, match="bincount: x must be non-negative, got the value -1"):
        lnp.bincount(np.array([0, -1], I32))
    with pytest.raises(DTypeError, match="bincount: x must hold non-negative integers, got float32"):
        lnp.bincount(np.array([1.0], F32))
    with pytest.raises(ShapeError, match=r"bincount: x must be 1-D, got shape \(2, 2\)"):
        lnp.bincount(np.zeros((2, 2), I32))
    with pytest.raises(ShapeError, match=r"bincount: weights of shape \(3,\) must have the shape of x"):
        lnp.bincount(XB, weights=np.ones(3, F32))
    with pytest.raises(ShapeError, match="bincount: minlength must be non-negative"):
        lnp.bincount(XB, minlength=-1)


# ---- histogram ------------------------------------------------------------------------------------
def _hist_check(a, **kw):
    want_h, want_e = np.histogram(a, **kw)
    for got_h, got_e in both(lambda a: lnp.histogram(a, **kw), a):
        wh = want_h.astype(F32) if want_h.dtype == np.float64 else want_h
        if np.issubdtype(wh.dtype, np.floating):
            assert np.asarray(got_h).dtype == wh.dtype
            np.testing.assert_allclose(np.asarray(got_h), wh, rtol=1e-5, atol=1e-7)
        else:
            assert_same(got_h, wh)
        ge = np.asarray(got_e)
        assert ge.shape == want_e.shape and ge.dtype == (F32 if want_e.dtype == np.float64 else want_e.dtype)
        np.testing.assert_allclose(ge, want_e, rtol=1e-6, atol=1e-6)


AH = R.standard_normal((6, 9)).astype(F32)
AH_EDGES = np.array([0, 1, 2, 2, 3, 4, 8, 8, 7.5, 5, -1, 0.5], F32)  # values on the edges of range (0, 8)


@pytest.mark.parametrize("kw", [{}, {"bins": 7}, {"bins": 4, "range": (-1.0, 1.0)},
                                {"density": True}, {"bins": 3, "range": (0, 3), "density": True}])
def test_histogram_uniform_bins(kw):
    _hist_check(AH, **kw)


def test_histogram_values_on_edges_and_outside_range():
    _hist_check(AH_EDGES, bins=4, range=(0, 8))
    _hist_check(AH_EDGES, bins=np.array([0, 2, 4, 6, 8], F32))
    _hist_check(AH_EDGES, bins=np.array([0, 1, 1, 3, 8], I32))  # int edges, a repeated one
    _hist_check(np.array([1.0, 2.0, np.nan, 3.0], F32), bins=2, range=(1, 3))  # NaN not counted


@pytest.mark.filterwarnings("ignore:Converting input from bool")
def test_histogram_int_bool_constant_empty_and_weights():
    ai = make((20,), I32)
    ai[:2] = -10, 10  # a step of 2: edges exact in float32, where NumPy's are float64 (with a
    _hist_check(ai)   # step of 1.8, a value on an edge may round into either bin: docs/api.md)
    _hist_check(ai, bins=6, range=(-4, 8))
    _hist_check(np.array([True, False, True, True]), bins=3)
    _hist_check(np.full(5, 2.5, F32), bins=4)  # one value: the range is value -+ 0.5
    _hist_check(np.zeros(0, F32), bins=3)
    w = R.random(AH.shape).astype(F32)
    for weights in (w, (w * 10).astype(I32)):
        want = np.histogram(AH, bins=5, weights=weights)
        for got in both(lambda a, w: lnp.histogram(a, bins=5, weights=w), AH, weights):
            assert np.asarray(got[0]).dtype == weights.dtype
            np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-5)
    want = np.histogram(AH, bins=3, weights=w, density=True)[0]
    got = lnp.histogram(AH, bins=3, weights=w, density=True)[0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


def test_histogram_traced_edges():
    edges = np.array([-2.0, -0.5, 0.0, 0.25, 3.0], F32)
    want = np.histogram(AH, bins=edges)
    got = lf.jit(lambda a, e: lnp.histogram(a, bins=e))(AH, edges)
    assert_same(got, want)


def test_histogram_nan_with_range_none():
    a = np.array([1.0, np.nan, 3.0], F32)
    with pytest.raises(ShapeError, match=r"histogram: the range found from a, \[nan, nan\], is not finite"):
        lnp.histogram(a)
    h, e = lf.jit(lambda a: lnp.histogram(a, bins=2))(a)  # traced: cannot raise (documented)
    assert_same(h, np.zeros(2, I32))
    assert np.isnan(np.asarray(e)).all() and np.asarray(e).shape == (3,)


def test_dynamic_length():
    f = lf.jit(lambda x, b: (lnp.digitize(x, b), lnp.isin(x, b), lnp.histogram(x, bins=4),
                             lnp.interp(x, b, b * 2), lnp.bincount(lnp.astype(x, lnp.int32), length=6)),
               dynamic_axes={"x": {0: "n"}})
    b = np.array([1.0, 2.0, 4.0], F32)
    for n in (1, 4, 9):
        x = R.integers(0, 9, n).astype(F32)
        x[0] = 8.0
        dig, hit, (h, e), y, cnt = f(x, b)
        assert_same(dig, np.digitize(x, b))
        assert_same(hit, np.isin(x, b))
        assert_same((h, e), np.histogram(x, bins=4))
        np.testing.assert_allclose(np.asarray(y), np.interp(x, b, b * 2), rtol=1e-6)
        xi = x.astype(I32)
        assert_same(cnt, np.bincount(xi[xi < 6], minlength=6))
    assert f.trace_count == 1


def test_histogram_errors():
    with pytest.raises(ShapeError, match="histogram: bins='auto' chooses the number of bins from the data"):
        lnp.histogram(AH, bins="auto")
    with pytest.raises(ShapeError, match="histogram: bins must be positive"):
        lnp.histogram(AH, bins=0)
    with pytest.raises(ShapeError, match="histogram: bins must increase monotonically"):
        lnp.histogram(AH, bins=np.array([0.0, 2.0, 1.0], F32))
    with pytest.raises(ShapeError, match="histogram: max must be larger than min"):
        lnp.histogram(AH, range=(1, 0))
    with pytest.raises(ShapeError, match="histogram: range .* is not finite"):
        lnp.histogram(AH, range=(0, np.inf))
    with pytest.raises(ShapeError, match=r"histogram: weights of shape \(3,\) must have the shape of a"):
        lnp.histogram(AH, weights=np.ones(3, F32))


# ---- interp ---------------------------------------------------------------------------------------
XP = np.array([0.0, 1.0, 1.0, 2.5, 4.0], F32)
FP = np.array([1.0, -2.0, 3.0, 0.5, 10.0], F32)
XI = np.array([[-1.0, 0.0, 0.3, 1.0], [1.7, 2.5, 4.0, 7.0], [np.nan, np.inf, -np.inf, 3.9]], F32)


def test_interp_points_edges_duplicates_and_nan():
    want = np.interp(XI, XP, FP)
    close_both(lambda x, xp, fp: lnp.interp(x, xp, fp), want, XI, XP, FP)
    close_both(lambda x: lnp.interp(x, XP, FP, left=-7.0, right=np.float32(8.0)),
               np.interp(XI, XP, FP, left=-7.0, right=8.0), XI)
    # int inputs, a 0-d x and one sample point (NaN there gives fp[0], as NumPy)
    close_both(lambda x: lnp.interp(x, np.array([0, 2], I32), np.array([0, 5], I32)),
               np.interp(np.arange(-1, 4), [0, 2], [0, 5]), np.arange(-1, 4, dtype=I32))
    close_both(lambda: lnp.interp(1.25, XP, FP), np.interp(1.25, XP, FP))
    close_both(lambda x: lnp.interp(x, [1.0], [2.0]), np.interp(XI, [1.0], [2.0]), XI)


def test_interp_infinite_fp_and_period():
    close_both(lambda x: lnp.interp(x, [0.0, 1.0], [np.inf, np.inf]),
               np.interp([0.5, 1.0], [0.0, 1.0], [np.inf, np.inf]), np.array([0.5, 1.0], F32))
    # inf - inf from the left end: NumPy retries from the right one
    close_both(lambda x: lnp.interp(x, [0.0, 1.0], [np.inf, 0.0]),
               np.interp([0.5, 0.25], [0.0, 1.0], [np.inf, 0.0]), np.array([0.5, 0.25], F32))
    x = np.array([-180.0, -1.0, 0.0, 5.5, 359.0, 370.0, 725.0], F32)
    xp, fp = np.array([350.0, 10.0, 0.0, 180.0], F32), np.array([1.0, 2.0, 3.0, -4.0], F32)
    close_both(lambda x, xp, fp: lnp.interp(x, xp, fp, period=360), np.interp(x, xp, fp, period=360),
               x, xp, fp, rtol=1e-5)


def test_interp_errors():
    with pytest.raises(ShapeError, match="interp: xp .* is empty"):
        lnp.interp(XI, np.zeros(0, F32), np.zeros(0, F32))
    with pytest.raises(ShapeError, match=r"interp: xp and fp must have the same length, got shapes \(5,\) and"):
        lnp.interp(XI, XP, FP[:2])
    with pytest.raises(ShapeError, match="interp: period must be a non-zero value"):
        lnp.interp(XI, XP, FP, period=0)
    with pytest.raises(ShapeError, match="interp: xp and fp must be 1-D"):
        lnp.interp(XI, XI, XI)


# ---- isin -----------------------------------------------------------------------------------------
def test_isin():
    e = make((4, 5), I32)
    t = np.array([[0, 3], [-9, 3]], I32)
    same_both(lambda e, t: lnp.isin(e, t), np.isin(e, t), e, t)
    same_both(lambda e, t: lnp.isin(e, t, invert=True), np.isin(e, t, invert=True), e, t)
    ef = np.array([1.5, np.nan, 2.0, -0.0], F32)
    same_both(lambda e: lnp.isin(e, [0.0, np.nan, 2]), np.isin(ef, [0.0, np.nan, 2]), ef)
    eb = np.array([True, False])
    same_both(lambda e: lnp.isin(e, np.array([True])), np.isin(eb, [True]), eb)
    same_both(lambda e: lnp.isin(e, np.zeros(0, I32), invert=True), np.isin(e, [], invert=True), e)
    assert_same(lnp.isin(3, [1, 3]), np.isin(3, [1, 3]))


# ---- unravel_index / ravel_multi_index -------------------------------------------------------------
@pytest.mark.parametrize("order", ["C", "F"])
def test_unravel_index(order):
    idx = np.array([[0, 5, 23], [7, 12, 1]], I32)
    want = np.unravel_index(idx, (2, 3, 4), order=order)
    same_both(lambda i: lnp.unravel_index(i, (2, 3, 4), order=order), want, idx)
    assert_same(lnp.unravel_index(7, (4, 2), order=order), np.unravel_index(7, (4, 2), order=order))
    assert_same(lnp.unravel_index(np.zeros(0, I32), (3, 3)), np.unravel_index(np.zeros(0, I32), (3, 3)))


def test_unravel_index_traced_out_of_range_clips_as_jax():
    idx = np.array([-1, -6, -100, 6, 50, 2], I32)
    clipped = np.clip(idx, -6, 5)
    want = np.unravel_index(np.where(clipped < 0, clipped + 6, clipped), (2, 3))
    assert_same(lf.jit(lambda i: lnp.unravel_index(i, (2, 3)))(idx), want)
    with pytest.raises(IndexError_, match=r"unravel_index: index -1 is out of bounds for shape \(2, 3\)"):
        lnp.unravel_index(np.array([0, -1]), (2, 3))
    with pytest.raises(DTypeError, match="unravel_index: indices must hold integers, got float32"):
        lnp.unravel_index(np.array([1.0], F32), (2, 3))
    with pytest.raises(ShapeError, match="unravel_index: order must be 'C' or 'F'"):
        lnp.unravel_index(1, (2, 3), order="K")


@pytest.mark.parametrize("mode,order", [("raise", "C"), ("raise", "F"), ("wrap", "F"), ("clip", "C"),
                                        (("clip", "wrap"), "F")])
def test_ravel_multi_index_modes(mode, order):
    ok = (np.array([[0], [1], [3]], I32), np.array([4, 0, 2, 1], I32))  # broadcast to (3, 4)
    want = np.ravel_multi_index(ok, (4, 5), mode=mode, order=order)
    same_both(lambda i, j: lnp.ravel_multi_index((i, j), (4, 5), mode=mode, order=order), want, *ok)
    if mode != "raise":
        bad = (np.array([-1, 4, 9, 2], I32), np.array([5, -7, 0, 12], I32))
        want = np.ravel_multi_index(bad, (4, 5), mode=mode, order=order)
        same_both(lambda i, j: lnp.ravel_multi_index((i, j), (4, 5), mode=mode, order=order), want, *bad)


def test_ravel_multi_index_traced_raise_clips_and_errors():
    bad = (np.array([-1, 4, 2], I32), np.array([5, -7, 0], I32))
    got = lf.jit(lambda i, j: lnp.ravel_multi_index((i, j), (4, 5)))(*bad)
    assert_same(got, np.ravel_multi_index(bad, (4, 5), mode="clip"))
    assert_same(lnp.ravel_multi_index((1, 2), (2, 3)), np.ravel_multi_index((1, 2), (2, 3)))
    with pytest.raises(IndexError_, match=r"ravel_multi_index: invalid entry .*\[0\] holds values outside \[0, 4\)"):
        lnp.ravel_multi_index(bad, (4, 5))
    with pytest.raises(IndexError_, match="ravel_multi_index: mode must be"):
        lnp.ravel_multi_index(bad, (4, 5), mode="fill")
    with pytest.raises(ShapeError, match="ravel_multi_index: multi_index has 2 index arrays for the 3 dims"):
        lnp.ravel_multi_index(bad, (4, 5, 6))
    with pytest.raises(DTypeError, match=r"ravel_multi_index: multi_index\[0\] must hold integers, got bool"):
        lnp.ravel_multi_index((np.array([True]), np.array([1])), (4, 5))


def test_diag_indices_and_from():
    assert_same(lf.jit(lambda: lnp.diag_indices(4))(), np.diag_indices(4))
    assert_same(lnp.diag_indices(3, ndim=3), np.diag_indices(3, ndim=3))
    a = np.zeros((3, 3, 3), F32)
    same_both(lambda a: lnp.diag_indices_from(a), np.diag_indices_from(a), a)
    x = make((4, 4))
    assert_same(lf.jit(lambda x: x[lnp.diag_indices_from(x)])(x), x[np.diag_indices_from(x)])
    with pytest.raises(ShapeError, match=r"diag_indices_from: all dimensions must have the same length.*\(3, 4\)"):
        lnp.diag_indices_from(np.zeros((3, 4)))
    with pytest.raises(ShapeError, match="diag_indices_from: the array must be at least 2-D"):
        lnp.diag_indices_from(np.zeros(3))


# ---- select / piecewise -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, I32, np.bool_])
def test_select(dtype):
    x = make((3, 5), F32)
    a, b = make((3, 5), dtype, seed=1), make((5,), dtype, seed=2)
    conds = [x > 0.5, x > 0.0]  # overlapping: the first wins
    want = np.select(conds, [a, b])
    same_both(lambda x, a, b: lnp.select([x > 0.5, x > 0.0], [a, b]), want, x, a, b)
    want = np.select(conds, [a, b], default=True if dtype == np.bool_ else 7)
    got = lf.jit(lambda x, a, b: lnp.select([x > 0.5, x > 0.0], [a, b],
                                            default=True if dtype == np.bool_ else 7))(x, a, b)
    assert_same(got, want)


def test_select_broadcast_scalars_and_errors():
    x = np.arange(-3, 4, dtype=I32)
    same_both(lambda x: lnp.select([x < 0, x == 0], [-1, 100.5], default=x),
              np.select([x < 0, x == 0], [-1, 100.5], default=x).astype(F32), x)
    with pytest.raises(ShapeError, match="select: condlist has 2 entries but choicelist 1"):
        lnp.select([x < 0, x > 0], [x])
    with pytest.raises(ShapeError, match="select: condlist is empty"):
        lnp.select([], [])
    with pytest.raises(DTypeError, match=r"select: condlist\[0\] must be boolean, got int32"):
        lnp.select([x], [x])


def test_piecewise():
    x = np.linspace(-2.5, 2.5, 11).astype(F32)
    funcs = [lambda v: -v, 0.5, lambda v, k=1.0: v * v * k]
    want = np.piecewise(x, [x < 0, x == 0], funcs)  # the third function is the default
    close_both(lambda x: lnp.piecewise(x, [x < 0, x == 0], funcs), want, x)
    # overlapping conditions: the later wins; extra args and keywords go to every function
    want = np.piecewise(x, [x < 1, x > -1], [lambda v, s: v + s, lambda v, s: v * s], 3.0)
    close_both(lambda x: lnp.piecewise(x, [x < 1, x > -1], [lambda v, s: v + s, lambda v, s: v * s], 3.0),
               want, x)
    # int x: results take x's dtype; NaN/inf of a function off its condition do not leak
    xi = np.arange(-3, 4, dtype=I32)
    same_both(lambda x: lnp.piecewise(x, x > 0, [lambda v: v * 1.7, lambda v: v - 1]),
              np.piecewise(xi, xi > 0, [lambda v: v * 1.7, lambda v: v - 1]), xi)
    close_both(lambda x: lnp.piecewise(x, [x > 0], [lnp.log, 0.0]),
               np.piecewise(x, [x > 0], [np.log, 0.0]), x)
    x2 = make((3, 4))
    close_both(lambda x: lnp.piecewise(x, [x < 0], [lambda v: v * 2]),
               np.piecewise(x2, [x2 < 0], [lambda v: v * 2]), x2)
    with pytest.raises(ShapeError, match="piecewise: with 2 condition.s., either 2 or 3 functions are expected"):
        lnp.piecewise(x, [x < 0, x > 0], [1.0])


# ---- lexsort ------------------------------------------------------------------------------------------
def test_lexsort_ties_nan_and_bool():
    last = np.array([1, 0, 1, 0, 1, 1, 0, 1], I32)
    middle = np.array([2.0, np.nan, 2.0, -1.0, np.nan, 0.5, -1.0, 2.0], F32)
    first = np.array([True, False, False, True, True, False, True, False])  # ties left: stable
    keys = (first, middle, last)
    same_both(lambda a, b, c: lnp.lexsort((a, b, c)), np.lexsort(keys), *keys)
    same_both(lambda b: lnp.lexsort([b]), np.lexsort([middle]), middle)
    stacked = np.stack([middle, last.astype(F32)])
    same_both(lambda k: lnp.lexsort(k), np.lexsort(stacked), stacked)


@pytest.mark.parametrize("axis", [0, -1])
def test_lexsort_axis(axis):
    a, b = make((4, 6), I32, seed=3) % 3, make((4, 6), I32, seed=4) % 2
    same_both(lambda a, b: lnp.lexsort((a, b), axis=axis), np.lexsort((a, b), axis=axis), a, b)


def test_lexsort_errors():
    with pytest.raises(ShapeError, match=r"lexsort: all keys must have the same shape, got \[\(3,\), \(4,\)\]"):
        lnp.lexsort((np.arange(3), np.arange(4)))
    with pytest.raises(ShapeError, match="lexsort: needs at least one key"):
        lf.jit(lambda: lnp.lexsort([]))()


# ---- fill_diagonal / put ---------------------------------------------------------------------------
def np_fill_diagonal(a, val, wrap=False):
    a = a.copy()
    np.fill_diagonal(a, val, wrap=wrap)
    return a


@pytest.mark.parametrize("shape,wrap", [((4, 4), False), ((7, 3), False), ((7, 3), True),
                                        ((3, 5), True), ((3, 3, 3), False)])
def test_fill_diagonal(shape, wrap):
    a = make(shape, I32)
    for val in (np.array([1, 2], I32), 2.7):  # cycled; a float into an int array truncates
        same_both(lambda a: lnp.fill_diagonal(a, val, wrap=wrap), np_fill_diagonal(a, val, wrap), a)
    if shape == (7, 3):
        af, v = make(shape), np.array([-1.5, 0.25, 9.0], F32)
        same_both(lambda a, v: lnp.fill_diagonal(a, v, wrap=wrap), np_fill_diagonal(af, v, wrap), af, v)


def test_fill_diagonal_errors():
    with pytest.raises(TracingError, match="fill_diagonal: inplace=True is not supported: arrays are immut"):
        lnp.fill_diagonal(np.zeros((2, 2)), 1, inplace=True)
    with pytest.raises(ShapeError, match="fill_diagonal: the array must be at least 2-D"):
        lnp.fill_diagonal(np.zeros(3), 1)
    with pytest.raises(ShapeError, match=r"fill_diagonal: all dimensions must have the same length.*\(2, 2, 3\)"):
        lnp.fill_diagonal(np.zeros((2, 2, 3)), 1)


def np_put(a, ind, v, mode="raise"):
    a = a.copy()
    np.put(a, ind, v, mode=mode)
    return a


@pytest.mark.parametrize("mode", [None, "wrap", "clip"])
def test_put(mode):
    a = make((3, 4), F32)
    ind = np.array([[0, -1], [5, 5]], I32) if mode is None else np.array([[0, -13], [5, 30]], I32)
    v = np.array([1.5, 2.5, 3.5], F32)  # cycled; the last write to 5 wins
    want = np_put(a, ind, v, mode=mode or "raise")
    # repeated indices: the last write wins on the NumPy backend; a GPU scatter keeps any one
    # of them (as JAX's), so the values written twice agree there
    same_both(lambda a, v: lnp.put(a, ind, v, mode=mode), want, a, v, backend="numpy")
    distinct = np.array([[0, -1], [5, 6]], I32) if mode is None else np.array([[1, -13], [5, 31]], I32)
    same_both(lambda a, v: lnp.put(a, distinct, v, mode=mode), np_put(a, distinct, v, mode=mode or "raise"), a, v)
    same_both(lambda a, i: lnp.put(a, i, 9, mode=mode), np_put(a, ind, 9, mode=mode or "raise"), a, ind)
    ai = make((6,), I32)
    same_both(lambda a: lnp.put(a, [1, 2], 7.9, mode=mode), np_put(ai, [1, 2], 7.9, mode=mode or "raise"), ai)
    same_both(lambda a: lnp.put(a, [], [1.0], mode=mode), a, a)


def test_put_traced_out_of_range_is_dropped_and_errors():
    a = np.zeros(6, I32)
    ind = np.array([-1, 1, 10, -7, 2], I32)
    want = np_put(a, [-1, 1, 2], [7, 8, 11])
    assert_same(lf.jit(lambda a, i: lnp.put(a, i, np.array([7, 8, 9, 10, 11], I32)))(a, ind), want)
    with pytest.raises(IndexError_, match="put: index 6 is out of bounds for an array of size 6"):
        lnp.put(a, [6], 1)
    with pytest.raises(TracingError, match="put: inplace=True is not supported"):
        lnp.put(a, [0], 1, inplace=True)
    with pytest.raises(IndexError_, match="put: mode must be 'raise', 'wrap' or 'clip'"):
        lnp.put(a, [0], 1, mode="fill")
    with pytest.raises(DTypeError, match="put: ind must hold integers, got float32"):
        lnp.put(a, np.array([0.0], F32), 1)

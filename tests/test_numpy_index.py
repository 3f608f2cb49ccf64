"""__getitem__, .at[...], take, take_along_axis and put_along_axis against NumPy.

Cases are written once as ``f(xp, *arrays)`` and run with luminal_fn.numpy (jitted) and NumPy.
Traced out-of-range indices follow JAX (gathers clamp, scatters drop); NumPy references for
those cases clip or filter the indices explicitly.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import IndexError_, ShapeError

from lnp_exact import DTYPES, assert_same, check, make  # noqa: E402,F401


def np_at(x, idx, mode, v):
    out = x.copy()
    if mode == "set":
        out[idx] = v
    else:
        {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}[mode].at(out, idx, v)
    return out


X4 = make((3, 4, 5, 6))

# ---- basic indexing ---------------------------------------------------------------------------
BASIC = [
    "x[1]", "x[-1]", "x[-3, 2]", "x[1:, None, ::-2]", "x[::-1, 3:0:-2, -1]", "x[-2::-3, :1:-1]",
    "x[..., 2, None]", "x[None, ..., None]", "x[1, ..., -1]", "x[::2, ::3, ::4, ::5]",
    "x[5:, :]", "x[2:1]", "x[1:2:-1]", "x[-100:100, -5:2]", "x[:, ::-7]", "x[..., ::-1][0]",
    "x[:, :, :, :]", "x[...]", "x[None]", "x[0, 0, 0, 0]", "x[-1, -2, -3, -4]",
]


@pytest.mark.parametrize("expr", BASIC)
def test_basic_indexing(expr):
    check(lambda xp, x: eval(expr), X4)


@st.composite
def _basic_index(draw, shape):
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "full", "none"]))
        if kind == "none":
            items.append(None)
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            items.append(slice(draw(bound), draw(bound), step))
        else:
            items.append(slice(None))
    if draw(st.booleans()):
        k = draw(st.integers(0, len(items)))
        items = items[:k] + [Ellipsis] + items[k + draw(st.integers(0, len(items) - k)):]
    return tuple(items)


@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), st.sampled_from(DTYPES), st.data())
def test_random_basic_indices(shape, dtype, data):
    x = make(shape, dtype)
    idx = data.draw(_basic_index(shape))
    check(lambda xp, a: a[idx], x)


def test_basic_indexing_with_a_dynamic_axis():
    f = lf.jit(lambda a: (a[1:, ::2], a[::-1], a[-2::-2], a[:1:-1], a[-1], a[None, -3:]),
               dynamic_axes={"a": {0: "s"}})
    for n in (3, 6):
        x = make((n, 5))
        for g, w in zip(f(x), (x[1:, ::2], x[::-1], x[-2::-2], x[:1:-1], x[-1], x[None, -3:])):
            assert_same(g, w)
    assert f.trace_count == 1


def test_slices_of_one_dynamic_axis_combine():
    """x[1:] - x[:-1] along a dynamic axis: the two lengths were max(s - min(1, s), 0) and
    max(s - 1, 0), equal but not provably so, and the subtraction refused to broadcast."""
    f = lf.jit(lambda a: (a[1:] - a[:-1], a[2:] + a[1:-1] * a[:-2], a[3:-3], a[:-1:2], a[-2:]),
               dynamic_axes={"a": {0: "s"}})
    for n in (0, 1, 2, 3, 5, 8):
        x = make((n,))
        for g, w in zip(f(x), (x[1:] - x[:-1], x[2:] + x[1:-1] * x[:-2], x[3:-3], x[:-1:2], x[-2:])):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)  # CUDA may fuse a multiply-add
    assert f.trace_count == 1


def test_basic_indices_are_views():
    f = lf.jit(lambda a: a[1:, None, ::-2][..., 0])
    ops = [n.op for n in f.trace(X4).hlir.live_nodes()]
    assert "Gather" not in ops and "Cast" not in ops


# ---- advanced indexing ------------------------------------------------------------------------
I2 = np.array([[0, 1], [2, 0]])
ADVANCED = [
    "x[[0, 2]]", "x[[-1, 0, -3]]", "x[I2]", "x[I2, :, I2]", "x[:, I2, I2]", "x[..., I2, 1]",
    "x[1, ..., I2]", "x[:, 0, :, I2]", "x[I2, 1, I2]", "x[None, I2, None, I2]", "x[:, I2, None, I2]",
    "x[0, I2]", "x[:, [[1], [2]], [0, 1, 2]]", "x[1:3, [1, 2], ::-1, [0, 5]]", "x[[0, 2]][:, [1]]",
    "x[-1, -2, [-3], -4]", "x[:, 1, ..., [0, 1]]", "x[[0, 1], ..., [0, 1]]", "x[[2, 2, 2], ::-2]",
    "x[[]]", "x[np.array([], np.int64), 1]", "x[:, [3], :, [0]]",
    "x[..., [True, False, True, False, True, True]]", "x[np.ones((3, 4), bool), 1]",
    "x[:, np.arange(20).reshape(4, 5) % 3 == 0]", "x[np.array([True, False, True]), :, [1, 4]]",
]


@pytest.mark.parametrize("expr", ADVANCED)
def test_advanced_indexing_layout(expr):
    check(lambda xp, x: eval(expr), X4)


@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), st.sampled_from(DTYPES), st.data())
def test_random_integer_array_indices(shape, dtype, data):
    x = make(shape, dtype)
    idx = []
    k = data.draw(st.integers(1, 3))  # one length for every index array: they must broadcast
    for n in shape:
        kind = data.draw(st.sampled_from(["arr", "int", "slice"]))
        if kind == "arr":
            idx.append(np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k))))
        elif kind == "int":
            idx.append(data.draw(st.integers(-n, n - 1)))
        else:
            idx.append(slice(None, None, data.draw(st.sampled_from([1, -1, 2]))))
    idx = tuple(idx)
    check(lambda xp, a: a[idx], x)


def test_traced_index_arrays():
    x = make((5, 6))
    i = np.array([[0, -1], [4, 2]], np.int32)
    for expr in ["a[i]", "a[1:, i]", "a[i, i]", "a[i, ::-2]", "a[None, i, 3]", "a[..., i[0]]"]:
        check(lambda xp, a, i: eval(expr), x, i)
    check(lambda xp, a, i: a[i], x, np.int32(-2))  # a 0-d traced index drops the axis


def test_traced_out_of_range_indices_clamp_like_jax():
    x = make((5, 6))
    f = lf.jit(lambda a, i: (a[i], a[:, i], a[i, i]))
    i = np.array([7, 2, -20, -1], np.int32)
    got = f(x, i)
    r = np.clip(np.where(i < 0, i + 5, i), 0, 4)
    c = np.clip(np.where(i < 0, i + 6, i), 0, 5)
    assert_same(got[0], x[r])
    assert_same(got[1], x[:, c])
    assert_same(got[2], x[r, c])


def test_traced_index_into_a_dynamic_axis():
    f = lf.jit(lambda a, i: (a[i], a[[0, -1]], a[:, [1, -2]]), dynamic_axes={"a": {0: "s", 1: "t"}})
    for n, m in ((3, 4), (6, 2)):
        x = make((n, m))
        i = np.array([-1, 0, 1], np.int32)
        got = f(x, i)
        assert_same(got[0], x[i])
        assert_same(got[1], x[[0, -1]])
        assert_same(got[2], x[:, [1, -2]])


def test_indexing_errors():
    x = make((3, 4))
    with pytest.raises(IndexError_, match="index 3 is out of bounds for axis 0 with size 3"):
        lf.jit(lambda a: a[3])(x)
    with pytest.raises(IndexError_, match="index -5 is out of bounds for axis 1 with size 4"):
        lf.jit(lambda a: a[:, [0, -5]])(x)
    with pytest.raises(IndexError_, match="traced mask"):
        lf.jit(lambda a: a[a > 0])(x)
    with pytest.raises(IndexError_, match="too many indices"):
        lf.jit(lambda a: a[0, 0, 0])(x)
    with pytest.raises(IndexError_, match="single ellipsis"):
        lf.jit(lambda a: a[..., 0, ...])(x)
    with pytest.raises(IndexError_, match="integers"):
        lf.jit(lambda a: a[np.array([0.5])])(x)
    with pytest.raises(IndexError_, match="integers"):
        lf.jit(lambda a, i: a[i])(x, np.array([1.0], np.float32))
    with pytest.raises(IndexError_, match="step cannot be zero"):
        lf.jit(lambda a: a[::0])(x)
    with pytest.raises(lf.frontend.errors.TracingError, match="in-place"):
        lf.jit(lambda a: a.__setitem__(0, 1.0))(x)


# ---- .at[...] --------------------------------------------------------------------------------
AT_INDEX = [(1,), (slice(None, None, 2),), (-1, slice(1, None, -1)), (Ellipsis, 0),
            (np.array([0, 0, 2]),), (np.array([0, 2, 0]), 1), (slice(None), np.array([3, 3, 1, 3])),
            (np.array([[1, 1]]), np.array([[0], [0]])), (np.array([True, False, True]),)]


@pytest.mark.parametrize("mode", ["set", "add", "multiply", "max", "min"])
@pytest.mark.parametrize("idx", AT_INDEX, ids=str)
def test_at_updates(mode, idx):
    x = make((3, 4), np.float32)
    v = np.float32(1.5) if mode != "multiply" else np.float32(-2.0)
    got = lf.jit(lambda a: getattr(a.at[idx], mode)(v))(x)
    want = np_at(x, idx, mode, v)
    if mode == "set" or not any(isinstance(i, np.ndarray) for i in idx):
        assert_same(got, want)
    else:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_at_with_array_values_and_dtypes():
    for dtype in DTYPES:
        x = make((4, 3), dtype, 1)
        v = make((2, 3), dtype, 2)
        check(lambda xp, a, b: a.at[np.array([3, 0])].set(b) if xp is lnp else np_at(a, [3, 0], "set", b), x, v)
    x = make((4, 3), np.int32)
    got = lf.jit(lambda a: a.at[np.array([1, 1, 1]), 0].add(5))(x)
    assert_same(got, np_at(x, (np.array([1, 1, 1]), 0), "add", 5))


def test_at_get_subtract_divide():
    x = make((3, 4))
    assert_same(lf.jit(lambda a: a.at[1:, ::2].get())(x), x[1:, ::2])
    got = lf.jit(lambda a: (a.at[0].subtract(1.0), a.at[:, 1].divide(4.0)))(x)
    want0, want1 = x.copy(), x.copy()
    want0[0] -= 1.0
    want1[:, 1] /= 4.0
    np.testing.assert_allclose(np.asarray(got[0]), want0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), want1, rtol=1e-6)


def test_at_with_traced_indices_drops_out_of_range():
    x = make((4, 5))
    i = np.array([1, 7, -1, -9, 1], np.int32)
    got = lf.jit(lambda a, i: (a.at[i].add(1.0), a.at[:, i].set(0.0)))(x, i)
    ok = i[(i >= -4) & (i < 4)]
    want = x.copy()
    np.add.at(want, ok, 1.0)
    assert_same(got[0], want)
    ok = i[(i >= -5) & (i < 5)]
    want = x.copy()
    want[:, ok] = 0.0
    assert_same(got[1], want)


def test_at_traced_update_values():
    x = make((3, 4))
    f = lf.jit(lambda a: a.at[-1].set(a[0] * 2).at[:, 0].max(a[:, 1]))
    want = x.copy()
    want[-1] = x[0] * 2
    want[:, 0] = np.maximum(want[:, 0], want[:, 1])
    assert_same(f(x), want)


def test_at_shape_mismatch_raises():
    with pytest.raises(ShapeError, match="at"):
        lf.jit(lambda a: a.at[0].set(np.ones(3, np.float32)))(make((3, 4)))


# ---- take, take_along_axis, put_along_axis --------------------------------------------------------
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), st.sampled_from(DTYPES), st.data())
def test_take(shape, dtype, data):
    x = make(shape, dtype)
    nd = x.ndim
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
    n = x.size if axis is None else x.shape[axis]
    ishape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    idx = np.asarray(data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(-n, n - 1))))
    check(lambda xp, a: xp.take(a, idx, axis=axis), x)
    wide = np.asarray(data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(-3 * n, 3 * n))))
    check(lambda xp, a: xp.take(a, wide, axis=axis, mode="wrap"), x)
    check(lambda xp, a: xp.take(a, wide, axis=axis, mode="clip"), x)


def test_take_traced_modes():
    x = make((3, 5))
    i = np.array([7, -9, 2, -1], np.int32)
    f = lf.jit(lambda a, i: (lnp.take(a, i, 1, mode="wrap"), lnp.take(a, i, 1, mode="clip"),
                             lnp.take(a, i, 1, mode="fill"), a.take(i)))
    got = f(x, i)
    assert_same(got[0], np.take(x, i, 1, mode="wrap"))
    assert_same(got[1], np.take(x, i, 1, mode="clip"))
    fill = np.where(((i >= -5) & (i < 5))[None], np.take(x, np.clip(i, -5, 4), 1), np.nan).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(got[2]), fill)
    assert_same(got[3], np.take(x, np.clip(np.where(i < 0, i + 15, i), 0, 14)))


def test_take_raises_for_out_of_range_concrete_indices():
    with pytest.raises(IndexError_, match="out of bounds"):
        lf.jit(lambda a: lnp.take(a, np.array([5]), axis=0))(make((3, 2)))


@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), st.sampled_from(DTYPES), st.data())
def test_take_along_axis(shape, dtype, data):
    x = make(shape, dtype)
    nd = x.ndim
    axis = data.draw(st.integers(-nd, nd - 1))
    ishape = list(shape)
    ishape[axis] = data.draw(st.integers(1, 4))
    for k in range(nd):  # size-1 dims broadcast against the array
        if k != axis % nd and data.draw(st.booleans()):
            ishape[k] = 1
    n = shape[axis]
    idx = np.asarray(data.draw(hnp.arrays(np.int64, tuple(ishape), elements=st.integers(-n, n - 1))))
    check(lambda xp, a: xp.take_along_axis(a, idx, axis), x)
    check(lambda xp, a, i: xp.take_along_axis(a, i, axis), x, idx.astype(np.int32))


def test_take_along_axis_with_argsort_and_axis_none():
    x = make((4, 5))
    check(lambda xp, a: xp.take_along_axis(a, np.argsort(x, 1)[:, :3], 1), x)
    check(lambda xp, a: xp.take_along_axis(a, np.array([3, 0, 19]), None), x)


def test_put_along_axis():
    x = make((3, 5))
    idx = np.argsort(x, 1)[:, :2]

    def ref(a, i, v, axis):
        out = a.copy()
        np.put_along_axis(out, i, v, axis)
        return out

    assert_same(lf.jit(lambda a: lnp.put_along_axis(a, idx, 0.0, 1))(x), ref(x, idx, 0.0, 1))
    v = make((3, 2), np.float32, 3)
    assert_same(lf.jit(lambda a, i, v: lnp.put_along_axis(a, i, v, -1))(x, idx.astype(np.int32), v),
                ref(x, idx, v, -1))
    i0 = np.array([[2, 0, 2, 1, 0]])
    assert_same(lf.jit(lambda a: lnp.put_along_axis(a, i0, 9.0, 0))(x), ref(x, i0, 9.0, 0))
    got = lf.jit(lambda a: lnp.put_along_axis(a, np.array([[1, 1]] * 3), 1.0, 1, mode="add"))(x)
    want = x.copy()
    want[:, 1] += 2.0
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_compress():
    x = make((3, 4))
    check(lambda xp, a: xp.compress([True, False, True], a, axis=0), x)
    check(lambda xp, a: xp.compress(np.array([0, 1, 1, 0]), a, axis=1), x)

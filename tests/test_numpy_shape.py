"""luminal_fn.numpy shape functions against NumPy.

Each case is written once as ``f(xp, *arrays)`` and run with ``xp=luminal_fn.numpy`` inside
``lf.jit`` and with ``xp=numpy`` as the reference.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import LuminalError, ShapeError

from lnp_exact import DTYPES, assert_same, check, make  # noqa: E402,F401


shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)
dtypes = st.sampled_from(DTYPES)


# ---- reshape --------------------------------------------------------------------------------
@given(shapes, dtypes, st.data())
def test_reshape_with_minus_one(shape, dtype, data):
    x = make(shape, dtype)
    n = x.size
    d = data.draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
    check(lambda xp, a: xp.reshape(a, (d, -1)), x)
    check(lambda xp, a: a.reshape(-1, 1, d), x)


@pytest.mark.parametrize("name, view", [
    ("transposed", lambda xp, a: xp.transpose(a, (2, 0, 1))),
    ("sliced", lambda xp, a: a[:, 1:3, ::2]),
    ("negative step", lambda xp, a: a[::-1, :, ::-3]),
    ("padded", lambda xp, a: xp.pad(a, ((1, 1), (0, 3), (1, 1)))),
    ("broadcast", lambda xp, a: xp.broadcast_to(a[:, None], (4, 2, 3, 6))),
    ("swapped then sliced", lambda xp, a: xp.swapaxes(a, 0, 2)[1:5]),
], ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("target", [(-1,), (2, -1), (-1, 3, 1), (1, 2, -1, 1)])
def test_reshape_through_non_contiguous_views(name, view, target):
    x = make((4, 3, 6))
    check(lambda xp, a: view(xp, a).reshape(target), x)


def test_reshape_of_a_transposed_view_needs_no_copy():
    f = lf.jit(lambda a: a.T.reshape(3, 2, 4))
    x = make((4, 6))
    assert_same(f(x), x.T.reshape(3, 2, 4))
    ops = [n.op for n in f.trace(x).hlir.live_nodes()]
    assert "Cast" not in ops and "Gather" not in ops


def test_reshape_errors():
    x = make((2, 3))
    with pytest.raises(ShapeError, match=r"reshape.*\(2, 3\).*\(4, 2\)"):
        lf.jit(lambda a: a.reshape(4, 2))(x)
    with pytest.raises(ShapeError, match="one -1"):
        lf.jit(lambda a: a.reshape(-1, -1))(x)
    with pytest.raises(ShapeError, match="reshape"):
        lf.jit(lambda a: a.reshape(-1, 4))(x)


def test_reshape_and_ravel_with_a_dynamic_axis():
    dyn = {"a": {0: "s"}}
    f = lf.jit(lambda a: (a.T.reshape(3, -1), lnp.ravel(a[:, ::-2])), dynamic_axes=dyn)
    for n in (2, 5):
        x = make((n, 6))
        assert_same(f(x), (x.T.reshape(3, -1), np.ravel(x[:, ::-2])))
    assert f.trace_count == 1


# ---- axes -----------------------------------------------------------------------------------
@given(hnp.array_shapes(min_dims=2, max_dims=4, max_side=4), dtypes, st.data())
def test_transpose_moveaxis_swapaxes_rollaxis(shape, dtype, data):
    x = make(shape, dtype)
    nd = x.ndim
    perm = data.draw(st.permutations(range(nd)))
    ax = st.integers(-nd, nd - 1)
    a, b = data.draw(ax), data.draw(ax)
    start = data.draw(st.integers(-nd, nd))
    check(lambda xp, t: xp.transpose(t, perm), x)
    check(lambda xp, t: t.T, x)
    check(lambda xp, t: xp.moveaxis(t, a, b), x)
    check(lambda xp, t: xp.swapaxes(t, a, b), x)
    check(lambda xp, t: xp.rollaxis(t, a, start), x)


def test_moveaxis_with_several_axes():
    x = make((2, 3, 4, 5))
    check(lambda xp, t: xp.moveaxis(t, [0, -1], [-1, 1]), x)
    check(lambda xp, t: xp.permute_dims(t, (3, 1, 0, 2)), x)


@given(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3), st.data())
def test_expand_dims_and_squeeze(shape, data):
    x = make(shape)
    nd = x.ndim
    k = data.draw(st.integers(1, 2))
    axes = data.draw(st.lists(st.integers(0, nd + k - 1), min_size=k, max_size=k, unique=True))
    axes = tuple(a if data.draw(st.booleans()) else a - (nd + k) for a in axes)
    check(lambda xp, t: xp.expand_dims(t, axes), x)
    check(lambda xp, t: xp.squeeze(xp.expand_dims(t, axes)), x)
    check(lambda xp, t: xp.squeeze(xp.expand_dims(t, axes), axes), x)


def test_squeeze_of_a_non_unit_axis_raises():
    with pytest.raises(ShapeError, match="squeeze"):
        lf.jit(lambda a: lnp.squeeze(a, 0))(make((2, 1)))


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3), dtypes)
def test_broadcast_to_and_broadcast_arrays(shapes, dtype):
    (s1, s2), out = shapes
    a, b = make(s1, dtype, 1), make(s2, dtype, 2)
    check(lambda xp, t: xp.broadcast_to(t, out), a)
    check(lambda xp, t, u: xp.broadcast_arrays(t, u), a, b)


def test_broadcast_errors():
    with pytest.raises(ShapeError, match=r"broadcast"):
        lf.jit(lambda a: lnp.broadcast_to(a, (3, 3)))(make((2, 3)))
    with pytest.raises(ShapeError, match=r"\(2, 3\) and \(4,\)"):
        lf.jit(lambda a, b: a + b)(make((2, 3)), make((4,)))


def test_atleast_nd():
    for shape in [(), (3,), (2, 3)]:
        x = make(shape)
        check(lambda xp, t: xp.atleast_1d(t), x)
        check(lambda xp, t: xp.atleast_2d(t), x)
        check(lambda xp, t: xp.atleast_3d(t), x)


# ---- joining and splitting --------------------------------------------------------------------
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), dtypes, st.data())
def test_concatenate_and_stack(shape, dtype, data):
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(1, 3))
    a, b = make(shape, dtype, 1), make(tuple(other), dtype, 2)
    check(lambda xp, t, u: xp.concatenate([t, u, t], axis=axis), a, b)
    check(lambda xp, t: xp.concatenate([t, t[::-1]], axis=None), a)
    sax = data.draw(st.integers(-nd - 1, nd))
    check(lambda xp, t: xp.stack([t, t[..., ::-1], t], axis=sax), a)


def test_concatenate_promotes_dtypes():
    check(lambda xp, a, b: xp.concatenate([a, b]), make((2, 3), np.int32), make((1, 3), np.float32))
    check(lambda xp, a, b: xp.concatenate([a, b], axis=1), make((2, 1), np.bool_), make((2, 2), np.bool_))


def test_concatenate_keeps_infinities_and_nan():
    x = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    check(lambda xp, a: xp.concatenate([a, a[::-1]]), x)


@pytest.mark.parametrize("fn, shape", [(f, s) for f in ["vstack", "hstack", "dstack", "column_stack"]
                                       for s in [(3,), (2, 3), (2, 3, 2)][:3 if f != "column_stack" else 2]])
def test_vstack_hstack_dstack_column_stack(fn, shape):
    a, b = make(shape, np.float32, 1), make(shape, np.float32, 2)
    check(lambda xp, t, u: getattr(xp, fn)([t, u]), a, b)


def test_column_stack_mixes_1d_and_2d():
    check(lambda xp, a, b: xp.column_stack([a, b, a]), make((4,)), make((4, 2)))


def test_concatenate_errors():
    with pytest.raises(ShapeError, match=r"concatenate.*\(2, 3\).*\(2, 4\).*axis 0"):
        lf.jit(lambda a, b: lnp.concatenate([a, b]))(make((2, 3)), make((2, 4)))
    with pytest.raises(ShapeError, match="stack"):
        lf.jit(lambda a, b: lnp.stack([a, b]))(make((2, 3)), make((3, 2)))
    with pytest.raises(ShapeError, match="zero-dimensional"):
        lf.jit(lambda a: lnp.concatenate([a, a]))(make(()))


@pytest.mark.parametrize("sections, axis", [(2, 0), (3, 1), ([1, 3], 1), ([0, 2, -1], -1), ([5, 1], 1)])
def test_split(sections, axis):
    check(lambda xp, a: xp.split(a, sections, axis), make((4, 6)))


@pytest.mark.parametrize("sections, axis", [(4, -1), (3, 0), (7, 1), ([4, 2, -1], -1)])
def test_array_split(sections, axis):
    check(lambda xp, a: xp.array_split(a, sections, axis), make((4, 6)))


def test_hsplit_vsplit_and_uneven_split_error():
    x = make((4, 6))
    check(lambda xp, a: xp.hsplit(a, 3), x)
    check(lambda xp, a: xp.vsplit(a, [1]), x)
    with pytest.raises(ShapeError, match="equal division"):
        lf.jit(lambda a: lnp.split(a, 4, axis=1))(x)


# ---- tile, repeat ---------------------------------------------------------------------------
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=3), dtypes,
       st.lists(st.integers(1, 3), min_size=1, max_size=4))
def test_tile(shape, dtype, reps):
    check(lambda xp, a: xp.tile(a, tuple(reps)), make(shape, dtype))


@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=3), dtypes, st.data())
def test_repeat(shape, dtype, data):
    x = make(shape, dtype)
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    r = data.draw(st.integers(0, 3))
    check(lambda xp, a: xp.repeat(a, r, axis=axis), x)
    if axis is not None:
        counts = data.draw(st.lists(st.integers(0, 3), min_size=x.shape[axis], max_size=x.shape[axis]))
        check(lambda xp, a: xp.repeat(a, counts, axis=axis), x)


def test_repeat_method_and_with_a_dynamic_axis():
    f = lf.jit(lambda a: a.repeat(2, axis=0), dynamic_axes={"a": {0: "s"}})
    for n in (1, 3):
        x = make((n, 2))
        assert_same(f(x), np.repeat(x, 2, axis=0))


# ---- pad -------------------------------------------------------------------------------------
PADS = [1, (1, 2), ((0, 1), (2, 0)), ((3, 3), (0, 5))]


@pytest.mark.parametrize("pad_width", PADS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_pad_constant(pad_width, dtype):
    x = make((3, 4), dtype)
    check(lambda xp, a: xp.pad(a, pad_width), x)
    cv = True if dtype == np.bool_ else 3 if dtype == np.int32 else 2.5
    check(lambda xp, a: xp.pad(a, pad_width, constant_values=cv), x)


def test_pad_constant_values_are_exact_and_per_side():
    x = make((3, 4), np.float16)
    check(lambda xp, a: xp.pad(a, 2, constant_values=0.1), x)
    check(lambda xp, a: xp.pad(a, 1, constant_values=np.inf), make((2, 2)))
    check(lambda xp, a: xp.pad(a, ((1, 2), (2, 1)), constant_values=((1.0, 2.0), (3.0, 4.0))), make((2, 3)))
    check(lambda xp, a: xp.pad(a, 1, constant_values=(-1, 7)), make((2, 3), np.int32))


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("pad_width", [((1, 2), (0, 3)), ((4, 5), (7, 1)), 2], ids=str)
def test_pad_modes(mode, pad_width):
    x = make((3, 4), np.float32)
    check(lambda xp, a: xp.pad(a, pad_width, mode=mode), x)


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
def test_pad_modes_on_unit_and_dynamic_axes(mode):
    check(lambda xp, a: xp.pad(a, ((2, 3), (1, 1)), mode=mode), make((1, 2)))
    f = lf.jit(lambda a: lnp.pad(a, ((3, 2), (0, 0)), mode=mode), dynamic_axes={"a": {0: "s"}})
    for n in (1, 2, 5):
        x = make((n, 2), np.float32, n)
        assert_same(f(x), np.pad(x, ((3, 2), (0, 0)), mode=mode))


def test_pad_then_slice_and_int_index():
    x = make((3, 4, 5))
    check(lambda xp, a: xp.pad(a, ((1, 2), (0, 0), (3, 1)))[1:, :, ::2], x)
    check(lambda xp, a: xp.pad(a, ((1, 2), (0, 0), (3, 1)))[::-1, 2, ::-3], x)
    check(lambda xp, a: xp.pad(a, 1)[0, 0, 0], x)  # a 0-d read of padding
    check(lambda xp, a: xp.pad(a, 1)[1, 1:, -2], x)
    check(lambda xp, a: xp.pad(xp.pad(a, 1)[1:3], 2), x)


def test_pad_errors():
    with pytest.raises(ShapeError, match="negative"):
        lf.jit(lambda a: lnp.pad(a, -1))(make((2,)))
    with pytest.raises(ShapeError, match="mode"):
        lf.jit(lambda a: lnp.pad(a, 1, mode="mean"))(make((2,)))


# ---- flip, roll, rot90, tril/triu ------------------------------------------------------------------
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), dtypes, st.data())
def test_flip_and_roll(shape, dtype, data):
    x = make(shape, dtype)
    nd = x.ndim
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
    shift = data.draw(st.integers(-7, 7))
    check(lambda xp, a: xp.flip(a, axis), x)
    check(lambda xp, a: xp.roll(a, shift, axis), x)


def test_roll_several_axes_and_flips():
    x = make((3, 4, 5))
    check(lambda xp, a: xp.roll(a, (1, -2), (0, 2)), x)
    check(lambda xp, a: xp.fliplr(a), x)
    check(lambda xp, a: xp.flipud(a), x)


@pytest.mark.parametrize("k", [-3, -1, 0, 1, 2, 3, 5])
@pytest.mark.parametrize("axes", [(0, 1), (1, 2), (2, 0), (-1, -2)])
def test_rot90(k, axes):
    check(lambda xp, a: xp.rot90(a, k, axes), make((2, 3, 4)))


@given(hnp.array_shapes(min_dims=2, max_dims=3, max_side=5), dtypes, st.integers(-4, 4))
def test_tril_triu(shape, dtype, k):
    x = make(shape, dtype)
    check(lambda xp, a: xp.tril(a, k), x)
    check(lambda xp, a: xp.triu(a, k), x)


def test_tril_with_a_dynamic_axis():
    f = lf.jit(lambda a: (lnp.tril(a, -1), lnp.triu(a, 1)), dynamic_axes={"a": {0: "s"}})
    for n in (1, 4):
        x = make((n, 3))
        assert_same(f(x), (np.tril(x, -1), np.triu(x, 1)))


def test_roll_along_a_dynamic_axis():
    """The split point is a dims expression (shift mod s), so one trace serves every length,
    an empty axis included; shifts larger than the axis and negative ones wrap as in NumPy."""
    f = lf.jit(lambda a: (lnp.roll(a, 3, axis=0), lnp.roll(a, -7, axis=0), lnp.roll(a, (2, -1), axis=(0, 1)),
                          lnp.roll(a, 5)), dynamic_axes={"a": {0: "s"}})
    for n in (1, 2, 3, 5, 8, 0):
        x = make((n, 3))
        assert_same(f(x), (np.roll(x, 3, 0), np.roll(x, -7, 0), np.roll(x, (2, -1), (0, 1)), np.roll(x, 5)))
    assert f.trace_count == 1


def test_roll_rejects_a_traced_shift():
    with pytest.raises(LuminalError, match="roll: shift must be a Python int"):
        lf.jit(lambda a, k: lnp.roll(a, k))(make((4,)), np.int32(1))


def test_unfold_matches_sliding_windows():
    from numpy.lib.stride_tricks import sliding_window_view

    x = make((2, 9))
    got = lf.jit(lambda a: lnp.unfold(a, 1, 3, 2))(x)
    assert_same(got, sliding_window_view(x, 3, axis=1)[:, ::2])
    got = lf.jit(lambda a: lnp.unfold(lnp.pad(a, ((0, 0), (1, 1))), 1, 3))(x)
    assert_same(got, sliding_window_view(np.pad(x, ((0, 0), (1, 1))), 3, axis=1))


def test_bad_axis_raises_luminal_error():
    with pytest.raises(LuminalError, match="axis 3 is out of bounds"):
        lf.jit(lambda a: lnp.flip(a, 3))(make((2, 3)))


@pytest.mark.parametrize("backend", ["numpy", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_products_and_running_max_along_a_dynamic_axis(backend):
    """prod, cumprod and cummax along a dynamic axis (a 31-step scan; prod takes its last lane),
    against NumPy at lengths across one compile, an empty axis included; and float cumprod of
    small values, which (v - 1) + 1 shifts once turned to 0 (cumprod([1e-8, 2]) gave [1e-8, 0])."""
    r = np.random.default_rng(3)

    @lf.jit(dynamic_axes={"a": {0: "s"}, "i": {1: "t"}}, backend=backend)
    def f(a, i):
        return (lnp.cumprod(a, axis=0), lnp.cummax(a, axis=0), lnp.prod(a, axis=0), lnp.prod(a),
                lnp.cumprod(i, axis=1), lnp.cummax(i, axis=1), lnp.prod(i, axis=1))

    for n in (1, 2, 5, 8, 13, 0):
        a = (r.standard_normal((n, 3)) * 0.5 + 1).astype(np.float32)
        a[n // 2:n // 2 + 1, 1] = np.nan if n > 2 else a[n // 2:n // 2 + 1, 1]
        i = r.integers(-3, 4, (2, n)).astype(np.int32)
        got = [np.asarray(g) for g in f(a, i)]
        with np.errstate(over="ignore"):
            want = [np.cumprod(a, axis=0), np.maximum.accumulate(a, axis=0), np.prod(a, axis=0), np.prod(a),
                    np.cumprod(i, axis=1).astype(np.int32), np.maximum.accumulate(i, axis=1),
                    np.prod(i, axis=1).astype(np.int32)]
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == np.shape(w), (n, k, g.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=f"length {n}, result {k}")
    x = np.array([1e-8, 2.0, 3.0, 1e-3, 5.0, -1.5, np.inf, 0.5], np.float32)
    np.testing.assert_allclose(np.asarray(lf.jit(lnp.cumprod, backend=backend)(x)), np.cumprod(x), rtol=1e-6)

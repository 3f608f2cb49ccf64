"""View (shape tracker) operations against NumPy on concrete buffers.

Each test keeps a NumPy reference array next to a (buffer, View) pair, applies the same movement
to both, and compares ``read_view(buffer, view)`` with the reference. When a View op says a
movement is inexpressible (returns None) the pair is materialised, as the tracer does.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from luminal_fn.backends.numpy.executor import read_view
from luminal_fn.ir.expr import var
from luminal_fn.ir.view import View


def _start(shape):
    ref = np.arange(1, int(np.prod(shape)) + 1, dtype=np.int64).reshape(shape)
    return ref, ref.reshape(-1).copy(), View.contiguous(shape)


def _check(ref, buf, view):
    got = read_view(buf, view)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


def _materialise(buf, view):
    out = np.ascontiguousarray(read_view(buf, view))
    return out.reshape(-1).copy(), View.contiguous(out.shape)


# ---- single operations --------------------------------------------------------------------------
def test_permute_and_insert_remove_axis():
    ref, buf, v = _start((2, 3, 4))
    v2 = v.permute((2, 0, 1))
    _check(ref.transpose(2, 0, 1), buf, v2)
    v3 = v2.insert_axis(1, 1)
    _check(ref.transpose(2, 0, 1)[:, None], buf, v3)
    _check(ref.transpose(2, 0, 1), buf, v3.remove_axis(1))
    _check(ref[:, :, None].repeat(5, axis=2), buf, v.insert_axis(2, 5))


@pytest.mark.parametrize("sl", [(0, 4, 1), (1, 4, 2), (0, 5, 3), (2, 2, 1), (4, 5, 2)])
def test_slice_matches_numpy(sl):
    ref, buf, v = _start((3, 5))
    start, stop, step = sl
    _check(ref[:, start:stop:step], buf, v.slice(1, start, stop, step))


def test_flip_then_slice_is_a_negative_step():
    ref, buf, v = _start((4, 7))
    _check(ref[:, ::-1], buf, v.flip(1))
    # ref[:, 5:0:-2] == flip, then elements 1, 3, 5 of the flipped axis
    _check(ref[:, 5:0:-2], buf, v.flip(1).slice(1, 1, 6, 2))


def test_pad_then_slice_with_steps_keeps_the_mask():
    ref, buf, v = _start((3, 4))
    p = v.pad(1, 2, 3)  # (3, 9)
    pref = np.pad(ref, ((0, 0), (2, 3)))
    _check(pref, buf, p)
    for start, stop, step in [(0, 9, 2), (1, 9, 3), (3, 8, 2), (0, 2, 1), (6, 9, 1), (1, 8, 4)]:
        s = p.slice(1, start, stop, step)
        assert s is not None
        _check(pref[:, start:stop:step], buf, s)


def test_pad_flip_pad_slice():
    ref, buf, v = _start((3, 4))
    pref = np.pad(np.pad(ref, ((1, 0), (0, 2)))[::-1], ((2, 1), (1, 1)))[1:6:2, ::3]
    pv = v.pad(0, 1, 0).pad(1, 0, 2).flip(0).pad(0, 2, 1).pad(1, 1, 1)
    pv = pv.slice(0, 1, 6, 2).slice(1, 0, 8, 3)
    _check(pref, buf, pv)


def test_remove_axis_on_padding_reads_zero():
    ref, buf, v = _start((2, 3))
    p = v.pad(0, 1, 0)  # row 0 is padding
    s = p.slice(0, 0, 1).remove_axis(0)
    _check(np.zeros(3, np.int64), buf, s)
    # a 0-d read of padding cannot be said by a mask: the op asks for a materialisation
    z = p.slice(0, 0, 1).slice(1, 0, 1).remove_axis(0)
    assert z.remove_axis(0) is None


def test_expand_of_padding_reads_zero():
    ref, buf, v = _start((1, 3))
    p = v.pad(0, 1, 0).slice(0, 0, 1)  # a size-1 axis that is all padding
    _check(np.zeros((4, 3), np.int64), buf, p.expand(0, 4))
    q = v.pad(0, 1, 0).slice(0, 1, 2)
    _check(np.broadcast_to(ref, (4, 3)), buf, q.expand(0, 4))


def test_unfold_matches_sliding_window_view():
    ref, buf, v = _start((2, 10))
    for window, step, dil in [(3, 1, 1), (3, 2, 1), (2, 3, 2), (10, 1, 1)]:
        span = (window - 1) * dil + 1
        win = sliding_window_view(ref, span, axis=1)[:, ::step, ::dil]
        _check(win, buf, v.unfold(1, window, step, dil))
    assert v.pad(1, 1, 1).unfold(1, 3) is None


_RESHAPES = [  # (view of a (6, 8) buffer, the same as NumPy, new shape, expressible as strides)
    ("split a transposed axis", lambda v: v.permute((1, 0)), lambda r: r.T, (2, 4, 3, 2), True),
    ("merge strided run", lambda v: v.permute((1, 0)).slice(1, 0, 6, 2), lambda r: r.T[:, ::2],
     (4, 6), False),
    ("split a sliced axis", lambda v: v.slice(1, 0, 4), lambda r: r[:, :4], (3, 2, 2, 2), True),
    ("merge stepped rows", lambda v: v.slice(0, 1, 6, 2), lambda r: r[1::2], (24,), False),
    ("stepped rows, split columns", lambda v: v.slice(0, 1, 6, 2), lambda r: r[1::2], (3, 4, 2), True),
    ("unit axis moved", lambda v: v.insert_axis(1, 1).permute((1, 0, 2)), lambda r: r[None],
     (6, 8), True),
    ("broadcast then merge", lambda v: v.insert_axis(0, 3), lambda r: np.broadcast_to(r, (3, 6, 8)),
     (3, 48), True),
    ("broadcast inner", lambda v: v.insert_axis(2, 3), lambda r: np.broadcast_to(r[:, :, None], (6, 8, 3)),
     (48, 3), True),
    ("broadcast inner, merge it", lambda v: v.insert_axis(2, 3),
     lambda r: np.broadcast_to(r[:, :, None], (6, 8, 3)), (6, 24), False),
    ("padded rows split", lambda v: v.pad(0, 2, 1), lambda r: np.pad(r, ((2, 1), (0, 0))), (9, 2, 4), True),
    ("padded rows merge", lambda v: v.pad(0, 2, 1), lambda r: np.pad(r, ((2, 1), (0, 0))), (72,), True),
    ("padded rows split outer", lambda v: v.pad(0, 2, 2), lambda r: np.pad(r, ((2, 2), (0, 0))),
     (5, 16), True),
    ("padded rows, boundary inside", lambda v: v.pad(0, 1, 2), lambda r: np.pad(r, ((1, 2), (0, 0))),
     (3, 24), False),
    ("padded columns add unit", lambda v: v.pad(1, 1, 1), lambda r: np.pad(r, ((0, 0), (1, 1))),
     (6, 1, 10, 1), True),
    ("padded columns merge", lambda v: v.pad(1, 1, 1), lambda r: np.pad(r, ((0, 0), (1, 1))), (60,), False),
    ("double flip", lambda v: v.flip(0).flip(1), lambda r: r[::-1, ::-1], (48,), True),
    ("flip rows, split cols", lambda v: v.flip(0), lambda r: r[::-1], (6, 2, 2, 2), True),
    ("flip rows, merge", lambda v: v.flip(0), lambda r: r[::-1], (48,), False),
]


@pytest.mark.parametrize("name, make, np_make, new_shape, expressible", _RESHAPES,
                         ids=[c[0] for c in _RESHAPES])
def test_reshape_of_views(name, make, np_make, new_shape, expressible):
    ref, buf, v = _start((6, 8))
    base, base_ref = make(v), np_make(ref)
    _check(base_ref, buf, base)
    out = base.reshape(new_shape)
    assert (out is not None) == expressible
    if out is None:
        buf, v2 = _materialise(buf, base)
        out = v2.reshape(new_shape)
    _check(base_ref.reshape(new_shape), buf, out)


def test_reshape_of_broadcast_axes():
    ref, buf, v = _start((4,))
    b = v.insert_axis(0, 3).insert_axis(2, 2)  # (3, 4, 2) strides (0, 1, 0)
    assert b.reshape((3, 8)) is None  # 4 x 2 with strides (1, 0) is no single stride
    _check(np.broadcast_to(ref[None, :, None], (3, 4, 2)).reshape(3, 4, 2, 1), buf,
           b.reshape((3, 4, 2, 1)))
    _check(np.broadcast_to(ref, (3, 2, 4)).reshape(6, 4), buf, b.permute((0, 2, 1)).reshape((6, 4)))


def test_reshape_of_an_all_padding_view():
    ref, buf, v = _start((2, 3))
    p = v.pad(0, 0, 2).slice(0, 2, 4)  # two rows of padding only
    r = p.reshape((3, 2))
    assert r is not None
    _check(np.zeros((3, 2), np.int64), buf, r)


def test_symbolic_view_evaluates_like_the_static_one():
    s = var("s")
    sym = View.contiguous((s, 6)).pad(0, 1, 2).slice(0, 1, s + 3, 2).flip(1)
    rows = sym.shape[0]
    sym = sym.reshape((rows, 2, 3))
    assert sym is not None, "a padded, stepped, flipped symbolic view should split its columns"
    for n in (1, 2, 5):
        ref, buf, _ = _start((n, 6))
        pref = np.pad(ref, ((1, 2), (0, 0)))[1:n + 3:2, ::-1]
        _check(pref.reshape(pref.shape[0], 2, 3), buf, sym.evaluate({"s": n}))


def _symbolic_views():
    s, t = var("s"), var("t")
    yield "pad, stepped slice, flip, split", \
        View.contiguous((s, 6)).pad(0, 1, 2).slice(0, 1, s + 3, 2).flip(1), lambda r, n, m: \
        np.pad(r, ((1, 2), (0, 0)))[1:n + 3:2, ::-1], (lambda n, m: (n, 6))
    yield "broadcast and permute", View.contiguous((s, 1, t)).expand(1, 3).permute((2, 0, 1)), \
        lambda r, n, m: np.broadcast_to(r, (n, 3, m)).transpose(2, 0, 1), (lambda n, m: (n, 1, m))
    yield "a cache's first rows, padded on both sides", \
        View.contiguous((8, t)).slice(0, 0, s).pad(1, 2, 1), \
        lambda r, n, m: np.pad(r[:n], ((0, 0), (2, 1))), (lambda n, m: (8, m))
    yield "windows over a symbolic axis", View.contiguous((s + 2, 3)).unfold(0, 3), \
        lambda r, n, m: np.moveaxis(sliding_window_view(r, 3, axis=0), -1, 1), (lambda n, m: (n + 2, 3))


@pytest.mark.parametrize("name,view,np_of,shape_of", list(_symbolic_views()),
                         ids=[v[0] for v in _symbolic_views()])
def test_generated_view_parts_read_what_evaluate_reads(name, view, np_of, shape_of):
    """Backends read a symbolic view through one generated function of the dims
    (View.parts_function); it must read what View.evaluate's concrete view reads, empty axes
    included: on NumPy, and through MLX's own ops where MLX is installed."""
    from luminal_fn.backends.numpy.executor import read_parts

    try:
        import mlx.core as mx
        from luminal_fn.backends.mlx.ops import read_parts as mlx_read_parts
    except ImportError:
        mx = None
    parts = view.parts_function()
    for n, m in ((1, 1), (2, 5), (5, 3), (0, 2)):
        if name.startswith("windows") and n == 0:
            continue  # (NumPy makes no zero windows of a 2-row axis; the view makes none either)
        ref, buf, _ = _start(shape_of(n, m))
        dims = {"s": n, "t": m}
        want = np_of(ref, n, m)
        got = read_parts(buf, *parts(dims))
        _check(want, buf, view.evaluate(dims))
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=f"{name} s={n} t={m}")
        if mx is not None:
            on_mlx = np.array(mlx_read_parts(mx.array(buf), *parts(dims)))
            np.testing.assert_array_equal(on_mlx, want, err_msg=f"MLX: {name} s={n} t={m}")


# ---- random chains ------------------------------------------------------------------------------
@st.composite
def _chains(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd)))
    ops = draw(st.lists(st.tuples(st.sampled_from(
        ["permute", "insert", "remove", "expand", "slice", "flip", "pad", "reshape", "unfold"]),
        st.integers(0, 10 ** 6)), min_size=1, max_size=7))
    return shape, ops


def _apply(kind, seed, ref, buf, v):
    r = np.random.default_rng(seed)
    nd = ref.ndim
    if kind == "permute" and nd:
        p = tuple(r.permutation(nd))
        return ref.transpose(p), v.permute(p)
    if kind == "insert":
        ax = int(r.integers(0, nd + 1))
        return np.expand_dims(ref, ax), v.insert_axis(ax, 1)
    if kind == "remove":
        ones = [i for i, d in enumerate(ref.shape) if d == 1]
        if ones:
            ax = ones[int(r.integers(0, len(ones)))]
            return ref[(slice(None),) * ax + (0,)], v.remove_axis(ax)
    if kind == "expand":
        ones = [i for i, d in enumerate(ref.shape) if d == 1]
        if ones:
            ax = ones[int(r.integers(0, len(ones)))]
            n = int(r.integers(1, 4))
            shape = list(ref.shape)
            shape[ax] = n
            return np.broadcast_to(ref, shape), v.expand(ax, n)
    if kind == "slice" and nd:
        ax = int(r.integers(0, nd))
        n = ref.shape[ax]
        start = int(r.integers(0, n + 1))
        stop = int(r.integers(start, n + 1))
        step = int(r.integers(1, 4))
        idx = (slice(None),) * ax + (slice(start, stop, step),)
        return ref[idx], v.slice(ax, start, stop, step)
    if kind == "flip" and nd:
        ax = int(r.integers(0, nd))
        return np.flip(ref, ax), v.flip(ax)
    if kind == "pad" and nd:
        ax = int(r.integers(0, nd))
        lo, hi = int(r.integers(0, 3)), int(r.integers(0, 3))
        pw = [(0, 0)] * nd
        pw[ax] = (lo, hi)
        return np.pad(ref, pw), v.pad(ax, lo, hi)
    if kind == "reshape" and ref.size:
        n = ref.size
        divs = [d for d in range(1, n + 1) if n % d == 0]
        a = divs[int(r.integers(0, len(divs)))]
        rest = n // a
        divs2 = [d for d in range(1, rest + 1) if rest % d == 0]
        b = divs2[int(r.integers(0, len(divs2)))]
        shape = [x for x in (a, b, rest // b)]
        if r.integers(0, 2):
            shape.insert(int(r.integers(0, 3)), 1)
        return ref.reshape(shape), v.reshape(shape)
    if kind == "unfold" and nd:
        ax = int(r.integers(0, nd))
        n = ref.shape[ax]
        if n == 0:
            return ref, v
        w = int(r.integers(1, n + 1))
        step = int(r.integers(1, 3))
        win = np.moveaxis(sliding_window_view(ref, w, axis=ax), -1, ax + 1)
        win = win[(slice(None),) * ax + (slice(None, None, step),)]
        return win, v.unfold(ax, w, step)
    return ref, v


@given(_chains())
def test_random_movement_chains_match_numpy(chain):
    shape, ops = chain
    ref, buf, v = _start(shape)
    for kind, seed in ops:
        new_ref, new_v = _apply(kind, seed, ref, buf, v)
        if new_v is None:  # inexpressible: materialise and redo the op on the contiguous copy
            buf, v = _materialise(buf, v)
            new_ref, new_v = _apply(kind, seed, ref, buf, v)
            assert new_v is not None, f"{kind} failed on a contiguous view"
        ref, v = new_ref, new_v
        _check(ref, buf, v)


def test_min_max_of_sizes_simplify():
    """Sizes are never negative: max(0, n) is n, and nested min/max absorb a repeated argument, so
    slicing a cache to a context length and the mask to the slice's length agree symbolically."""
    from luminal_fn.ir.expr import maximum, minimum, nonnegative

    c = var("c")
    m = minimum(128, c)
    assert maximum(0, c) is c and maximum(m, 0) is m
    assert minimum(m, c) is m and minimum(c, m) is m and maximum(c, maximum(c, 3)) is maximum(c, 3)
    assert nonnegative(c * 2 + 3) and not nonnegative(c - 1)
    assert maximum(0, c - 1) is not (c - 1)  # c - 1 may be negative: kept
    assert minimum(0, c) == 0 and minimum(-2, c) == -2
    assert (m.evaluate({"c": 40}), m.evaluate({"c": 400})) == (40, 128)


def test_compiled_tuples_evaluate_like_each_expression():
    """compile_py_tuple (the NumPy backend's symbolic shapes) gives what Expr.evaluate gives for
    every op the expressions use, floor division and modulo of negatives included."""
    from luminal_fn.ir.expr import compile_py_tuple, maximum, minimum

    s, t = var("s"), var("t")
    xs = (3, s, s * t + 2, (s - 7) // 3, (t - 5) % 4, minimum(128, s), maximum(t, s - 2), s - t)
    fn = compile_py_tuple(xs)
    for d in ({"s": 1, "t": 9}, {"s": 40, "t": 2}, {"s": 300, "t": 300}):
        assert fn(d) == tuple(x if isinstance(x, int) else x.evaluate(d) for x in xs)
    assert compile_py_tuple(())({}) == ()

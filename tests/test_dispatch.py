"""The dispatch path of a jitted function: the dispatch cache keyed by concrete shapes and dtypes,
the generated argument matchers (one a recent argument structure), and other libraries' arrays
(DLPack producers) on that path. Results must be those of the general (trace-cache) path."""
import numpy as np
import pytest

import luminal_fn as lf


@pytest.fixture
def x4():
    return np.array([0.5, -1.0, 2.0, 3.5], np.float32)


def test_dispatch_cache_agrees_with_the_trace_cache(x4):
    @lf.jit
    def f(tree, s):
        leaves = lf.tree_leaves(tree)
        return [leaf * (k + 1) + s for k, leaf in enumerate(leaves)]

    a = lf.device_put(x4)
    trees = [
        {"b": x4, "a": [a, (x4, 2.0)]},   # dict keys in non-sorted insertion order
        {"a": [a, (x4, 2.0)], "b": x4},   # same structure, other insertion order
        [x4, [a, x4]],
        (x4, [a, x4]),                    # tuple vs list: a new structure
        {1: x4, 2: a},                    # non-str keys take the general path
        {"a": x4, "n": None},             # None takes the general path
    ]
    for tree in trees:
        leaves = lf.tree_leaves(tree)
        for _ in range(3):  # the first call fills the caches, the others hit them
            out = f(tree, 1.0)
            assert len(out) == len(leaves)
            for k, (o, leaf) in enumerate(zip(out, leaves)):
                np.testing.assert_allclose(np.asarray(o), np.asarray(leaf) * (k + 1) + 1.0)
    assert f.trace_count == 5  # the two dicts with the same keys share one trace
    # a value change in a static or a new shape inside a container still selects correctly
    np.testing.assert_allclose(np.asarray(f([np.ones(2, np.float32)], 0.0)[0]), np.ones(2))
    assert f.trace_count == 6


def test_a_new_dynamic_length_takes_the_fast_dispatch_path(monkeypatch):
    """Dynamic axes are left out of the dispatch key: a new sequence length neither retraces nor
    walks the slow signature path; static shapes still separate calls."""
    jf = lf.jit(lambda p, x: (x * p["w"]).sum(axis=1) + p["b"], dynamic_axes={"x": {0: "s"}})
    p = {"w": np.arange(4, dtype=np.float32), "b": 1.0}
    x3 = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(np.asarray(jf(p, x3)), x3 @ p["w"] + 1)
    np.testing.assert_allclose(np.asarray(jf(p, x3)), x3 @ p["w"] + 1)
    slow = []
    real = jf._call
    monkeypatch.setattr(jf, "_call", lambda a, k: slow.append(1) or real(a, k))
    for s in (5, 9, 2):
        x = np.arange(s * 4, dtype=np.float32).reshape(s, 4)
        np.testing.assert_allclose(np.asarray(jf(p, x)), x @ p["w"] + 1)
    assert not slow
    x = np.ones((3, 6), np.float32)  # a static axis changed: not the same entry
    p6 = {"w": np.arange(6, dtype=np.float32), "b": 0.0}
    np.testing.assert_allclose(np.asarray(jf(p6, x)), x @ p6["w"])
    assert slow


def test_the_generated_argument_matcher_takes_exactly_the_same_structure():
    """The last structure's generated matcher (frontend/fast_match.py) answers only for equal
    containers, keys, leaf types, dtypes and static shapes; anything else goes the general way
    and still computes the right values. Arrays already on the backend hand over their buffers."""
    from luminal_fn.frontend.fast_match import matcher_for

    def f(p, xs):
        return p["w"] * xs[0] + p["b"] + xs[1]

    jf = lf.jit(f)
    w = np.arange(3, dtype=np.float32)
    p = {"w": w, "b": 2.0}
    xs = [np.ones(3, np.float32), np.full(3, 5.0, np.float32)]
    ref = lambda p, xs: np.asarray(p["w"]) * np.asarray(xs[0]) + p["b"] + np.asarray(xs[1])  # noqa: E731
    np.testing.assert_allclose(np.asarray(jf(p, xs)), ref(p, xs))
    m = jf._matcher
    assert m is not None
    leaves, bufs = m.match((p, xs))
    assert [id(v) for v in leaves] == [id(v) for v in lf.tree_leaves((p, xs))] and bufs is None
    for other in ({"w": w, "b": 2.0, "c": 1.0},        # another key
                  {"w": w.astype(np.float64), "b": 2.0},  # another dtype
                  {"w": np.arange(4, dtype=np.float32), "b": 2.0},  # another shape
                  {"w": w, "b": 2}):                   # an int where a float was
        assert m.match((other, xs)) is None
    assert m.match((p, tuple(xs))) is None and m.match((p, xs[:1])) is None
    # each of those still runs correctly through the general path
    p4 = {"w": np.arange(4, dtype=np.float32), "b": 1.0}
    xs4 = [np.ones(4, np.float32), np.zeros(4, np.float32)]
    np.testing.assert_allclose(np.asarray(jf(p4, xs4)), ref(p4, xs4))
    np.testing.assert_allclose(np.asarray(jf({"w": w, "b": 3}, xs)), ref({"w": w, "b": 3}, xs))
    # device Arrays give their buffers; a deleted (donated) one does not
    dev = lf.tree_map(lf.device_put, (p, xs))
    np.testing.assert_allclose(np.asarray(jf(*dev)), ref(p, xs))
    m = jf._matcher
    leaves, bufs = m.match(dev)
    assert bufs is not None and all(b is a._buf for a, b in zip(lf.tree_leaves(dev), bufs[:2]))
    built = matcher_for(dev, None, m.compiled, m.compiled.backend)
    dev[1][0].delete("test")
    assert built.match(dev)[1] is None
    assert matcher_for((object(),), None, m.compiled, m.compiled.backend) is None


def test_the_matcher_leaves_dynamic_axes_out():
    jf = lf.jit(lambda x, y: x.sum(axis=0) + y, dynamic_axes={"x": {0: "s"}})
    y = np.arange(4, dtype=np.float32)
    for s in (3, 3, 7, 2):
        x = np.arange(s * 4, dtype=np.float32).reshape(s, 4)
        np.testing.assert_allclose(np.asarray(jf(x, y)), x.sum(axis=0) + y)
    m = jf._matcher
    assert m.match((np.ones((11, 4), np.float32), y)) is not None
    assert m.match((np.ones((11, 5), np.float32), y)) is None  # a static axis
    assert m.match((np.ones((11, 4, 1), np.float32), y)) is None  # another rank
    assert jf.trace_count == 1


def test_calls_alternating_between_structures_each_keep_a_matcher(monkeypatch):
    """A prompt step on host data and a decode step on the device token alternate: each
    structure gets its own generated matcher, so neither falls back to the key-building path
    once both are known (the last hit is tried first); values stay right throughout."""
    import luminal_fn.frontend.jit as jit_module

    jf = lf.jit(lambda w, t: (w * t).sum(axis=-1), dynamic_axes={"t": {0: "s"}})
    w = lf.device_put(np.arange(4, dtype=np.float32))
    host = np.ones((3, 4), np.float32)
    dev = lf.device_put(np.full((1, 4), 2.0, np.float32))
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(jf(w, host)), [6.0, 6.0, 6.0])
        np.testing.assert_allclose(np.asarray(jf(w, dev)), [12.0])
    assert len(jf._matchers) == 2 and jf._matcher.match((w, dev)) is not None
    keyed = []
    monkeypatch.setattr(jit_module, "fast_key", lambda *a: keyed.append(a) or None)
    for _ in range(3):  # matched without building a key
        np.testing.assert_allclose(np.asarray(jf(w, host[:2])), [6.0, 6.0])
        np.testing.assert_allclose(np.asarray(jf(w, dev)), [12.0])
    assert not keyed and jf.trace_count == 1


class _OtherLibraryArray:
    """Another library's array (as CuPy, PyTorch or JAX arrays are): DLPack, and a type that
    declares shape and dtype."""

    def __init__(self, arr):
        self.arr = arr

    shape = property(lambda self: self.arr.shape)
    dtype = property(lambda self: self.arr.dtype)

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_other_libraries_arrays_take_the_fast_dispatch_path():
    """A function called again and again on another library's arrays (CuPy, PyTorch, JAX) is
    matched by the generated matcher like one called on NumPy arrays: no retrace, no general
    flatten, right values each call (new values in the same shapes read anew); a dynamic axis may
    change, a static axis or dtype change goes the general way and still computes."""
    jf = lf.jit(lambda p, x: (x * p["w"]).sum(axis=1) + p["b"], dynamic_axes={"x": {0: "s"}})
    p = {"w": _OtherLibraryArray(np.arange(4, dtype=np.float32)), "b": _OtherLibraryArray(np.float32([1.0]))}
    calls = []
    for s in (3, 3, 5):
        x = np.random.default_rng(s).standard_normal((s, 4)).astype(np.float32)
        got = np.asarray(jf(p, _OtherLibraryArray(x)))
        np.testing.assert_allclose(got, (x * p["w"].arr).sum(axis=1) + 1.0, rtol=1e-6)
        calls.append(jf._matcher)
    m = jf._matcher
    assert m is not None and calls[1] is m and calls[2] is m  # built once, then hit
    x = _OtherLibraryArray(np.ones((7, 4), np.float32))
    leaves, bufs = m.match((p, x))
    assert leaves[-1] is x and bufs is None
    assert m.match((p, _OtherLibraryArray(np.ones((7, 5), np.float32)))) is None  # a static axis
    assert m.match((p, _OtherLibraryArray(np.ones((7, 4), np.int32)))) is None  # another dtype
    assert m.match((p, np.ones((7, 4), np.float32))) is None  # another leaf type
    assert jf.trace_count == 1
    xi = np.ones((2, 4), np.int32)
    np.testing.assert_allclose(np.asarray(jf(p, _OtherLibraryArray(xi))), (xi * p["w"].arr).sum(axis=1) + 1.0)

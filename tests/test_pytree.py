"""Pytrees: flatten/unflatten, paths, and pytrees as jitted arguments and results."""
from collections import OrderedDict, namedtuple
from dataclasses import dataclass

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend import pytree

Pair = namedtuple("Pair", "first second")


@dataclass
class State:
    w: object
    b: object


TREES = [
    {"b": 1, "a": [2, (3, None)]},
    [1, [2, [3, [4]]]],
    (1,),
    Pair(1, {"x": 2}),
    State(w=1, b=(2, 3)),
    OrderedDict([("z", 1), ("a", 2)]),
    None,
    [],
]


@pytest.mark.parametrize("tree", TREES, ids=[type(t).__name__ for t in TREES])
def test_flatten_unflatten_round_trip(tree):
    leaves, td = pytree.flatten(tree)
    assert pytree.unflatten(td, leaves) == tree
    assert td.num_leaves == len(leaves)
    # rebuilding with new leaves keeps the structure and the container types
    rebuilt = pytree.unflatten(td, [x * 10 for x in leaves])
    assert pytree.flatten(rebuilt)[1] == td
    assert pytree.flatten(rebuilt)[0] == [x * 10 for x in leaves]


def test_dict_keys_sorted_and_paths():
    leaves, td = pytree.flatten({"b": 1, "a": {"y": 2, "x": 3}, "c": [4, 5]})
    assert leaves == [3, 2, 1, 4, 5]
    assert pytree.leaf_paths(td, "p") == ["p/a/x", "p/a/y", "p/b", "p/c/0", "p/c/1"]
    _, td_nt = pytree.flatten(Pair(1, 2))
    assert pytree.leaf_paths(td_nt) == ["first", "second"]


def test_treedefs_compare_by_structure():
    a = pytree.flatten({"a": 1, "b": [2, 3]})[1]
    b = pytree.flatten({"b": [9, 9], "a": 7})[1]
    c = pytree.flatten({"a": 1, "b": (2, 3)})[1]
    d = pytree.flatten({"a": 1, "b": [2, 3, 4]})[1]
    assert a == b and hash(a) == hash(b)
    assert a != c and a != d
    assert pytree.flatten(Pair(1, 2))[1] != pytree.flatten((1, 2))[1]


def test_arrays_are_leaves_and_tree_map():
    x = np.ones(3)
    leaves, _ = pytree.flatten({"x": x, "y": [lf.device_put(x)]})
    assert len(leaves) == 2 and leaves[0] is x
    out = lf.tree_map(lambda a, b: a + b, {"p": 1, "q": [2]}, {"p": 10, "q": [20]})
    assert out == {"p": 11, "q": [22]}
    assert lf.tree_leaves([1, (2, None, {"k": 3})]) == [1, 2, 3]


def test_jit_dict_args_and_nested_results(rng):
    p = {"w": rng.standard_normal((3, 4)).astype(np.float32),
         "b": rng.standard_normal(4).astype(np.float32)}
    x = rng.standard_normal((2, 3)).astype(np.float32)

    @lf.jit
    def f(params, x):
        y = x @ params["w"] + params["b"]
        return {"y": y, "stats": [y.sum(), (y.max(), None)]}

    out = f(p, x)
    ref = x @ p["w"] + p["b"]
    assert set(out) == {"y", "stats"}
    np.testing.assert_allclose(np.asarray(out["y"]), ref, rtol=1e-5, atol=1e-6)
    assert isinstance(out["stats"], list) and isinstance(out["stats"][1], tuple)
    np.testing.assert_allclose(np.asarray(out["stats"][0]), ref.sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(out["stats"][1][0]), ref.max(), rtol=1e-6)
    assert out["stats"][1][1] is None


def test_jit_namedtuple_and_dataclass_keep_their_types():
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 2.0, np.float32)

    @lf.jit
    def f(pair, st):
        return Pair(pair.first * st.w, pair.second + st.b), State(w=pair.first - 1, b=None)

    p_out, s_out = f(Pair(a, b), State(w=b, b=a))
    assert type(p_out) is Pair and type(s_out) is State
    np.testing.assert_array_equal(np.asarray(p_out.first), a * b)
    np.testing.assert_array_equal(np.asarray(p_out.second), b + a)
    np.testing.assert_array_equal(np.asarray(s_out.w), a - 1)
    assert s_out.b is None


def test_jit_none_arguments_and_results():
    x = np.arange(3, dtype=np.float32)

    @lf.jit
    def f(x, maybe):
        return (x * 2 if maybe is None else x + maybe["v"]), None

    y, nothing = f(x, None)
    np.testing.assert_array_equal(np.asarray(y), x * 2)
    assert nothing is None
    y2, _ = f(x, {"v": np.ones(3, np.float32)})
    np.testing.assert_array_equal(np.asarray(y2), x + 1)
    assert f.trace_count == 2


def test_new_pytree_structure_retraces_same_structure_does_not():
    x = np.ones(2, np.float32)

    @lf.jit
    def total(tree):
        return sum(lf.tree_leaves(tree), lnp.zeros(2))

    np.testing.assert_array_equal(np.asarray(total({"a": x})), x)
    np.testing.assert_array_equal(np.asarray(total({"a": 2 * x})), 2 * x)
    assert total.trace_count == 1
    np.testing.assert_array_equal(np.asarray(total({"a": x, "b": 3 * x})), 4 * x)
    np.testing.assert_array_equal(np.asarray(total([x, x])), 2 * x)
    np.testing.assert_array_equal(np.asarray(total((x, x))), 2 * x)
    assert total.trace_count == 4  # dict with a new key, list and tuple are all new structures


def test_device_put_pytree_and_ordered_dict_result():
    tree = lf.device_put({"a": np.ones(2), "b": [np.zeros(3, np.int64)]})
    assert isinstance(tree["a"], lf.Array) and tree["a"].dtype == lf.float32
    assert tree["b"][0].dtype == lf.int32

    @lf.jit
    def f(x):
        return OrderedDict([("z", x + 1), ("a", x - 1)])

    out = f(np.zeros(2, np.float32))
    assert type(out) is OrderedDict and list(out) == ["z", "a"]
    np.testing.assert_array_equal(np.asarray(out["z"]), np.ones(2))


# ---- the generated result builder (stages.Compiled wraps a call's outputs with it) ----------------
RESULT_TREES = TREES + [
    {3: 1, "3": 2, (1, "a"): [3, {"k": 4}]},  # int, str and tuple keys: each its own key
    ({"k": 1, "v": 2},),  # one-element tuples keep their comma
    [{"k": i, "v": -i} for i in range(16)],  # a Llama step's cache
    Pair(State(w=1, b=None), OrderedDict([("z", (2,)), ("a", 3)])),
    7,  # a bare leaf
]


@pytest.mark.parametrize("tree", RESULT_TREES, ids=lambda t: type(t).__name__)
def test_result_builder_builds_what_unflatten_builds(tree):
    from luminal_fn.frontend.result_builder import result_builder

    leaves, td = pytree.flatten(tree)
    bufs = [np.full((k + 1,), k, np.float32) for k in range(len(leaves))]
    be = lf.get_backend("numpy")
    build = result_builder(td, be, [lf.float32] * len(leaves))
    got = build(bufs)
    assert pytree.flatten(got)[1] == td  # same containers, types, keys and key order
    if isinstance(got, dict):
        assert list(got) == list(pytree.unflatten(td, leaves))
    out = pytree.flatten(got)[0]
    assert len(out) == len(bufs)
    for a, b in zip(out, bufs):
        assert type(a) is lf.Array and a.dtype is lf.float32 and a.shape == b.shape
        assert a._buf is b  # wrapped, not copied


def test_result_builder_takes_shapes_from_buffers_and_falls_back_for_deep_trees():
    from luminal_fn.frontend.result_builder import MAX_GENERATED_DEPTH, result_builder

    be = lf.get_backend("numpy")
    deep = 0
    for _ in range(MAX_GENERATED_DEPTH + 5):
        deep = [deep]
    leaves, td = pytree.flatten(deep)
    got = result_builder(td, be, [lf.int32])([np.zeros((2, 3), np.int32)])
    inner = got
    while isinstance(inner, list):
        inner = inner[0]
    assert pytree.flatten(got)[1] == td and inner.shape == (2, 3) and inner.dtype is lf.int32
    with pytest.raises(ValueError, match="2 leaves but 1 output dtypes"):
        result_builder(pytree.flatten((1, 2))[1], be, [lf.float32])


def test_jit_results_with_int_and_str_keys_and_nested_structure():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    @lf.jit
    def f(x):
        return {0: x + 1, "0": x * 2, "rows": [x.sum(axis=1), (x.max(),)]}, x - 1

    for _ in range(2):  # the first call compiles, the second takes the dispatch path
        d, y = f(x)
        assert list(d) == list(pytree.unflatten(pytree.flatten(d)[1], pytree.flatten(d)[0]))
        np.testing.assert_array_equal(np.asarray(d[0]), x + 1)
        np.testing.assert_array_equal(np.asarray(d["0"]), x * 2)
        np.testing.assert_array_equal(np.asarray(d["rows"][0]), x.sum(axis=1))
        assert isinstance(d["rows"][1], tuple) and len(d["rows"][1]) == 1
        np.testing.assert_array_equal(np.asarray(d["rows"][1][0]), x.max())
        np.testing.assert_array_equal(np.asarray(y), x - 1)

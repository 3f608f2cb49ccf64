"""The NumPy backend's straight-line tree programs (tree_program) and the subtrees fused kernels
share across the plan (plan_share): same values as evaluating the trees node by node, each
distinct subtree computed once, temporaries reused, kept values never overwritten."""
import random

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy.kernels import compile_tree
from luminal_fn.backends.numpy.tree_program import compile_program, compact_view
from luminal_fn.ir.view import View
from luminal_fn.ir.llir import quotient

F = "float32"


def _in(k):
    return ("in", k)


def _c(v):
    return ("const", v, F)


def _op(tag, *kids):
    return (tag, F) + kids


SHAPES = [(4, 5), (4, 1), (1, 5)]  # compact shapes of the arguments (two are broadcast)


def _args(rng):
    return [(rng.standard_normal(s) * 0.7 + 1.5).astype(np.float32) for s in SHAPES]


def _node_by_node(tree, args):
    full = np.broadcast_shapes(*SHAPES)
    fn = compile_tree(tree, lambda dims: full)
    with np.errstate(all="ignore"):
        return np.broadcast_to(fn([np.broadcast_to(a, full) for a in args], {}), full)


def _random_tree(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        return _in(rng.randrange(3)) if rng.random() < 0.8 else _c(rng.choice([0.5, -1.0, 2.0]))
    tag = rng.choice(["Add", "Mul", "Mul", "Add", "Exp2", "Sqrt", "Recip", "np.tanh", "Sin"])
    if tag in ("Add", "Mul"):
        a = _random_tree(rng, depth - 1)
        b = a if rng.random() < 0.3 else _random_tree(rng, depth - 1)  # repeated subtrees
        return _op(tag, a, b)
    return _op(tag, _random_tree(rng, depth - 1))


@pytest.mark.parametrize("seed", range(40))
def test_programs_match_node_by_node_bit_for_bit(seed):
    rng = random.Random(seed)
    tree = _random_tree(rng, 5)
    prog = compile_program(tree, SHAPES, [lf.float32] * 3, F)
    assert prog is not None
    args = _args(np.random.default_rng(seed))
    with np.errstate(all="ignore"):
        got = np.broadcast_to(prog(*args), np.broadcast_shapes(*SHAPES))
    np.testing.assert_array_equal(got, _node_by_node(tree, args))  # NaN == NaN here


_UFUNCS = {"Add": np.add, "Mul": np.multiply, "Exp2": np.exp2, "Sqrt": np.sqrt,
           "Recip": np.reciprocal, "np.tanh": np.tanh, "Sin": np.sin}


def _plain_eval(tree, args):
    """The tree evaluated by hand, every occurrence of a subtree on its own (no sharing, no
    in-place writes): the reference for compile_tree's memoised subtrees."""
    if tree[0] == "in":
        return args[tree[1]]
    if tree[0] == "const":
        return np.float32(tree[1])
    q = quotient(tree)  # a * recip(b) is one division (NumPy's divide)
    if q is not None:
        return np.divide(_plain_eval(q[0], args), _plain_eval(q[1], args))
    return _UFUNCS[tree[0]](*(_plain_eval(t, args) for t in tree[2:]))


@pytest.mark.parametrize("seed", range(40))
def test_node_by_node_trees_compute_repeated_subtrees_once_and_right(seed):
    """compile_tree memoises a subtree that occurs more than once in a call, and never writes
    in place into such a value (another reader still needs it)."""
    rng = random.Random(100 + seed)
    tree = _random_tree(rng, 6)
    full = np.broadcast_shapes(*SHAPES)
    args = [np.broadcast_to(a, full) for a in _args(np.random.default_rng(seed))]
    fn = compile_tree(tree, lambda dims: full)
    with np.errstate(all="ignore"):
        want = np.broadcast_to(_plain_eval(tree, args), full)
        np.testing.assert_array_equal(np.broadcast_to(fn(args, {}), full), want)
        np.testing.assert_array_equal(np.broadcast_to(fn(args, {}), full), want)  # a second call


def test_an_index_normalised_many_times_is_computed_once_per_call():
    i32 = "int32"
    x = ("in", 0)
    wrapped = ("Add", i32, x, ("Mul", i32, ("Cast", i32, ("LessThan", "bool", x, ("const", 0, i32))),
                                ("const", 512, i32)))  # x + (x < 0) * 512, as a cache index
    tree = ("Add", i32, ("Mul", i32, wrapped, ("const", 32, i32)),
            ("Mul", i32, ("Add", i32, wrapped, ("const", 1, i32)), wrapped))
    calls = []
    real_less = np.less

    xs = np.array([-3, 0, 5, -512, 7], np.int32)
    w = np.where(xs < 0, xs + 512, xs)
    fn = compile_tree(tree, lambda dims: xs.shape)
    np.testing.assert_array_equal(fn([xs], {}), w * 32 + (w + 1) * w)
    try:  # the comparison inside `wrapped` runs once a call, not three times
        np.less = lambda *a: calls.append(1) or real_less(*a)
        fn2 = compile_tree(tree, lambda dims: xs.shape)
        np.testing.assert_array_equal(fn2([xs], {}), w * 32 + (w + 1) * w)
    finally:
        np.less = real_less
    assert len(calls) == 1, calls


def test_repeated_subtrees_are_computed_once_and_buffers_reused():
    u = _op("Add", _in(0), _in(2))
    cube = _op("Mul", _op("Mul", _op("Mul", _c(0.044715), u), u), u)
    gelu = _op("Mul", _op("Mul", _c(0.5), u),
               _op("Add", _c(1.0), _op("np.tanh", _op("Mul", _c(0.8), _op("Add", u, cube)))))
    prog = compile_program(gelu, SHAPES, [lf.float32] * 3, F)
    assert prog.source.count("add(a0, a2, out=") == 1, prog.source
    # 10 operations, three values live at once at most (u, 0.5 * u, the cube): three buffers,
    # written in place by all ten operations
    assert prog.buffer_shapes == ((4, 5),) * 3, prog.source
    assert prog.root_buffer is not None and prog.kept_buffers == ()
    args = _args(np.random.default_rng(0))
    x = args[0].astype(np.float64) + args[2]
    ref = 0.5 * x * (1 + np.tanh(0.8 * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(prog(*args), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(prog(*args), _node_by_node(gelu, args))


def test_buffers_passed_in_are_written_instead_of_allocated():
    u = _op("Add", _in(0), _in(2))
    tree = _op("Mul", _op("np.tanh", u), _op("Mul", _c(0.5), u))
    prog = compile_program(tree, SHAPES, [lf.float32] * 3, F)
    args = _args(np.random.default_rng(3))
    expected = prog(*args)  # buffers allocated by the program
    bufs = [np.full(s, np.nan, np.float32) for s in prog.buffer_shapes]
    out = prog(*args, *bufs)
    assert out is bufs[prog.root_buffer]  # the root lands in the caller's buffer
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(prog(*args, *bufs), expected)  # and again, over stale contents


def test_broadcast_inputs_are_computed_at_their_compact_shape():
    # x * recip(sqrt(var)), evaluated x / sqrt(var): the square root runs on (4, 1), not (4, 5)
    tree = _op("Mul", _in(0), _op("Recip", _op("Sqrt", _in(1))))
    prog = compile_program(tree, SHAPES[:2], [lf.float32] * 2, F)
    assert prog.root_shape == (4, 5)
    args = _args(np.random.default_rng(1))[:2]
    np.testing.assert_array_equal(prog(*args), args[0] / np.sqrt(args[1]))
    assert "sqrt(a1" in prog.source and "divide(" in prog.source
    view = View((4, 5), (1, 0), 0, None)  # a (4,) buffer broadcast along the last axis
    assert compact_view(view, (4,)) == ((4, 1), (1, 0), 0)
    assert compact_view(View((4, 5), (1, 0), 0, ((0, 2), (0, 5))), (4,)) is None  # masked


def test_kept_values_survive_later_in_place_work():
    d = _op("Add", _in(0), _op("Mul", _in(1), _c(-1.0)))
    sq = _op("Mul", d, d)
    tree = _op("Mul", _op("Add", sq, _c(1.0)), _c(2.0))  # d dies at sq: in-place candidates
    prog = compile_program(tree, SHAPES[:2], [lf.float32] * 2, F, keep=[d])
    args = _args(np.random.default_rng(2))[:2]
    root, kept = prog(*args)
    np.testing.assert_array_equal(kept, args[0] - args[1])
    np.testing.assert_array_equal(root, ((args[0] - args[1]) ** 2 + 1) * 2)


def test_half_precision_gathers_and_padding_keep_the_node_by_node_path():
    assert compile_program(_op("Add", _in(0), _in(1)), SHAPES[:2], [lf.float32, lf.float16], F) is None
    assert compile_program(("Add", "int32", _in(0), _in(1)), SHAPES[:2], [lf.int32, lf.float32], "int32") is None
    assert compile_program(("Gather", F, 0, ("in", 1)), SHAPES[:2], [lf.float32, lf.int32], F) is None
    assert compact_view(View.contiguous((4, 5)).pad(0, 1, 0), (4, 5)) is None
    # a mask that keeps every element is no padding
    full = View((4, 5), (5, 1), 0, ((0, 4), (0, 5)))
    assert compact_view(full, (4, 5)) == ((4, 5), (5, 1), 0)


# typed random trees over float32 / int32 / bool: comparisons, casts, selects, fmod
_TYPED_IN = {"float32": (0, 1), "int32": (2,), "bool": (3,)}
_MIXED_DTYPES = [lf.float32, lf.float32, lf.int32, lf.bool_]


def _typed_tree(rng, d, depth):
    if depth == 0 or rng.random() < 0.15:
        if rng.random() < 0.75:
            return _in(rng.choice(_TYPED_IN[d]))
        v = {"float32": rng.choice([0.0, 0.5, -1.0, 2.5, 1e30]), "int32": rng.choice([0, 1, -3, 7]),
             "bool": rng.choice([True, False])}[d]
        return ("const", v, d)
    sub = lambda dd: _typed_tree(rng, dd, depth - 1)  # noqa: E731
    if d == "bool":
        choice = rng.choice(["LessThan", "LessThanI", "Cast", "Add", "Mul", "Select"])
        if choice == "LessThan":
            return ("LessThan", "bool", sub("float32"), sub("float32"))
        if choice == "LessThanI":
            return ("LessThan", "bool", sub("int32"), sub("int32"))
        if choice == "Cast":
            return ("Cast", "bool", sub(rng.choice(["float32", "int32"])))
    elif d == "int32":
        choice = rng.choice(["Add", "Mul", "Mod", "Cast", "Select"])
        if choice == "Cast":
            return ("Cast", "int32", sub(rng.choice(["float32", "bool"])))
    else:
        choice = rng.choice(["Add", "Mul", "Mod", "Cast", "Select", "Sqrt", "Recip", "Sin"])
        if choice == "Cast":
            return ("Cast", "float32", sub(rng.choice(["int32", "bool"])))
        if choice in ("Sqrt", "Recip", "Sin"):
            return (choice, d, sub(d))
    if choice == "Select":
        return ("Select", d, sub("bool"), sub(d), sub(d))
    a = sub(d)
    return (choice, d, a, a if rng.random() < 0.3 else sub(d))


@pytest.mark.parametrize("seed", range(60))
def test_mixed_dtype_programs_match_node_by_node_bit_for_bit(seed):
    rng = random.Random(seed)
    root = rng.choice(["float32", "int32", "bool"])
    tree = _typed_tree(rng, root, 5)
    shapes = [(4, 5), (4, 1), (1, 5), (4, 5)]
    prog = compile_program(tree, shapes, _MIXED_DTYPES, root)
    assert prog is not None, tree
    g = np.random.default_rng(seed)
    args = [(g.standard_normal(shapes[0]) * 4).astype(np.float32),
            np.array([[np.nan], [np.inf], [-0.0], [3.7e9]], np.float32),
            g.integers(-5, 6, shapes[2]).astype(np.int32), g.random(shapes[3]) < 0.5]
    full = (4, 5)
    ref_fn = compile_tree(tree, lambda dims: full)
    with np.errstate(all="ignore"):
        ref = np.broadcast_to(ref_fn([np.broadcast_to(a, full) for a in args], {}), full)
        got = np.broadcast_to(prog(*args), full)
    assert got.dtype == ref.dtype == np.dtype(root)
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(ref).view(np.uint8))


def _plan(fn, *args):
    jf = lf.jit(fn, backend="numpy", search=lf.SearchOptions(limit=1, cache=False, progress=False))
    out = np.asarray(jf(*args))
    (compiled,) = jf.compiled()
    (plan,) = compiled.runner.plans.values()
    return out, plan.executable.plan


def _count(tree, tags):
    if tree[0] in ("in", "const"):
        return 0
    return (tree[0] in tags) + sum(_count(t, tags) for t in tree[2:])


def test_layer_norm_and_softmax_share_values_across_kernels():
    rng = np.random.default_rng(3)
    x, r = rng.standard_normal((2, 8, 16)).astype(np.float32), rng.standard_normal((2, 8, 16)).astype(np.float32)

    def f(x, r):
        h = x + r
        mu = lnp.mean(h, axis=-1, keepdims=True)
        var = lnp.mean((h - mu) * (h - mu), axis=-1, keepdims=True)
        n = (h - mu) / lnp.sqrt(var + 1e-5)
        e = lnp.exp(n - lnp.max(n, axis=-1, keepdims=True))
        return e / lnp.sum(e, axis=-1, keepdims=True)

    out, plan = _plan(f, x, r)
    h = x.astype(np.float64) + r
    n = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    e = np.exp(n - n.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=2e-5, atol=1e-6)
    trees = [n.attrs["expr"] for n in plan.nodes if n.op == "CustomOp" and "expr" in n.attrs]
    assert sum(_count(t, ("Exp2", "np.exp")) for t in trees) == 1, trees  # exp once, not twice
    # every kernel reads only values that exist by its turn in the plan
    done = set(plan.inputs)
    for nid, _step, _into, _free in plan.steps:
        node = next(n for n in plan.nodes if n.id == nid)
        assert all(i in done for i, _ in node.inputs), (nid, node.inputs)
        done.add(nid)
        done.update(vid for _, vid in node.attrs.get("_stash", ()))


def test_a_shared_reciprocal_is_not_read_back_into_a_division():
    """x / y in one kernel and (x - fmod(x, y)) / y in the next share the subtree 1 / y, but a
    division reading 1 / y back multiplies by inf for a subnormal y: 0 / 1e-45 must stay 0."""
    x = np.array([[0.0, 1e-45, 1e-38, 5.0]], np.float32)
    y = np.full((1, 4), 1e-45, np.float32)
    for limit in (1, 8):
        jf = lf.jit(lnp.floor_divide, backend="numpy",
                    search=lf.SearchOptions(limit=limit, cache=False, progress=False))
        np.testing.assert_array_equal(np.asarray(jf(x, y)), np.floor_divide(x, y))


def test_cached_programs_tell_negative_zero_literals_apart():
    """Tree programs and rewrites are cached by the tree's value across plans; 0.0 == -0.0 as
    tuples, so the cache key must carry the literal's sign (1 / -0.0 is -inf)."""
    from luminal_fn.backends.numpy.tree_cache import value_key
    from luminal_fn.backends.numpy.tree_peephole import rewrite
    from luminal_fn.ir import dtypes as dt

    def tree(zero):
        return ("Recip", "float32", ("Add", "float32", ("in", 0), ("const", zero, "float32")))

    assert value_key(tree(0.0)) != value_key(tree(-0.0))
    assert value_key(tree(0.0)) == value_key(tree(0.0))
    assert value_key(("const", 1, "int32")) != value_key(("const", 1.0, "int32"))
    for zero, want in ((-0.0, -np.inf), (0.0, np.inf), (-0.0, -np.inf)):
        t = rewrite(tree(zero))
        fn = compile_program(t, [(3,)], [dt.float32], "float32")
        np.testing.assert_array_equal(fn(np.full(3, -0.0, np.float32)), np.full(3, want, np.float32))
    assert rewrite(tree(0.0)) is rewrite(tree(0.0))  # a hit: the same rewritten object


def test_cache_key_of_a_deeply_shared_tree_is_flat():
    """x = x * x sixty times is 61 distinct nodes but 2^60 as a tree: the cache key lists each
    distinct node once, so hashing and comparing it never walks the tree (lcm's search took 236 s
    with nested tuples as keys)."""
    from luminal_fn.backends.numpy.tree_cache import value_key
    from luminal_fn.backends.numpy.tree_peephole import rewrite

    def deep():
        t = ("in", 0)
        for _ in range(60):
            t = ("Mul", "float32", t, t)
        return t

    key = value_key(deep())
    assert len(key) == 61 and key == value_key(deep()) and hash(key) == hash(value_key(deep()))
    assert rewrite(deep())[0] == "Mul"

"""Joins keep every element as it is, -0.0 included, on every backend and in every genome the
search may pick: concatenate, stack, roll, hstack / vstack, where's stacked halves. The front end
writes a join as an Add of zero-padded pieces, and -0.0 + 0.0 is +0.0; the extraction writes each
such Add as a select on the position (optimize/exact_joins.py). The reference is NumPy itself,
compared bit for bit (signs of zeros included; NaN as NaN)."""
import importlib.util
import random

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.exact_joins import join_tree
from luminal_fn.optimize.extract import Extractor
from luminal_fn.ir.view import View

A = np.array([-0.0, 0.5, np.nan, -0.0, 3.0, -2.0], np.float32)
B = np.array([0.0, -0.0, -1.0, np.inf, -0.0, 7.0], np.float32)
M = np.array([[-0.0, 1.0, -0.0], [2.0, -0.0, np.nan]], np.float32)

CASES = {
    "concatenate": (lambda a, b, m: lnp.concatenate([a, b]), lambda a, b, m: np.concatenate([a, b])),
    "concatenate_3": (lambda a, b, m: lnp.concatenate([a, b[:2], a]), lambda a, b, m: np.concatenate([a, b[:2], a])),
    "concatenate_negated": (lambda a, b, m: lnp.concatenate([-a, b]), lambda a, b, m: np.concatenate([-a, b])),
    "concatenate_axis0": (lambda a, b, m: lnp.concatenate([m, -m], axis=0),
                          lambda a, b, m: np.concatenate([m, -m], axis=0)),
    "concatenate_axis1": (lambda a, b, m: lnp.concatenate([m, m[:, :1], -m], axis=1),
                          lambda a, b, m: np.concatenate([m, m[:, :1], -m], axis=1)),
    "stack": (lambda a, b, m: lnp.stack([a, b], axis=1), lambda a, b, m: np.stack([a, b], axis=1)),
    "roll": (lambda a, b, m: lnp.roll(a, 2), lambda a, b, m: np.roll(a, 2)),
    "roll_2d": (lambda a, b, m: lnp.roll(m, 1, axis=1), lambda a, b, m: np.roll(m, 1, axis=1)),
    "vstack": (lambda a, b, m: lnp.vstack([a, b]), lambda a, b, m: np.vstack([a, b])),
    "padded_join": (lambda a, b, m: lnp.pad(lnp.concatenate([-a, b]), 2),
                    lambda a, b, m: np.pad(np.concatenate([-a, b]), 2)),
    "where_1d": (lambda a, b, m: lnp.where(a < 1, a, b), lambda a, b, m: np.where(a < 1, a, b)),
}


def _backends():
    out = ["numpy"]
    if importlib.util.find_spec("mlx") is not None:
        out.append("mlx")
    return out + [pytest.param("cuda", marks=pytest.mark.gpu)]


def _same_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, NumPy's {want.shape}"
    np.testing.assert_array_equal(got, want, err_msg=what)
    num = ~np.isnan(want)  # (a NaN's sign bit is no value: x * -1 keeps it on x86, np.negative flips it)
    assert (np.signbit(got[num]) == np.signbit(want[num])).all(), f"{what}: {got} against NumPy's {want}"


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", list(CASES))
def test_joins_keep_every_element_in_every_genome(backend, name):
    fn, ref = CASES[name]
    want = ref(A, B, M)
    _same_bits(lf.jit(fn, backend=backend)(A, B, M), want, f"{name} on {backend} (searched)")
    be = get_backend(backend)
    hlir = lf.jit(fn).trace(A, B, M).hlir
    ex = Extractor(build_egraph(hlir), hlir, kernel_kinds=be.kernel_kinds)
    rng = random.Random(5)
    genomes = [None] + [tuple(rng.randrange(g.n_options) for g in ex.genes) for _ in range(12)]
    for j, genome in enumerate(genomes):
        exe = be.compile(ex.extract(genome))
        (out,) = exe.run([be.from_numpy(x) for x in (A, B, M)], {})
        _same_bits(be.to_numpy(out), want, f"{name} on {backend}, genome {j}")


def test_a_join_is_a_select_on_the_position_and_other_sums_stay_sums():
    x, y = ("in", 0), ("in", 1)
    add = ("Add", "float32", x, y)
    first, second = View.contiguous((4,)).pad(0, 0, 3), View.contiguous((3,)).pad(0, 4, 0)
    tree, piece = join_tree(add, [first, second])
    assert tree == ("Select", "float32", ("LessThan", "bool", ("iota", tree[2][2][1]), ("const", 4, "int32")), x, y)
    assert piece.box == ((0, 7),)
    assert join_tree(add, [second, first])[0][3:] == (y, x)  # the piece that comes first is taken first
    # overlapping pieces, a gap between them, an unpadded operand, an integer sum: sums
    overlap = View.contiguous((4,)).pad(0, 3, 0)
    gap = View.contiguous((2,)).pad(0, 5, 0)
    for views in ([first, overlap], [first, gap], [first, View.contiguous((7,))]):
        assert join_tree(add, views)[0] is add
    int_add = ("Add", "int32", x, y)
    assert join_tree(int_add, [first, second])[0] is int_add


@pytest.mark.parametrize("backend", _backends())
def test_joins_along_a_dynamic_axis(backend):
    """The position test reads the symbolic length: one compiled bucket, every length right."""
    f = lf.jit(lambda x, y: lnp.concatenate([-x, y, x]), dynamic_axes={"x": {0: "n"}}, backend=backend)
    g = lf.jit(lambda m: lnp.concatenate([m, -m], axis=1), dynamic_axes={"m": {0: "r", 1: "c"}}, backend=backend)
    for n in (1, 5, 9):
        x = np.resize(np.array([0.0, -0.0, 2.0, np.nan], np.float32), n)
        _same_bits(f(x, B), np.concatenate([-x, B, x]), f"x of {n} on {backend}")
    for r, c in ((2, 3), (3, 1)):
        m = np.resize(np.array([0.0, -0.0, 2.0, -1.0], np.float32), (r, c))
        _same_bits(g(m), np.concatenate([m, -m], axis=1), f"m of {r}x{c} on {backend}")


def _cpu_backends():
    return [b for b in _backends() if isinstance(b, str)]


@pytest.mark.parametrize("backend", _cpu_backends())
@pytest.mark.parametrize("pieces", [2, 3])
def test_cpu_backends_write_a_join_as_its_parts(monkeypatch, backend, pieces):
    """On NumPy and MLX's ops a join runs as np.concatenate's work (each input's part written
    once), not as a where over copies padded to the whole shape; three pieces are one join."""
    import importlib
    kernels = importlib.import_module(f"luminal_fn.backends.{backend}.kernels")  # (mlx only where installed)
    made, real = [], kernels._join_step
    monkeypatch.setattr(kernels, "_join_step", lambda *a: made.append(real(*a)) or made[-1])
    m = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0
    m[1, 1] = -0.0
    if pieces == 2:
        fn, ref = (lambda a, b: lnp.concatenate([a, b], axis=1)), (lambda a, b: np.concatenate([a, b], axis=1))
    else:
        fn, ref = (lambda a, b: lnp.concatenate([a, b[:1], a])), (lambda a, b: np.concatenate([a, b[:1], a]))
    f = lf.jit(fn, backend=backend, search=lf.SearchOptions(limit=1, cache=False))
    _same_bits(f(m, -m), ref(m, -m), f"concatenate of {pieces} on {backend}")
    assert any(step is not None for step in made), "the join ran as a select"


def _select_graph(tree, views, shapes, out_shape):
    from luminal_fn.ir import dtypes as dt
    from luminal_fn.ir.graph import Graph

    g = Graph("select")
    ids = [g.add("Input", (), shape, dt.float32, index=k, name=f"x{k}") for k, shape in enumerate(shapes)]
    s = g.add("CustomOp", tuple(zip(ids, views)), out_shape, dt.float32, name="fused", expr=tree)
    g.add("Output", ((s, View.contiguous(out_shape)),), out_shape, dt.float32, index=0)
    return g


@pytest.mark.parametrize("backend", _cpu_backends())
def test_a_select_on_the_position_is_exact_whatever_the_pieces(backend):
    """The join kernels read each input between its limits, so a select whose first piece
    reaches past its limit, or leaves a gap before it, is still the select's value; limits out
    of order (a nested select that never takes a piece) run as the select itself."""
    from luminal_fn.ir.expr import mod, var

    a = np.array([[1.0, -0.0, 3.0, 4.0], [-0.0, 2.0, 2.0, 2.0]], np.float32)
    b = np.array([[5.0, 6.0, -0.0], [7.0, -0.0, 8.0]], np.float32)
    padded_a, padded_b = np.pad(a, ((0, 0), (0, 3))), np.pad(b, ((0, 0), (4, 0)))
    views = [View.contiguous((2, 4)).pad(1, 0, 3), View.contiguous((2, 3)).pad(1, 4, 0)]
    position = ("iota", mod(var("z"), 7))  # the column of a (2, 7) result
    be = get_backend(backend)

    def less(k):
        return ("LessThan", "bool", position, ("const", k, "int32"))

    for k in (4, 2, 5, 0, 7):
        tree = ("Select", "float32", less(k), ("in", 0), ("in", 1))
        (out,) = be.compile(_select_graph(tree, views, [(2, 4), (2, 3)], (2, 7))).run(
            [be.from_numpy(a), be.from_numpy(b)], {})
        _same_bits(be.to_numpy(out), np.where(np.arange(7) < k, padded_a, padded_b), f"select at column {k}")
    for k1, k2 in ((2, 5), (5, 2)):  # where(p < k2, where(p < k1, a, b), a)
        tree = ("Select", "float32", less(k2), ("Select", "float32", less(k1), ("in", 0), ("in", 1)), ("in", 0))
        (out,) = be.compile(_select_graph(tree, views, [(2, 4), (2, 3)], (2, 7))).run(
            [be.from_numpy(a), be.from_numpy(b)], {})
        col = np.arange(7)
        want = np.where(col < k2, np.where(col < k1, padded_a, padded_b), padded_a)
        _same_bits(be.to_numpy(out), want, f"nested select at columns {k1}, {k2}")


def test_joins_of_constants_keep_negative_zero_when_folded():
    """A where of two literals, or a join of two constants, is folded while tracing: the fold
    reads the padded pieces' Add as the join (a -0.0 piece stays -0.0; NumPy's own sum would
    give +0.0), as the extraction does for computed pieces."""
    x = np.array([-1.0, 1.0, -2.0, 3.0], np.float32)
    want = np.where(x < 0, np.float32(0.0), np.float32(-0.0))
    for got in (lf.jit(lambda a: lnp.where(a < 0, 0.0, -0.0), backend="numpy")(x),
                lnp.where(x < 0, 0.0, -0.0)):
        assert np.array_equal(np.signbit(np.asarray(got)), np.signbit(want))
    joined = lf.jit(lambda a: lnp.concatenate([lnp.full((2,), -0.0, lnp.float32), lnp.zeros((2,), lnp.float32)]) + a * 0,
                    backend="numpy")(np.ones(4, np.float32))
    assert np.signbit(np.asarray(joined)).tolist() == [False] * 4  # (+ a * 0: -0.0 + 0.0 is +0.0, as in NumPy)
    folded = lf.jit(lambda a: lnp.concatenate([lnp.full((2,), -0.0, lnp.float32), lnp.zeros((2,), lnp.float32)]),
                    backend="numpy")(np.ones(4, np.float32))
    assert np.signbit(np.asarray(folded)).tolist() == [True, True, False, False]

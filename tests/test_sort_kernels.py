"""Sorting through the front end's named kernels (ir/composites.py): lnp.sort / argsort (and top_k,
median, quantile, partition, which sort) trace ranks that compare every pair of a row, and record
that the result is also sort_rows / argsort_rows of the row. Every backend runs its kernel and
nothing else for it (CUDA's: tests/test_cuda_sort.py); a backend without the kernel would keep
the ranks, the definition.

References: np.sort / np.argsort(kind="stable") for the ascending order, and for JAX's descending
order (the ascending one reversed, NaN first, ties in index order) a Python sort on
(NaN first, larger first, lower index first).
"""
import importlib.util

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.ir.passes import simplify
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

NUMPY = get_backend("numpy")
SORTS = {"sort_rows", "argsort_rows"}


def _kinds(llir) -> list:
    return [n.attrs.get("name", n.op) for n in llir.live_nodes()
            if n.op not in ("Input", "Output", "Constant")]


def _edge_rows(dtype, shape=(6, 9)) -> np.ndarray:
    """Rows with NaN, both zeros, ties, infinities and subnormals (as dtype allows)."""
    rng = np.random.default_rng(7)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype == np.int32:
        return rng.integers(-3, 4, shape).astype(np.int32)  # many ties
    x = rng.standard_normal(shape).astype(np.float32)
    rows = x.reshape(-1, 9)  # (a view: the last axis is 9 long)
    rows[0, :] = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, -0.0, 1.0]
    rows[1, [1, 4, 7]] = np.nan
    rows[2, :] = 2.5  # all tied
    rows[3, [0, 8]] = [np.inf, -np.inf]
    rows[4, [2, 3]] = [1e-40, -1e-40]
    rows[5, :] = np.nan
    return x.astype(dtype)


def _descending_order(row) -> list:
    """JAX's descending positions of one row: NaN first, then larger first, ties by index."""
    v = row.astype(np.float64) if row.dtype != np.bool_ else row.astype(np.int64)
    return sorted(range(len(v)), key=lambda i: (0 if v[i] != v[i] else 1, 0 if v[i] != v[i] else -v[i], i))


def _reference(x, descending):
    """(sorted values, positions) along the last axis."""
    if not descending:
        keys = x.astype(np.float32) if x.dtype == ml_dtypes.bfloat16 else x
        idx = np.argsort(keys, axis=-1, kind="stable")
    else:
        idx = np.array([_descending_order(r) for r in x.reshape(-1, x.shape[-1])]).reshape(x.shape)
    return np.take_along_axis(x, idx, -1), idx.astype(np.int32)


def _same(a, b) -> bool:
    """Equal bit for bit (NaN payloads and -0.0 included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _both(descending):
    return lambda a: (lnp.sort(a, descending=descending), lnp.argsort(a, descending=descending))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.bool_])
def test_sort_kernels_give_the_reference_order(dtype, descending):
    vals, idx, ref_vals, ref_idx = _sorted_by_kernels("numpy", dtype, descending)
    assert _same(idx, ref_idx), (np.asarray(idx), ref_idx)
    assert _same(vals, ref_vals)


def _sorted_by_kernels(backend, dtype, descending):
    """(values, positions) of the edge rows jitted on ``backend``, whose plan must hold both sort
    kernels and no rank Scatter, and the references'."""
    x = _edge_rows(dtype)
    f = lf.jit(_both(descending), backend=backend)
    text = f.lower(x).compile().as_text()
    assert "sort_rows" in text and "argsort_rows" in text and "Scatter" not in text, text
    return (*f(x), *_reference(x, descending))


@pytest.mark.parametrize("descending", [False, True])
def test_the_kernels_agree_with_the_ranks_they_replace(descending):
    """The primitive form (what a backend without the kernel runs) and the kernel, on one input."""
    x = _edge_rows(np.float32)
    traced = lf.jit(_both(descending)).trace(x)
    eg = build_egraph(traced.hlir)
    ranks = Extractor(eg, traced.hlir, kernel_kinds=frozenset()).extract()
    kernel = Extractor(eg, traced.hlir, kernel_kinds=NUMPY.kernel_kinds).extract()
    assert not SORTS & set(_kinds(ranks)) and "Scatter" in _kinds(ranks)
    assert sorted(SORTS) == sorted(set(_kinds(kernel)) & SORTS)
    by_ranks = NUMPY.compile(ranks).run([x], {})
    by_kernel = NUMPY.compile(kernel).run([x], {})
    for a, b in zip(by_ranks, by_kernel):
        assert _same(a, b)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_axes_and_a_dynamic_dim(axis):
    x = _edge_rows(np.float32, (5, 4, 9))
    f = lf.jit(lambda a: (lnp.sort(a, axis=axis), lnp.argsort(a, axis=axis)), dynamic_axes={"a": {0: "b"}})
    for rows in (5, 3):
        vals, idx = f(x[:rows])
        assert _same(vals, np.sort(x[:rows], axis=axis, kind="stable"))  # (which zero comes first)
        assert _same(idx, np.argsort(x[:rows], axis=axis, kind="stable").astype(np.int32))


def test_functions_that_sort_use_the_kernel():
    x = np.random.default_rng(3).standard_normal((4, 50)).astype(np.float32)
    cases = {
        "top_k": (lambda a: lnp.top_k(a, 5), None),
        "median": (lambda a: lnp.median(a, axis=-1), np.median(x, axis=-1)),
        "quantile": (lambda a: lnp.quantile(a, 0.3, axis=-1), np.quantile(x, 0.3, axis=-1)),
        "partition": (lambda a: lnp.partition(a, 7, axis=-1)[..., 7], np.partition(x, 7, axis=-1)[..., 7]),
    }
    for name, (fn, ref) in cases.items():
        f = lf.jit(fn, backend="numpy")
        text = f.lower(x).compile().as_text()
        sorts = ("top_k_rows",) if name == "top_k" else ("sort_rows",)  # (one sort each; top_k's partitions)
        assert [k for k in ("sort_rows", "top_k_rows") if k in text] == list(sorts), (name, text)
        assert text.count(sorts[0]) == 1 and "Scatter" not in text, (name, text)
        got = f(x)
        if name == "top_k":
            order = np.array([_descending_order(r) for r in x])[:, :5]
            assert _same(got[1], order.astype(np.int32)) and _same(got[0], np.take_along_axis(x, order, -1))
        else:
            np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize("k", [0, 1, 4, 9])
def test_top_k_gathers_by_one_argsort(dtype, k):
    """top_k is one descending argsort and a gather of its k first positions: the values are x's
    own (bit for bit: NaN payloads, which zero), in JAX's order; a dynamic leading dim too."""
    x = _edge_rows(dtype, (4, 3, 9))
    f = lf.jit(lambda a: lnp.top_k(a, k), dynamic_axes={"a": {0: "b"}}, backend="numpy")
    for rows in (4, 2):
        part = x[:rows]
        vals, idx = f(part)
        order = np.array([_descending_order(r) for r in part.reshape(-1, 9)]).reshape(part.shape)[..., :k]
        assert _same(idx, order.astype(np.int32))
        assert _same(vals, np.take_along_axis(part, order, -1))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.bool_])
def test_the_numpy_top_k_kernel_partitions_to_the_sorts_first_k(dtype):
    """backends/numpy/sort_kernels.py's top_k_order (a partition of int32 words, then 64-bit keys
    for the elements at or before each row's k-th) against the whole sort's first k: rows where
    the k-th value ties many times, rows all one value, NaN rows; float64 takes the whole sort."""
    from luminal_fn.backends.numpy.sort_kernels import row_order, top_k_order

    rng = np.random.default_rng(11)
    x = rng.standard_normal((7, 300)).astype(np.float32)
    x[0, ::2] = 1.0
    x[1, :] = 2.5
    x[2, ::3] = np.nan
    x[3, ::4] = -0.0
    x[4] = np.round(x[4])
    if dtype == np.int32:  # (the NaN row: the extremes)
        x = np.where(np.isnan(x), -2 ** 31, np.where(x > 1.5, 2 ** 31 - 1, np.nan_to_num(x).astype(np.int32)))
    x = x.astype(dtype) if dtype != np.bool_ else x > 0
    for k in (1, 2, 37, 150, 299):
        assert np.array_equal(top_k_order(x, k), row_order(x, True)[:, :k]), k
        assert np.array_equal(top_k_order(x.reshape(7, 3, 100), k % 100 or 1),
                              row_order(x.reshape(7, 3, 100), True)[..., :k % 100 or 1]), k


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_int32_extremes_sort_in_place(backend):
    """INT32_MIN's descending key once overflowed (its negation shifted by 32) and sorted first."""
    if backend == "mlx" and importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx is not installed: the MLX backend cannot run")
    x = np.int32([[3, -2 ** 31, 5, 0, 2 ** 31 - 1, -2 ** 31, -1], [-2 ** 31] * 3 + [2 ** 31 - 1] * 4])
    f = lf.jit(lambda a: (lnp.sort(a, descending=True), lnp.argsort(a, descending=True), lnp.top_k(a, 3)[1],
                          lnp.sort(a)), backend=backend)
    vals, idx, top, up = f(x)
    order = np.array([_descending_order(r) for r in x])
    assert _same(idx, order.astype(np.int32)) and _same(vals, np.take_along_axis(x, order, -1))
    assert _same(top, order[:, :3].astype(np.int32)) and _same(up, np.sort(x, axis=-1))


def test_a_row_too_long_for_ranks():
    """200000 elements: the ranks would compare 4e10 pairs (far past this machine's memory on
    the NumPy backend); the kernel sorts them as np.sort does."""
    x = np.random.default_rng(5).standard_normal(200_000).astype(np.float32)
    x[::997] = np.nan
    f = lf.jit(lambda a: (lnp.sort(a), lnp.argsort(a, descending=True)), backend="numpy")
    vals, idx = f(x)
    assert _same(vals, np.sort(x, kind="stable"))
    i = np.asarray(idx)
    nan_first = np.isnan(x[i[: np.isnan(x).sum()]]).all()
    rest = x[i[np.isnan(x).sum():]]
    assert nan_first and np.all(rest[:-1] >= rest[1:]) and sorted(i.tolist()) == list(range(x.size))


def test_the_composite_survives_the_graph_passes_and_prints():
    x = np.zeros((3, 4), np.float32)
    traced = lf.jit(lambda a: lnp.sort(a * 1.0 + 0.0)).trace(x)  # (identities folded away)
    g = simplify(traced.hlir)
    (c,) = g.composites
    assert c.name == "sort_rows" and c.params == (3, 4, 0)
    assert g.nodes[c.node].op == "Scatter" and g.nodes[c.inputs[0][0]].op == "Input"
    assert "is sort_rows(%0) params [3, 4, 0]" in g.as_text()
    twice = lf.jit(lambda a: (lnp.sort(a), lnp.sort(a))).trace(x).hlir
    assert len(twice.composites) == 1  # (the second sort is the first node again)


def test_other_sort_functions_keep_their_values():
    """A user's own rank sort (the same primitives, no composite) is left to its primitives."""
    x = _edge_rows(np.float32)

    def ranks_by_hand(a):
        before = lnp.less(a[:, None, :], a[:, :, None])
        return lnp.sum(before.astype(lnp.int32), axis=-1)

    f = lf.jit(ranks_by_hand, backend="numpy")
    assert "sort_rows" not in f.lower(x).compile().as_text()
    with np.errstate(invalid="ignore"):
        ref = np.sum(x[:, None, :] < x[:, :, None], axis=-1).astype(np.int32)
    assert _same(f(x), ref)


@pytest.mark.skipif(importlib.util.find_spec("mlx") is None, reason="mlx is not installed: the MLX backend cannot run")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.bool_])
def test_mlx_sort_kernels(dtype, descending):
    vals, idx, ref_vals, ref_idx = _sorted_by_kernels("mlx", dtype, descending)
    assert _same(idx, ref_idx)
    v = np.asarray(vals)
    if dtype in (np.float32, ml_dtypes.bfloat16):  # (MLX may return another NaN's payload)
        assert _same(np.isnan(v.astype(np.float32)), np.isnan(ref_vals.astype(np.float32)))
        v, ref_vals = np.nan_to_num(v.astype(np.float32)), np.nan_to_num(ref_vals.astype(np.float32))
        assert _same(np.signbit(v), np.signbit(ref_vals))
    assert _same(v, ref_vals)


def test_eager_sorts_run_the_kernel():
    """Outside jit each call is traced alone and run on the NumPy backend without the optimizer:
    the composite is run as its kernel there too (the ranks of 20000 took 131 s here)."""
    x = np.random.default_rng(9).standard_normal(50_000).astype(np.float32)
    assert _same(lnp.sort(x), np.sort(x, kind="stable"))
    assert _same(lnp.argsort(x), np.argsort(x, kind="stable").astype(np.int32))
    assert float(lnp.median(x)) == float(np.median(x))
    g = lf.jit(lambda a: lnp.sort(a) + 1.0).trace(x[:5]).hlir
    from luminal_fn.ir.passes import use_composites
    used = use_composites(g, {"sort_rows"})
    assert [n.attrs.get("name") for n in used.live_nodes() if n.op == "CustomOp"] == ["sort_rows"]
    assert not used.composites and "Scatter" not in used.as_text()
    assert use_composites(g, set()) is g

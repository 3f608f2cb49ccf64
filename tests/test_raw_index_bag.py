"""Issue 7: embedding_bag kernels that take lnp.take's RAW indices and normalise them inside
(clip(i + (i < 0) * R, 0, R - 1)), recognised by the NormRows facts of specialize_models.egg
through the ConstInt literals encode.py adds. Checked: the rule fires with R = the table's rows,
the NumPy kernel with R matches a NumPy reference on negative and out-of-range indices, and every
genome of a jitted embedding_bag computes the reference."""
from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.backends.numpy import KERNELS, NumpyBackend
from luminal_fn.ir import dtypes as dt
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

pytest.importorskip("egglog.bindings")
from test_models import holds, result_id, saturate  # noqa: E402

R = np.random.default_rng(3)


def ref_bag(table, idx):
    n = len(table)
    pos = np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1)
    return table.astype(np.float64)[pos].sum(axis=1)


def test_rule_offers_the_raw_index_kernel_with_the_row_count():
    t = R.standard_normal((10, 4)).astype(np.float32)
    i = np.array([[1, -2, 3], [4, 5, 12]], np.int32)
    g, eg = saturate(lambda t, i: lf.nn.embedding_bag(t, i), t, i, iterations=6)
    out = result_id(g)
    assert holds(eg, "(NormRows r x 10 n)")
    assert not holds(eg, "(NormRows r x 9 n)") and not holds(eg, "(NormRows r x 11 n)")
    raw = f'(= (NodeOf {out}) (Kernel "embedding_bag" (ICons (Inp 0) (ICons x (ICons s (INil)))) ' \
          '(ECons b (ECons (MNum 3) (ECons (MNum 4) (ECons (MNum 10) (ENil)))))))'
    assert holds(eg, raw)


def test_numpy_kernel_normalises_raw_indices_like_take():
    rows, dim, bsz, bag = 7, 3, 5, 4
    table = R.standard_normal((rows, dim)).astype(np.float32)
    idx = R.integers(-2 * rows, 2 * rows, (bsz, bag)).astype(np.int32)
    node = SimpleNamespace(attrs={"name": "embedding_bag", "params": (bsz, bag, dim, rows)},
                           dtype=dt.float32, id=0)
    ins = [table, idx.reshape(-1), np.array([dim], np.int32)]
    readers = [(lambda j: (lambda vals, dims: vals[j]))(j) for j in range(3)]
    got = KERNELS["embedding_bag"](node, readers)(ins, {})
    np.testing.assert_allclose(got, ref_bag(table, idx), rtol=1e-5, atol=1e-5)


def test_every_genome_of_a_bag_with_wild_indices_computes_the_reference():
    table = R.standard_normal((9, 4)).astype(np.float32)
    idx = np.array([[0, -1, -9, -20], [8, 9, 30, -3], [4, 4, -4, 2]], np.int32)
    fn = lambda t, i: lf.nn.embedding_bag(t, i) * 2.0  # noqa: E731
    graph = lf.jit(fn).trace(table, idx).hlir
    be = NumpyBackend()
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=be.kernel_kinds)
    rnd = random.Random(0)
    want = 2.0 * ref_bag(table, idx)
    raw_used = False
    for t in range(20):
        genome = None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes)
        ll = ex.extract(genome)
        raw_used |= any(n.op == "CustomOp" and n.attrs.get("name") == "embedding_bag"
                        and len(n.attrs.get("params", ())) == 4 for n in ll.live_nodes())
        got = be.compile(ll).run([table, idx], {})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"genome {genome}")
    assert raw_used

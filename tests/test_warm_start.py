"""A second start served from the search cache: the extracted LLIR is stored with each entry, so a
new process whose every bucket is cached compiles without building the e-graph, and computes what
the first did. Entries without a usable LLIR (older, corrupt, or from other code) fall back to
the stored genome. Also the graph bytes themselves (ir/serialize.py): a round trip, and refusals.

Each "process" here is a new ``lf.jit`` of the same function: a new trace and Lowered stage with
nothing in memory from the first, reading the same cache folder.
"""
import base64
import json
import pickle
import zlib

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.ir.serialize import GraphFormatError, graph_from_bytes, graph_to_bytes
from luminal_fn.optimize import cache as cache_mod
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

R = np.random.default_rng(5)
W1 = R.standard_normal((8, 16)).astype(np.float32)
W2 = R.standard_normal((16, 8)).astype(np.float32)
CONST = R.standard_normal(8).astype(np.float32)  # closed over: a Constant node holding an array


def block(x, w1, w2):
    h = lf.nn.silu(x @ w1)
    return lf.nn.rms_norm(h @ w2 + x, CONST, eps=1e-5)


def block_ref(x, w1, w2):
    h = x.astype(np.float64) @ w1
    h = h / (1 + np.exp(-h))
    y = h @ w2 + x
    return y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-5) * CONST


AXES = {"x": {0: "s"}}
BUCKETS = {"s": [(1, 1), (2, 32, 8)]}


def _jit(tmp_path, **kw):
    return lf.jit(block, dynamic_axes=AXES, buckets=BUCKETS,
                  search=lf.SearchOptions(limit=5, cache_dir=str(tmp_path), progress=False), **kw)


def _run(jf, sizes=(1, 5, 32)):
    for s in sizes:
        x = R.standard_normal((s, 8)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(jf(x, W1, W2)), block_ref(x, W1, W2), rtol=2e-4,
                                   atol=2e-4, err_msg=f"s = {s}")
    (compiled,) = jf.compiled()
    return compiled


def _entries(tmp_path):
    paths = sorted((tmp_path / "search").glob("*.json"))
    assert len(paths) == 2, "one entry a bucket"
    return paths


def test_a_second_start_needs_no_egraph(tmp_path):
    first = _run(_jit(tmp_path))
    assert first.lowered.egraph_built
    assert all(not c["cached"] for c in first.cost().values())
    for p in _entries(tmp_path):
        entry = json.loads(p.read_text())
        assert entry["llir"]["code"] == cache_mod.extraction_code_version()
    second = _run(_jit(tmp_path))
    assert not second.lowered.egraph_built  # every bucket's LLIR came from the cache
    assert all(c["cached"] for c in second.cost().values())
    # the same kernels as the search chose, bucket for bucket
    firsts = {k: p.llir.structural_hash() for k, p in first.runner.plans.items()}
    assert {k: p.llir.structural_hash() for k, p in second.runner.plans.items()} == firsts
    # the stage's views still work: they build the e-graph when asked
    assert second.lowered.stats()["enodes"] > 0 and second.lowered.egraph_built


def test_an_entry_without_its_llir_uses_the_genome_and_gains_the_llir(tmp_path):
    _run(_jit(tmp_path))
    for p in _entries(tmp_path):
        entry = json.loads(p.read_text())
        del entry["llir"]  # as an entry written before LLIRs were stored
        p.write_text(json.dumps(entry))
    second = _run(_jit(tmp_path))
    assert second.lowered.egraph_built  # the genome needs the e-graph to extract
    assert all(c["cached"] for c in second.cost().values())
    assert all("llir" in json.loads(p.read_text()) for p in _entries(tmp_path))
    assert not _run(_jit(tmp_path)).lowered.egraph_built


@pytest.mark.parametrize("damage", ["data", "code", "sha256"])
def test_a_damaged_or_foreign_llir_is_not_used(tmp_path, damage):
    _run(_jit(tmp_path))
    for p in _entries(tmp_path):
        entry = json.loads(p.read_text())
        if damage == "data":  # bytes that are not a graph, with a matching digest
            import hashlib
            junk = zlib.compress(pickle.dumps({"not": "a graph"}))
            entry["llir"]["data"] = base64.b64encode(junk).decode()
            entry["llir"]["sha256"] = hashlib.sha256(junk).hexdigest()
        elif damage == "code":  # extracted by another version of the optimizer
            entry["llir"]["code"] = "0" * 16
        else:
            entry["llir"]["sha256"] = "0" * 64
        p.write_text(json.dumps(entry))
    second = _run(_jit(tmp_path))  # right answers from the genome's extraction
    assert second.lowered.egraph_built
    assert all(c["cached"] for c in second.cost().values())


def test_a_stored_kernel_the_backend_no_longer_offers_is_extracted_again(tmp_path, monkeypatch):
    """A stored LLIR naming a kernel kind the backend has dropped (a later version of it) is
    not run: the genome is extracted again from the e-graph, with the kinds the backend has."""
    from luminal_fn.backends.numpy import NumpyBackend

    first = _run(_jit(tmp_path))
    used = {n.attrs.get("name") for p in first.runner.plans.values() for n in p.llir.live_nodes()
            if n.op == "CustomOp"} - {"fused", "fused_reduce", "matmul"}
    assert used, "the cached plans use a backend kernel (rms_norm_rows)"
    monkeypatch.setattr(NumpyBackend, "kernel_kinds", NumpyBackend.kernel_kinds - used)
    second = _run(_jit(tmp_path))
    assert second.lowered.egraph_built
    for p in second.runner.plans.values():
        assert not used & {n.attrs.get("name") for n in p.llir.live_nodes() if n.op == "CustomOp"}


def test_graph_bytes_round_trip_and_run():
    x = R.standard_normal((5, 8)).astype(np.float32)
    traced = lf.jit(block, dynamic_axes=AXES).trace(x, W1, W2)
    llir = Extractor(build_egraph(traced.hlir), traced.hlir).extract()
    back = graph_from_bytes(graph_to_bytes(llir))
    assert back.structural_hash() == llir.structural_hash()
    assert back.inputs == llir.inputs and back.outputs == llir.outputs
    be = get_backend("numpy")
    for s in (3, 7):
        xs = R.standard_normal((s, 8)).astype(np.float32)
        (got,) = be.compile(back).run([xs, W1, W2], {"s": s})
        np.testing.assert_allclose(got, block_ref(xs, W1, W2), rtol=2e-4, atol=2e-4)


class _Evil:
    def __reduce__(self):
        import os
        return (os.getcwd, ())


@pytest.mark.parametrize("data, match", [
    (zlib.compress(pickle.dumps(("g", [_Evil()], [], []))), "may not name"),
    (zlib.compress(pickle.dumps(("g", [], [], [3]))), "ids out of place"),
    (zlib.compress(pickle.dumps([1, 2]))[:-3], "not a stored graph"),
    (b"plain bytes", "not a stored graph"),
])
def test_bytes_that_are_not_a_graph_are_refused(data, match):
    with pytest.raises(GraphFormatError, match=match):
        graph_from_bytes(data)


def test_a_bucket_planned_at_its_first_call_is_served_from_the_cache_too(tmp_path):
    """A dim without a bucket spec is searched at the first call's value, inside that call: a
    second start plans it there from the cache, still without an e-graph."""
    def f(x):
        return lnp.exp(x) * 2.0 + 1.0

    def jitted():
        return lf.jit(f, dynamic_axes={"x": {0: "n"}},
                      search=lf.SearchOptions(limit=3, cache_dir=str(tmp_path), progress=False))

    x = R.standard_normal(6).astype(np.float32)
    jf = jitted()
    np.testing.assert_allclose(np.asarray(jf(x)), np.exp(x.astype(np.float64)) * 2 + 1, rtol=1e-6)
    jf2 = jitted()
    np.testing.assert_allclose(np.asarray(jf2(x)), np.exp(x.astype(np.float64)) * 2 + 1, rtol=1e-6)
    (compiled,) = jf2.compiled()
    assert not compiled.lowered.egraph_built

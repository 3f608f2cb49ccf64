"""The optimizer: e-graph build, rules, extraction of random genomes, search, buckets, cache.

Every extraction of a random genome must compute the same function: each is run on the NumPy
backend and compared with an independent NumPy computation (Luminal's search-equivalence fuzz).
"""
import json
import random

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.buckets import BucketError
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

F32 = np.float32
R = np.random.default_rng(7)


def _r(*shape):
    return R.standard_normal(shape).astype(F32)


# ---- graphs and their independent NumPy references ------------------------------------------------
def mlp(p, x):
    h = lnp.maximum(x @ p["w1"] + p["b1"], 0.0)
    return lf.nn.softmax(h @ p["w2"], axis=-1)


def mlp_ref(p, x):
    h = np.maximum(x.astype(np.float64) @ p["w1"] + p["b1"], 0)
    z = h @ p["w2"]
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention(q, k, v):
    s = q @ lnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return lf.nn.softmax(s, axis=-1) @ v


def attention_ref(q, k, v):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def layer_norm(x, g, b):
    mu = lnp.mean(x, axis=-1, keepdims=True)
    var = lnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / lnp.sqrt(var + 1e-5) * g + b


def layer_norm_ref(x, g, b):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


def conv_unfold(x, w):
    return lf.nn.conv2d(x, w, padding=1)


def conv_ref(x, w):
    c, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    out = np.zeros((w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[:, i:i + h, j:j + wd])
    return out


def gather_scatter(table, idx, upd):
    rows = lf.nn.gather_rows(table, idx)
    return lf.nn.scatter_rows(table, idx, rows * 2.0 + upd)


def gather_scatter_ref(table, idx, upd):
    out = table.astype(np.float64).copy()
    out[idx] = table[idx] * 2.0 + upd
    return out


CASES = {
    "mlp": (mlp, mlp_ref, lambda: ({"w1": _r(8, 16), "b1": _r(16), "w2": _r(16, 4)}, _r(3, 8))),
    "attention": (attention, attention_ref, lambda: (_r(2, 5, 8), _r(2, 6, 8), _r(2, 6, 8))),
    "softmax": (lambda x: lf.nn.softmax(x, axis=-1),
                lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
                lambda: (_r(4, 7),)),
    "layer_norm": (layer_norm, layer_norm_ref, lambda: (_r(3, 16), _r(16), _r(16))),
    "conv_unfold": (conv_unfold, conv_ref, lambda: (_r(2, 5, 5), _r(3, 2, 3, 3))),
    "gather_scatter": (gather_scatter, gather_scatter_ref,
                       lambda: (_r(6, 4), np.array([4, 0, 2], np.int32), _r(3, 4))),
}


def _flat(args):
    leaves = []
    for a in args:
        if isinstance(a, dict):
            leaves += [a[k] for k in sorted(a)]
        else:
            leaves.append(a)
    return leaves


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_random_genome_computes_the_function(name):
    fn, ref_fn, make = CASES[name]
    args = make()
    traced = lf.jit(fn).trace(*args)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    assert ex.genes, f"{name}: the rules offered no alternatives"
    be = get_backend("numpy")
    inputs = _flat(args)
    ref = ref_fn(*args)
    rng = random.Random(11)
    distinct = set()
    for _ in range(40):
        genome = tuple(rng.randrange(g.n_options) for g in ex.genes)
        llir = ex.extract(genome)
        distinct.add(llir.structural_hash())
        (out,) = be.compile(llir).run(inputs, {})
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5, err_msg=f"{name} genome {genome}")
    assert len(distinct) > 1, f"{name}: every genome extracted the same graph"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_genome_extracts_as_any_that_agrees_on_the_genes_read(name):
    """extract_reading names the genes a genome's extraction read: a genome that agrees there
    (whatever its other genes) extracts to the same graph, one that differs there may not."""
    fn, _, make = CASES[name]
    traced = lf.jit(fn).trace(*make())
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    rng = random.Random(5)
    unread_seen = False
    for _ in range(12):
        genome = tuple(rng.randrange(g.n_options) for g in ex.genes)
        llir, (idx, values) = ex.extract_reading(genome)
        assert values == tuple(genome[i] for i in idx) and list(idx) == sorted(set(idx))
        other = [rng.randrange(g.n_options) for g in ex.genes]  # random where not read
        for i in idx:
            other[i] = genome[i]
        unread_seen |= len(idx) < len(ex.genes)
        assert ex.extract(tuple(other)).structural_hash() == llir.structural_hash()
    assert unread_seen or name == "mlp", f"{name}: every extraction read every gene"


def test_the_search_does_not_extract_a_genome_that_agrees_on_the_genes_read(tmp_path):
    from luminal_fn.optimize.evaluate import CandidateEvaluator
    from luminal_fn.optimize.options import SearchOptions

    fn, _, make = CASES["attention"]
    args = make()
    traced = lf.jit(fn).trace(*args)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    rng = random.Random(2)
    for _ in range(50):  # a genome whose extraction leaves some gene unread
        genome = tuple(rng.randrange(g.n_options) for g in ex.genes)
        _, (idx, _) = ex.extract_reading(genome)
        unread = [i for i in range(len(ex.genes)) if i not in idx]
        if unread:
            break
    assert unread, "every extraction read every gene"
    calls = []
    real = ex.extract_reading
    ex.extract_reading = lambda g: calls.append(g) or real(g)
    ev = CandidateEvaluator(ex, get_backend("numpy"), SearchOptions(trials=1), {}, {}, _flat(args))
    t0 = ev(genome)
    mutant = list(genome)
    mutant[unread[0]] = (genome[unread[0]] + 1) % ex.genes[unread[0]].n_options
    assert ev(tuple(mutant)) == t0 and len(calls) == 1  # timed once, extracted once
    assert ev.graphs[tuple(mutant)] is ev.graphs[genome]
    # another bucket's search (a new evaluator over the same extractor) extracts neither again
    other = CandidateEvaluator(ex, get_backend("numpy"), SearchOptions(trials=1), {}, {}, _flat(args))
    other(tuple(mutant))
    assert len(calls) == 1 and other.graphs[tuple(mutant)] is ev.graphs[genome]
    # the rule-kernel genomes each bucket starts from are found once
    first = ex.kernel_genomes()
    n = len(calls)
    assert ex.kernel_genomes() == first and len(calls) == n
    ex.forget_extractions()  # (after a program's planning: its graphs are not kept)
    other(tuple(mutant))
    assert len(calls) == n + 1


def test_a_compiled_program_keeps_no_candidate_graphs():
    fn, _, make = CASES["attention"]
    args = make()
    f = lf.jit(fn, search=lf.SearchOptions(limit=6, cache=False))
    lowered = f.lower(*args)
    lowered.compile()
    assert lowered.program.egraph_built and lowered.program.extractor._walks == []


def _kernel_names(llir):
    return [n.attrs.get("name") for n in llir.live_nodes() if n.op == "CustomOp"]


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "batched", "batched_t", "two_batch"])
def test_matmul_rule_fires_in_every_layout(layout):
    a2, b2 = _r(5, 7), _r(7, 3)
    fns = {
        "nn": (lambda a, b: a @ b, (a2, b2)),
        "nt": (lambda a, b: a @ b.T, (a2, _r(3, 7))),
        "tn": (lambda a, b: a.T @ b, (_r(7, 5), b2)),
        "batched": (lambda a, b: a @ b, (_r(2, 5, 7), _r(2, 7, 3))),
        "batched_t": (lambda a, b: a @ lnp.swapaxes(b, -1, -2), (_r(2, 5, 7), _r(2, 3, 7))),
        "two_batch": (lambda a, b: a @ b, (_r(2, 3, 5, 7), _r(2, 3, 7, 3))),
    }
    fn, args = fns[layout]
    traced = lf.jit(fn).trace(*args)
    llir = Extractor(build_egraph(traced.hlir), traced.hlir).extract()
    assert "matmul" in _kernel_names(llir), llir.as_text()
    (out,) = get_backend("numpy").compile(llir).run(list(args), {})
    np.testing.assert_allclose(out, fn(*[a.astype(np.float64) for a in args]), rtol=1e-5, atol=1e-5)


def test_every_eclass_keeps_an_implementation_after_cleanup():
    fn, _, make = CASES["mlp"]
    traced = lf.jit(fn).trace(*make())
    eg = build_egraph(traced.hlir)
    ex = Extractor(eg, traced.hlir)
    for cls in eg.node_of.values():
        if cls in ex.views:
            continue
        assert ex.options.get(cls), f"e-class {cls} lost every implementation"
    # the reduction whose input is elementwise lost its plain form to the fused one, not entirely
    sums = [c for c, ns in eg.classes.items() if any(n.op == "Sum" for n in ns)]
    assert sums and all(any(not n.subsumed for n in eg.classes[c]) for c in sums)


def test_graph_without_patterns_still_extracts():
    traced = lf.jit(lambda x: lnp.cumsum(x[::2], axis=0)).trace(np.arange(10, dtype=F32))
    llir = Extractor(build_egraph(traced.hlir), traced.hlir).extract()
    (out,) = get_backend("numpy").compile(llir).run([np.arange(10, dtype=F32)], {})
    np.testing.assert_array_equal(out, np.cumsum(np.arange(10)[::2]))


def test_lowered_text_lists_choices_and_the_cheapest_graph():
    fn, _, make = CASES["mlp"]
    lowered = lf.jit(fn).lower(*make())
    text = lowered.as_text()
    assert "e-classes" in text and "genes" in text and "matmul" in text
    st = lowered.stats()
    assert st["genes"] > 0 and st["enodes"] > st["hlir_nodes"]


# ---- jit end to end: search, buckets, cache -------------------------------------------------------
def test_jit_searches_and_reports(tmp_path):
    fn, ref_fn, make = CASES["mlp"]
    args = make()
    f = lf.jit(fn, search=lf.SearchOptions(limit=12, cache_dir=str(tmp_path)))
    np.testing.assert_allclose(np.asarray(f(*args)), ref_fn(*args), rtol=1e-5, atol=1e-6)
    compiled = f.lower(*args).compile()
    (cost,) = compiled.cost().values()
    assert cost["cached"] is True  # the first call stored the winner
    text = compiled.as_text()
    assert "bucket static" in text and "matmul" in text


def test_a_search_reports_where_its_time_went(tmp_path):
    """The search's result and the compiled step's cost say how long each stage of the
    evaluations took (extraction, compiles, first runs, checks, timings, the final re-timing)."""
    fn, ref_fn, make = CASES["mlp"]
    args = make()
    f = lf.jit(fn, search=lf.SearchOptions(limit=12, cache_dir=str(tmp_path)))
    np.testing.assert_allclose(np.asarray(f(*args)), ref_fn(*args), rtol=1e-5, atol=1e-6)
    compiled = f.compiled()[0]
    (cost,) = compiled.cost().values()
    stages = cost["stage_s"]
    assert set(stages) == {"extract", "compile", "prepare", "first run", "check", "profile", "final"}
    assert all(s >= 0 for s in stages.values()) and stages["profile"] > 0 and stages["extract"] > 0
    # the stages happen inside the search (the final re-timing after it)
    assert sum(s for k, s in stages.items() if k != "final") <= cost["search_s"]
    assert "first run" in compiled.as_text() and "profile" in compiled.as_text()


def test_search_cache_hit_miss_corrupt_and_version(tmp_path, monkeypatch):
    from luminal_fn.optimize import cache as cache_mod

    fn, _, make = CASES["softmax"]
    args = make()
    opts = lf.SearchOptions(limit=6, cache_dir=str(tmp_path))

    def cost_of():
        (c,) = lf.jit(fn, search=opts).lower(*args).compile().cost().values()
        return c

    assert cost_of()["cached"] is False  # miss: searched and stored
    entries = list((tmp_path / "search").glob("*.json"))
    assert len(entries) == 1
    assert cost_of()["cached"] is True  # hit
    entries[0].write_text("{ not json")
    assert cost_of()["cached"] is False  # corrupt: ignored and rewritten
    assert json.loads(entries[0].read_text())["genome"] is not None
    monkeypatch.setattr(cache_mod, "library_version", lambda: "999.0")
    assert cost_of()["cached"] is False  # another library version: another key


def test_buckets_dispatch_without_retrace_and_reject_outside():
    def f(x, w):
        return lnp.tanh(x @ w) * 2.0

    w = _r(8, 4)
    jf = lf.jit(f, dynamic_axes={"x": {0: "s"}}, buckets={"s": [(1, 1), (2, 64, 8)]},
                search=lf.SearchOptions(limit=4))
    for s in (1, 2, 5, 64, 1, 33):
        x = _r(s, 8)
        np.testing.assert_allclose(np.asarray(jf(x, w)), np.tanh(x.astype(np.float64) @ w) * 2,
                                   rtol=1e-5, atol=1e-5)
    assert jf.trace_count == 1 and jf.compile_count == 1
    (compiled,) = jf.compiled()
    assert len(compiled.runner.plans) == 2  # both buckets searched once, up front
    with pytest.raises(BucketError, match=r"dim 's' = 65 is outside every bucket"):
        jf(_r(65, 8), w)


def test_a_later_bucket_starts_from_the_earlier_buckets_choices(tmp_path, monkeypatch):
    """Each bucket's search is given the genomes earlier buckets chose right after the reference
    and the cheapest genome (known-good starting points, their kernels mostly compiled), and
    times them first when they are new."""
    from luminal_fn.optimize import program as program_mod

    given = []
    real_search = program_mod.genetic_search

    def recording_search(space, evaluate, options, report=None, initial=()):
        given.append([tuple(g) for g in initial])
        return real_search(space, evaluate, options, report=report, initial=initial)

    monkeypatch.setattr(program_mod, "genetic_search", recording_search)

    def f(x, w):
        return lnp.tanh(x @ w) * 2.0 + lnp.exp(x @ w)

    w = _r(8, 4)
    buckets = {"s": [(1, 1), (2, 64, 8), (65, 128, 80)]}
    jf = lf.jit(f, dynamic_axes={"x": {0: "s"}}, buckets=buckets,
                search=lf.SearchOptions(limit=6, cache_dir=str(tmp_path)))
    x = _r(3, 8)
    ref = np.tanh(x.astype(np.float64) @ w) * 2 + np.exp(x.astype(np.float64) @ w)
    np.testing.assert_allclose(np.asarray(jf(x, w)), ref, rtol=1e-5, atol=1e-5)
    (compiled,) = jf.compiled()
    plans = [compiled.runner.plans[i] for i in sorted(compiled.runner.plans)]
    assert len(plans) == 3 and len(given) == 3
    ex = compiled.runner.program.extractor
    head = [ex.generic_genome(), (0,) * len(ex.genes)]
    winners = []
    for k, plan in enumerate(plans):
        assert given[k][:2 + len(winners)] == head + winners
        timed = [c.genome for c in plan.result.history]
        new = [g for g in dict.fromkeys(head + winners)]  # each once, in order
        assert timed[:len(new)] == new
        if plan.result.best_genome not in winners:
            winners.append(plan.result.best_genome)
    # a second process finds every bucket in the cache: no search, the same values
    jf2 = lf.jit(f, dynamic_axes={"x": {0: "s"}}, buckets=buckets,
                 search=lf.SearchOptions(limit=6, cache_dir=str(tmp_path)))
    np.testing.assert_allclose(np.asarray(jf2(x, w)), ref, rtol=1e-5, atol=1e-5)
    assert all(p.cached for p in jf2.compiled()[0].runner.plans.values()) and len(given) == 3


def test_unbounded_dim_is_searched_at_the_first_value():
    jf = lf.jit(lambda x: lnp.exp(x) + 1.0, dynamic_axes={"x": {0: "n"}},
                search=lf.SearchOptions(limit=3))
    for n in (3, 9):
        x = _r(n)
        np.testing.assert_allclose(np.asarray(jf(x)), np.exp(x) + 1, rtol=1e-6)
    (compiled,) = jf.compiled()
    assert len(compiled.runner.plans) == 1 and jf.compile_count == 1


def test_memory_budget_rejects_the_broadcast_matmul():
    from luminal_fn.optimize.evaluate import llir_peak_bytes

    a, b = _r(64, 256), _r(256, 64)
    traced = lf.jit(lambda a, b: a @ b).trace(a, b)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    sizes = set()
    for i in range(ex.space().count()):
        sizes.add(llir_peak_bytes(ex.extract(ex.space().genome_at(i)), {}))
    # the plain multiply + sum materialises 64*64*256 floats; the matmul kernel does not
    assert max(sizes) >= 64 * 64 * 256 * 4 and min(sizes) < 64 * 64 * 256 * 4
    f = lf.jit(lambda a, b: a @ b, search=lf.SearchOptions(max_memory="1MiB", cache=False))
    np.testing.assert_allclose(np.asarray(f(a, b)), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    (cost,) = f.compiled()[0].cost().values()
    assert cost["kernels"] >= 1


def test_repeated_layers_share_genes():
    def blocks(x, ws):
        for w in ws:
            x = lf.nn.silu(x @ w) + x
        return x

    x, ws = _r(4, 8), [_r(8, 8) for _ in range(6)]
    traced = lf.jit(blocks).trace(x, ws)
    eg = build_egraph(traced.hlir)
    tied = Extractor(eg, traced.hlir)
    untied = Extractor(eg, traced.hlir, tie_repeats=False)
    # (47 of 95 before unreachable classes lost their genes, 46 of 89 after: six layers, the
    # first and last unlike the rest)
    assert len(tied.genes) < 0.55 * len(untied.genes)
    ref = x.astype(np.float64)
    for w in ws:
        h = ref @ w
        ref = h / (1 + np.exp(-h)) + ref
    be = get_backend("numpy")
    rng = random.Random(3)
    for _ in range(10):
        llir = tied.extract(tuple(rng.randrange(g.n_options) for g in tied.genes))
        (out,) = be.compile(llir).run([x, *ws], {})
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_rule_report_names_the_matmul_rule():
    fn, _, make = CASES["mlp"]
    report = lf.jit(fn).lower(*make()).rule_report(top=50)
    rows = {line.split()[-1]: int(line.split()[1]) for line in report.splitlines()[1:]}
    assert rows["matmul-2d-ab"] >= 2 and rows["fuse-binary"] >= 5


def test_a_wrong_backend_kernel_is_dropped_by_the_reference_check():
    """A backend kernel that computes the wrong thing never wins: the search times the genome
    without backend kernels first and drops candidates that disagree with it."""
    from luminal_fn.backends.numpy import NumpyBackend
    from luminal_fn.backends.numpy.executor import KERNELS

    class Broken(NumpyBackend):
        name = "numpy-broken-matmul"
        kernel_kinds = frozenset({"bad_matmul"})

        def rule_sources(self):
            return ['(rule ((= e (MatMul a as ast ao b bs bst bo))) '
                    '((union e (Kernel "bad_matmul" (ICons a (ICons b (INil))) (ENil)))) '
                    ':ruleset specialize :name "bad-matmul")']

    KERNELS["bad_matmul"] = lambda node, readers: (lambda vals, dims: np.zeros(
        tuple(node.shape), np.float32) + 1.0)
    try:
        a, b = _r(4, 6), _r(6, 5)
        traced = lf.jit(lambda a, b: a @ b).trace(a, b)
        from luminal_fn.optimize.program import lower_graph

        prog = lower_graph(traced.hlir, Broken(), search=lf.SearchOptions(limit=20, cache=False))
        assert any(n.op == "Kernel" for opts in prog.extractor.options.values() for n in opts)
        runner = prog.compile()
        (plan,) = runner.plans.values()
        assert "bad_matmul" not in _kernel_names(plan.llir)
        assert plan.result.n_rejected >= 1
        # cost() says what each candidate gave: a time, or why it was dropped
        (cost,) = runner.cost().values()
        dropped = [t for t in cost["timed"] if isinstance(t, str)]
        assert len(dropped) == plan.result.n_rejected and all(t.startswith("rejected: ") for t in dropped)
        assert any(isinstance(t, float) and t > 0 for t in cost["timed"])
        (out,) = plan.executable.run([a, b], {})
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    finally:
        del KERNELS["bad_matmul"]


def test_a_different_search_limit_searches_again(tmp_path):
    fn, _, make = CASES["softmax"]
    args = make()

    def cached(limit):
        opts = lf.SearchOptions(limit=limit, cache_dir=str(tmp_path))
        (c,) = lf.jit(fn, search=opts).lower(*args).compile().cost().values()
        return c["cached"]

    assert cached(3) is False and cached(3) is True
    assert cached(5) is False and cached(5) is True


def test_search_dims_meet_the_traces_size_assumptions():
    """reshape(-1, 4) of s assumes 4 | s: a bucket whose representative (15) breaks that is
    searched at the nearest value that keeps it, and calls inside the bucket run."""
    f = lf.jit(lambda x: lnp.sum(lnp.reshape(x, (-1, 4)), axis=1), dynamic_axes={"x": {0: "s"}},
               buckets={"s": [(1, 30, 15)]}, search=lf.SearchOptions(limit=2))
    for s in (8, 20, 28):
        x = _r(s)
        np.testing.assert_allclose(np.asarray(f(x)), x.reshape(-1, 4).sum(1), rtol=1e-5, atol=1e-6)
    (compiled,) = f.compiled()
    (plan,) = compiled.runner.plans.values()
    assert plan.dims["s"] % 4 == 0 and abs(plan.dims["s"] - 15) == 1


def _rms_residual_stack(x, ws):
    for w in ws:
        h = x * lnp.reciprocal(lnp.sqrt(lnp.mean(x * x, axis=-1, keepdims=True) + 1e-5))
        x = x + lnp.tanh(h @ w)
    return x * lnp.reciprocal(lnp.sqrt(lnp.mean(x * x, axis=-1, keepdims=True) + 1e-5))


def _rms_residual_stack_ref(x, ws):
    x = x.astype(np.float64)
    for w in ws:
        h = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)
        x = x + np.tanh(h @ w.astype(np.float64))
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)


def test_a_residual_stream_is_not_recomputed_layer_after_layer():
    """Inlining the residual x + h_l into every consumer is fine once; inlined inside another
    inlining it would make layer L's kernels re-read all L earlier contributions. No genome may
    give a fused kernel more than a few inputs, whatever the depth."""
    layers = 8
    x = _r(4, 32)
    ws = [_r(32, 32) * 0.2 for _ in range(layers)]
    traced = lf.jit(_rms_residual_stack).trace(x, ws)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    be = get_backend("numpy")
    ref = _rms_residual_stack_ref(x, ws)
    rng = random.Random(5)
    genomes = [ex.generic_genome(), (0,) * len(ex.genes)]
    genomes += [tuple(rng.randrange(g.n_options) for g in ex.genes) for _ in range(20)]
    for genome in genomes:
        llir = ex.extract(genome)
        widest = max(len(n.inputs) for n in llir.live_nodes()
                     if n.op == "CustomOp" and n.attrs.get("name") in ("fused", "fused_reduce"))
        # 2 for the recomputed residual, 1 per norm weight, at most one extra read per kernel
        # to spare storing a value: a bound that does not grow with depth
        assert widest <= 5, f"genome {genome}: a fused kernel reads {widest} tensors"
        (out,) = be.compile(llir).run([x] + ws, {})
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_index_arithmetic_on_one_input_is_recomputed_not_stored():
    """embedding_bag wraps negative indices, then clamps: the wrapped index is read by several
    nodes, yet recomputing it inside the clamp reads only the index input, so the generic graph
    stores no separate wrapped-index kernel; negative indices still land where NumPy puts them."""
    table = _r(10, 4)
    idx = np.array([[0, -1, 3], [9, -10, 2]], np.int32)
    traced = lf.jit(lambda t, i: lf.nn.embedding_bag(t, i)).trace(table, idx)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    llir = ex.extract(ex.generic_genome())
    fused = [n for n in llir.live_nodes() if n.op == "CustomOp" and n.attrs["name"] == "fused"]
    assert len(fused) == 1 and llir.nodes[fused[0].inputs[0][0]].op == "Input", \
        [(n.shape, n.attrs.get("expr")) for n in fused]
    (out,) = get_backend("numpy").compile(llir).run([table, idx], {})
    np.testing.assert_allclose(out, table[idx].sum(axis=1), rtol=1e-6, atol=1e-6)


def test_masked_scaled_scores_are_recomputed_not_stored():
    """softmax(q k^T * scale + mask): the scaled, masked scores are read by the max, the sum of
    exponentials and the normalisation; recomputing them in each costs one extra read, storing
    them a kernel of its own. The generic graph stores them nowhere."""
    x, mask = _r(2, 4, 6), _r(4, 6)

    def f(x, mask):
        z = x * 0.25 + mask
        e = lnp.exp(z - lnp.max(z, axis=-1, keepdims=True))
        return e / lnp.sum(e, axis=-1, keepdims=True)

    traced = lf.jit(f).trace(x, mask)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    llir = ex.extract(ex.generic_genome())
    names = sorted(n.attrs["name"] for n in llir.live_nodes() if n.op == "CustomOp")
    assert names == ["fused", "fused_reduce", "fused_reduce"], names
    (out,) = get_backend("numpy").compile(llir).run([x, mask], {})
    z = x.astype(np.float64) * 0.25 + mask
    want = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(out, want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_sampled_index_inputs_are_distinct():
    """Timing inputs: an int input that scatters rows gets distinct values, so no slot is written
    twice (which write lands would depend on each candidate's kernel order, and correct
    candidates would disagree with the reference)."""
    from luminal_fn.optimize.evaluate import sample_inputs

    def f(buf, idx, rows):
        return buf.at[idx].set(rows)

    traced = lf.jit(f).trace(np.zeros((32, 4), np.float32), np.zeros(16, np.int32),
                             np.zeros((16, 4), np.float32))
    ins = sample_inputs(traced.hlir, {}, seed=3)
    (idx,) = [a for a in ins if a.dtype == np.int32]
    assert len(set(idx.tolist())) == 16 and idx.min() >= 0 and idx.max() < 16


def test_a_half_precision_matmul_never_stores_its_products():
    """x @ w.T in bfloat16, K = 2048: every genome the search may try adds the products in float32
    and rounds only the result. A genome storing the bf16 products first (each rounded before
    the sum: 3% off a small output) is not offered."""
    import ml_dtypes

    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (1, 2048)).astype(ml_dtypes.bfloat16)
    w = rng.uniform(-1, 1, (64, 2048)).astype(ml_dtypes.bfloat16)
    g = lf.jit(lambda x, w: x @ w.T).trace(x, w).hlir
    ex = Extractor(build_egraph(g), g)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    space = ex.space()
    assert space.count() >= 1
    for i in range(space.count()):
        got = get_backend("numpy").compile(ex.extract(space.genome_at(i))).run([x, w], {})[0]
        err = np.abs(np.asarray(got).astype(np.float64) - want)
        # the result's own rounding to bf16 (8 significant bits): at most half an ulp, 2^-8 of it
        assert (err <= np.abs(want) * 2.0 ** -8 + 1e-3).all(), (i, err.max())


def test_a_sum_of_index_values_alone_extracts_in_every_genome():
    """arange(2n).sum() over a symbolic n: its fused reduction would read no tensor (nothing to
    size it by), so extraction repairs to the primitive SumReduce rather than failing the
    genome (CUDA's 4-candidate search once found every candidate failing)."""
    @lf.jit(dynamic_axes={"x": {0: "s"}}, backend="numpy")
    def f(x):
        return lnp.arange(x.shape[0] * 2).sum()

    traced = f.trace(np.zeros((3, 4), np.float32))
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    be = get_backend("numpy")
    assert ex.genes, "the fused reduction and the primitive sum are both offered"
    for k in range(2):  # the fused reduction first (the cheapest), then the primitive sum
        llir = ex.extract((k,) * len(ex.genes))
        for s in (1, 3, 8):
            (out,) = be.compile(llir).run([np.zeros((s, 4), np.float32)], {"s": s})
            assert int(out) == np.arange(2 * s).sum()


def test_a_pick_that_differs_on_a_near_tie_is_kept_and_a_wrong_one_dropped():
    """Integer outputs alone differing from the reference's are checked on a second sample of
    inputs: an argmax kernel that rounds its way to the runner-up where the top two are within
    ``tie`` (as bf16 logits do between correct implementations) agrees there and stays in the
    search; one that is off by one everywhere is dropped, the reason naming both samples."""
    from luminal_fn.backends.numpy import NumpyBackend
    from luminal_fn.backends.numpy.executor import KERNELS
    from luminal_fn.optimize.evaluate import sample_inputs
    from luminal_fn.optimize.program import lower_graph

    def gap(x):  # the top two's difference in each row
        top = np.sort(x, axis=-1)[..., -2:]
        return top[..., 1] - top[..., 0]

    fn = lambda x: lnp.argmax(x, axis=-1).astype(lnp.int32)  # noqa: E731
    # a row length whose first sample's gap is the smaller one; the flip happens between them
    for n in range(40, 80):
        traced = lf.jit(fn).trace(_r(1, n))
        first, second = (gap(sample_inputs(traced.hlir, {}, seed)[0]).min() for seed in (0, 1))
        if first < 0.5 * second:
            break
    tie = 0.5 * (first + second)

    def argmax_near_tie(vals, x):
        idx = np.argmax(x, axis=-1)
        runner_up = np.argsort(x, axis=-1, kind="stable")[..., -2]
        return np.where(gap(x) < tie, runner_up, idx).astype(np.int32)

    class Picks(NumpyBackend):
        name = "numpy-picks"
        kernel_kinds = NumpyBackend.kernel_kinds | {"argmax_near_tie", "argmax_off_by_one"}

        def rule_sources(self):
            return super().rule_sources() + [
                f'(rule ((= e (Kernel "argmax_rows" args eargs))) ((union e (Kernel "{k}" args eargs))) '
                f':ruleset specialize :name "{k}")' for k in ("argmax_near_tie", "argmax_off_by_one")]

    def kernel(pick):
        return lambda node, readers: (lambda vals, dims: pick(vals, readers[0](vals, dims)))

    KERNELS["argmax_near_tie"] = kernel(argmax_near_tie)
    KERNELS["argmax_off_by_one"] = kernel(
        lambda vals, x: ((np.argmax(x, axis=-1) + 1) % x.shape[-1]).astype(np.int32))
    try:
        prog = lower_graph(traced.hlir, Picks(), search=lf.SearchOptions(limit=30, cache=False, patience=None))
        runner = prog.compile()
        (plan,) = runner.plans.values()
        (cost,) = runner.cost().values()
        dropped = [t for t in cost["timed"] if isinstance(t, str)]
        assert plan.result.n_rechecked >= 1 and cost["rechecked"] == plan.result.n_rechecked
        assert dropped and all("; and on a second sample of inputs: output 0 disagrees" in t for t in dropped)
        assert plan.result.n_rejected == len(dropped)
        assert "argmax_off_by_one" not in _kernel_names(plan.llir)
        x = _r(1, n)
        (out,) = plan.executable.run([x], {})
        assert int(np.asarray(out).ravel()[0]) == int(np.argmax(x))
    finally:
        del KERNELS["argmax_near_tie"], KERNELS["argmax_off_by_one"]


def test_planning_raises_the_collectors_threshold_and_restores_it():
    """fewer_collections: the young generation's threshold raised while buckets are planned
    (nested and from threads alike), the caller's thresholds back after, and automatic collection
    left off where the caller turned it off (threshold 0)."""
    import gc

    from luminal_fn.optimize.program import SEARCH_GC_THRESHOLD, fewer_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 11, 12)
        with fewer_collections():
            assert gc.get_threshold() == (SEARCH_GC_THRESHOLD, 11, 12)
            with fewer_collections():
                assert gc.get_threshold() == (SEARCH_GC_THRESHOLD, 11, 12)
            assert gc.get_threshold() == (SEARCH_GC_THRESHOLD, 11, 12)
        assert gc.get_threshold() == (700, 11, 12)
        gc.set_threshold(0, 11, 12)
        with fewer_collections():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold() == (0, 11, 12)
        # a real compile restores them too, also when its search fails
        gc.set_threshold(700, 11, 12)
        a, b = _r(4, 6), _r(6, 5)
        lf.jit(lambda a, b: a @ b, search=lf.SearchOptions(limit=3, cache=False))(a, b)
        assert gc.get_threshold() == (700, 11, 12)
        with pytest.raises(ValueError):
            with fewer_collections():
                raise ValueError("a search that fails")
        assert gc.get_threshold() == (700, 11, 12)
    finally:
        gc.set_threshold(*before)

"""Issue 7, item 2: the multi-table embedding-bag. K bag sums (tables of different row counts, one
L and D) stacked on axis 1 become one ``embedding_bag_multi`` kernel (rule in
optimize/rules/specialize_models.egg), optionally with a prefix slot in front (DLRM stacks the
bottom MLP output before the bags).

The rule fires on the pattern (K = 2, 3, 8; with and without the prefix) and not on near misses;
the kernel of each backend (NumPy, MLX ops, CUDA on a CPU emulation and, marked ``gpu``, on the
device) agrees with a NumPy reference; random genomes of graphs containing the pattern compute
the float64 reference; the jitted DLRM example still matches float64 NumPy."""
from __future__ import annotations

import importlib.util
import pathlib
import random
import re
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy import KERNELS, NumpyBackend
from luminal_fn.frontend import pytree
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.view import View
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

from cuda_cases import B as GraphBuilder

egglog_bindings = pytest.importorskip("egglog.bindings")
from test_models import holds, ml, result_id, saturate  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
KIND = "embedding_bag_multi"
KIND_RAW = "embedding_bag_multi_raw"  # per table (table, raw rows, stride, row count)
R = np.random.default_rng(17)


def f32(*s):
    return R.standard_normal(s).astype(np.float32)


def bag_inputs(k, bsz=5, bag=2, dim=4, rows0=6):
    """K tables of different row counts (rows0, rows0+3, ...) and (B, L) index arrays (some out
    of range: the Gather clamp and the negative-index wrap of lnp.take apply)."""
    tables = [f32(rows0 + 3 * j, dim) for j in range(k)]
    idx = [R.integers(-rows0, rows0 + 3 * j, (bsz, bag)).astype(np.int32) for j in range(k)]
    return tables, idx


def bags_of(tables, idx):
    return [lf.nn.embedding_bag(t, i) for t, i in zip(tables, idx)]


def stacked(k):
    """lnp.stack(bags, axis=1): (B, K, D), no prefix."""
    def fn(*a):
        return lnp.stack(bags_of(a[:k], a[k:]), axis=1)
    return fn


def dlrm_stacked(k):
    """lnp.stack([x] + bags, axis=1) as nn.pairwise_dot builds DLRM's T: prefix P = 1."""
    def fn(x, *a):
        return lnp.stack([x] + bags_of(a[:k], a[k:]), axis=1)
    return fn


def ref_bag(table, idx):
    """float64 sum of table rows, indices wrapped as lnp.take wraps negatives."""
    t = table.astype(np.float64)
    return t[np.where(idx < 0, idx + len(t), idx)].sum(axis=1)


def kernel_term(first_inputs: list, k: int, params) -> str:
    """The Kernel term with the given leading inputs and table j = (Inp first_table + j), rows
    and strides left as pattern variables."""
    lst = "(INil)"
    for j in reversed(range(k)):
        lst = f"(ICons (Inp {first_inputs[-1] + j}) (ICons r{j} (ICons s{j} {lst})))"
    for x in reversed(first_inputs[:-1]):
        lst = f"(ICons {x} {lst})"
    return f'(Kernel "{KIND}" {lst} {ml(*params)})'


def fires_anywhere(eg, name: str) -> bool:
    return holds(eg, f'(= e (Kernel "{name}" i p))')


# ---- the rule -------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 8])
def test_rule_fires_on_k_stacked_bags(k):
    tables, idx = bag_inputs(k)
    g, eg = saturate(stacked(k), *tables, *idx, iterations=k + 3)
    out = result_id(g)
    # tables are inputs 0..k-1, in slot order; params B P K L D
    assert holds(eg, f"(= (NodeOf {out}) {kernel_term([0], k, (5, 0, k, 2, 4))})")
    x = f32(5, 4)
    g, eg = saturate(dlrm_stacked(k), x, *tables, *idx, iterations=k + 4)
    prefix = f"(V (Inp 0) {ml(5, 1, 4)} {ml(4, 0, 1)} (MNum 0) (MaskNone))"
    assert holds(eg, f"(= (NodeOf {result_id(g)}) {kernel_term([prefix, 1], k, (5, 1, k, 2, 4))})")


def test_rule_needs_the_whole_chain_of_iterations():
    """The chain walks one slot per iteration: with too few iterations nothing is offered (so
    the iteration count in the rule's comment is the real requirement)."""
    tables, idx = bag_inputs(8)
    _, eg = saturate(stacked(8), *tables, *idx, iterations=8)
    assert not fires_anywhere(eg, KIND)


def _near_miss(fn, *args, k=4):
    g, eg = saturate(fn, *args, iterations=k + 4)
    assert fires_anywhere(eg, "embedding_bag"), "the single-table rule should still see the bags"
    return fires_anywhere(eg, KIND)


def test_rule_skips_a_bag_of_another_width():
    (t0, t1, t2), (i0, i1, i2) = bag_inputs(3)
    narrow = f32(9, 3)

    def fn(t0, t2, narrow, i0, i1, i2):
        mid = lnp.pad(lf.nn.embedding_bag(narrow, i1), ((0, 0), (0, 1)))  # D = 3, padded to 4
        return lnp.stack([lf.nn.embedding_bag(t0, i0), mid, lf.nn.embedding_bag(t2, i2)], axis=1)

    assert not _near_miss(fn, t0, t2, narrow, i0, np.clip(i1, 0, 8), i2)


def test_rule_skips_a_bag_of_another_size():
    (t0, t1, t2), (i0, _, i2) = bag_inputs(3)
    i1 = R.integers(0, 9, (5, 3)).astype(np.int32)  # L = 3 between two L = 2 bags

    def fn(t0, t1, t2, i0, i1, i2):
        return lnp.stack(bags_of([t0, t1, t2], [i0, i1, i2]), axis=1)

    assert not _near_miss(fn, t0, t1, t2, i0, i1, i2)


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_rule_skips_a_table_pooled_with_another_mode(mode):
    tables, idx = bag_inputs(3)
    x = f32(5, 4)

    def fn(x, t0, t1, t2, i0, i1, i2):
        bags = [lf.nn.embedding_bag(t0, i0), lf.nn.embedding_bag(t1, i1, mode=mode),
                lf.nn.embedding_bag(t2, i2)]
        return lnp.stack([x] + bags, axis=1)

    g, eg = saturate(fn, x, *tables, *idx, iterations=7)
    assert not fires_anywhere(eg, KIND)


def test_rule_skips_gathers_not_followed_by_the_sum():
    tables = [f32(6, 4), f32(9, 4), f32(7, 4)]
    ids = [R.integers(0, 6, (5,)).astype(np.int32) for _ in tables]

    def fn(t0, t1, t2, i0, i1, i2):
        return lnp.stack([lf.nn.gather_rows(t, i) for t, i in ((t0, i0), (t1, i1), (t2, i2))], axis=1)

    g, eg = saturate(fn, *tables, *ids, iterations=7)
    assert not fires_anywhere(eg, KIND)
    assert not fires_anywhere(eg, "embedding_bag")


def test_backends_list_the_kernel():
    assert KIND in NumpyBackend.kernel_kinds and KIND in KERNELS
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.mlx import MLXBackend

    assert KIND in KERNEL_KINDS and KIND in MLXBackend.kernel_kinds


# ---- the kernels against a NumPy reference ---------------------------------------------------------
def kernel_case(p=1, k=3, bsz=4, bag=3, dim=5, d=dt.float32, stride=None):
    """(inputs, params, float64/int reference) of one embedding_bag_multi call."""
    rng = np.random.default_rng(5 + k + p)
    mk = (lambda *s: rng.integers(-5, 5, s).astype(np.int32)) if d is dt.int32 else \
        (lambda *s: rng.standard_normal(s).astype(np.float32))
    ins, want = [], []
    if p:
        pre = mk(bsz, p, dim)
        ins.append(pre)
        want += [pre[:, j].astype(np.float64) for j in range(p)]
    for j in range(k):
        rows = 3 + 4 * j
        table = mk(rows, dim)
        idx = rng.integers(-2, rows + 2, bsz * bag).astype(np.int32)
        st = dim if stride is None else stride
        ins += [table, idx, np.array([st], np.int32)]
        flat = table.reshape(-1).astype(np.float64)
        pos = np.clip(idx.reshape(bsz, bag, 1).astype(np.int64) * st + np.arange(dim), 0, flat.size - 1)
        want.append(flat[pos].sum(axis=1))
    return ins, (bsz, p, k, bag, dim), np.stack(want, axis=1)


def run_numpy_kernel(inputs, params, dtype=dt.float32):
    node = SimpleNamespace(attrs={"name": KIND, "params": tuple(params)}, dtype=dtype, id=0)
    readers = [(lambda j: (lambda vals, dims: vals[j]))(j) for j in range(len(inputs))]
    return KERNELS[KIND](node, readers)(list(inputs), {})


KERNEL_CASES = {
    "prefix": dict(p=1, k=3),
    "no_prefix": dict(p=0, k=2),
    "wide_prefix_k8": dict(p=2, k=8, bag=1),
    "row_stride_not_d": dict(p=0, k=3, stride=3),
    "int32": dict(p=1, k=2, d=dt.int32),
}


@pytest.mark.parametrize("case", sorted(KERNEL_CASES))
def test_numpy_kernel_matches_reference(case):
    kw = KERNEL_CASES[case]
    ins, params, want = kernel_case(**kw)
    d = kw.get("d", dt.float32)
    got = run_numpy_kernel(ins, params, d)
    assert got.shape == want.shape and got.dtype == dt.to_numpy(d)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def kernel_graph(ins, params, d=dt.float32):
    """An LLIR graph of one embedding_bag_multi node over Inputs (strides as buffers)."""
    b = GraphBuilder()
    edges = [b.c(b.input(x.shape, dt.int32 if x.dtype == np.int32 else dt.float32)) for x in ins]
    bsz, p, k, _, dim = params
    y = b.custom(KIND, edges, (bsz, p + k, dim), d, params=tuple(params))
    b.output(y)
    return b.g


@pytest.mark.parametrize("case", sorted(KERNEL_CASES))
def test_mlx_kernel_matches_reference(case):
    pytest.importorskip("mlx.core")
    from luminal_fn.backends import get_backend

    kw = KERNEL_CASES[case]
    ins, params, want = kernel_case(**kw)
    d = kw.get("d", dt.float32)
    from luminal_fn.backends.mlx.ops import OPS

    mlx = get_backend("mlx")
    exe = mlx.compile(kernel_graph(ins, params, d))
    assert KIND in OPS  # registered with the executor's kernels (mlx/kernels.py)
    got = mlx.to_numpy(exe.run([mlx.from_numpy(x) for x in ins], {})[0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- CUDA: planned kernels, run on the CPU emulation and (marked gpu) on the device ---------------
def cuda_case(p, k, symbolic=False, raw=None):
    """The lowering's usual inputs: a prefix read through a stride-0 view of (B, D) (DLRM's x),
    tables, index arrays, and the row stride as a scalar Constant (a literal in the kernel).
    raw "literal" / "buffer": the embedding_bag_multi_raw kernel over raw indices (negative and
    past the end), each table's row count a scalar Constant or a (1,) input buffer."""
    from luminal_fn.ir.expr import var

    bsz, bag, dim = 6, 3, 40
    n = var("s") if symbolic else bsz
    b = GraphBuilder()
    ins, data = [], []
    if p:
        x = b.input((n, dim))
        ins.append((x, View((n, 1, dim), (dim, 0, 1), 0, None)))
        data.append(f32(bsz, dim))
    c = b.node("Constant", [], (), dt.int32, value=np.array(dim, np.int32))
    for j in range(k):
        rows = 5 + 7 * j
        t, r = b.input((rows, dim)), b.input((n * bag,), dt.int32)
        ins += [b.c(t), b.c(r), (c, View((1,), (0,), 0, None))]
        data.append(f32(rows, dim))
        if raw is None:
            data.append(R.integers(-1, rows + 1, bsz * bag).astype(np.int32))
            continue
        data.append(R.integers(-rows - 3, rows + 4, bsz * bag).astype(np.int32))
        if raw == "literal":
            nc = b.node("Constant", [], (), dt.int32, value=np.array(rows, np.int32))
            ins.append((nc, View((1,), (0,), 0, None)))
        else:
            ins.append(b.c(b.input((1,), dt.int32)))
            data.append(np.array([rows], np.int32))
    y = b.custom(KIND if raw is None else KIND_RAW, ins, (n, p + k, dim), dt.float32,
                 params=(n, p, k, bag, dim))
    b.output(y)
    return b.g, data, ({"s": bsz} if symbolic else {})


def raw_reference(p, k, data):
    """float64 reference of a raw cuda_case: indices normalised as lnp.take does."""
    out, at = [], 0
    if p:
        out.append(data[0].astype(np.float64)[:, None, :])
        at = 1
    while len(out) < (1 if p else 0) + k:
        table, idx = data[at].astype(np.float64), data[at + 1]
        at += 2
        if at < len(data) and data[at].shape == (1,) and data[at].dtype == np.int32:
            at += 1  # a row-count buffer
        n = len(table)
        rows = np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1).reshape(-1, 3)
        out.append(table[rows].sum(axis=1)[:, None, :])
    return np.concatenate(out, axis=1)


CUDA_CASES = {"prefix_k3": (1, 3), "no_prefix_k2": (0, 2), "prefix_k8": (1, 8),
              "symbolic_batch": (1, 2, True), "raw_prefix_k3": (1, 3, False, "literal"),
              "raw_no_prefix_k2_counts_in_buffers": (0, 2, False, "buffer"),
              "raw_symbolic_batch": (1, 4, True, "literal")}


def _bucket(dims):
    return {s: 1 << max(0, (v - 1).bit_length()) for s, v in dims.items()}


@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_cuda_kernel_plans_one_launch_with_a_pointer_per_table(name):
    from luminal_fn.backends.cuda.executable import plan_graph

    p, k, *sym = CUDA_CASES[name]
    g, _, dims = cuda_case(p, k, *sym)
    bp = plan_graph(g, _bucket(dims))
    raw = sym[1] if len(sym) > 1 else None
    assert [s.label for s in bp.steps] == [KIND if raw is None else KIND_RAW]
    (src,) = bp.kernels()
    # prefix + one table and one index buffer per table (the strides, and literal row counts,
    # are literals) + out
    assert len(src.buffers) == (1 if p else 0) + (3 if raw == "buffer" else 2) * k + 1
    # one switch case per table, or (tables read alike) one shared-memory entry per table
    shared = len(re.findall(r"lf_tab\[\d+\] = ", src.text))
    assert (src.text.count("case "), shared) in ((k, 0), (0, k))
    assert src.text.count("{") == src.text.count("}")


def _need_gxx():
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed on this machine")


def test_cuda_kernel_computes_the_reference_on_a_cpu_emulation(tmp_path):
    from luminal_fn.backends.cuda.executable import plan_graph

    import cuda_model_emulation as emu

    _need_gxx()
    cases = []
    for name, (p, k, *sym) in sorted(CUDA_CASES.items()):
        g, data, dims = cuda_case(p, k, *sym)
        cases.append((name, g, data, dims, plan_graph(g, _bucket(dims))))
    lib = emu.build([c[-1] for c in cases], str(tmp_path))
    for name, g, data, dims, bp in cases:
        want = NumpyBackend().compile(g).run(data, dims)[0]
        got = emu.run(lib, bp, data, dims)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"emulated CUDA {KIND} {name}")
        p, k, *sym = CUDA_CASES[name]
        if len(sym) > 1:  # raw indices: NumPy's kernel against an independent float64 reference
            np.testing.assert_allclose(want, raw_reference(p, k, data), rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_cuda_kernel_matches_numpy_on_gpu(name):
    from luminal_fn.backends import get_backend

    cuda = get_backend("cuda")
    p, k, *sym = CUDA_CASES[name]
    g, data, dims = cuda_case(p, k, *sym)
    want = NumpyBackend().compile(g).run(data, dims)[0]
    exe = cuda.compile(g)
    for call in (1, 2):
        got = cuda.to_numpy(exe.run([cuda.from_numpy(x) for x in data], dims)[0])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"CUDA {KIND} {name}, call {call}")


# ---- through the optimizer: random genomes of graphs with the pattern --------------------------------
def dlrm_like(k=3, bsz=6, dim=8, bag=3):
    """A small DLRM-shaped function (dense layer, K bags, pairwise interaction, output layer)
    and its float64 NumPy reference."""
    rng = np.random.default_rng(k)
    dense = rng.standard_normal((bsz, 5)).astype(np.float32)
    w1 = (rng.standard_normal((5, dim)) / 2).astype(np.float32)
    tables = [(rng.standard_normal((7 + 5 * j, dim)) / 3).astype(np.float32) for j in range(k)]
    idx = [rng.integers(0, 7 + 5 * j, (bsz, bag)).astype(np.int32) for j in range(k)]
    f = k + 1
    w2 = (rng.standard_normal((dim + f * (f - 1) // 2, 1)) / 4).astype(np.float32)

    def fn(dense, w1, w2, *tab_idx):
        x = lf.nn.relu(dense @ w1)
        z = lf.nn.dlrm_interaction(x, bags_of(tab_idx[:k], tab_idx[k:]))
        return z @ w2

    def ref(dense, w1, w2, *tab_idx):
        x = np.maximum(dense.astype(np.float64) @ w1, 0.0)
        t = np.stack([x] + [ref_bag(tb, i) for tb, i in zip(tab_idx[:k], tab_idx[k:])], axis=1)
        zz = t @ t.transpose(0, 2, 1)
        li, lj = np.tril_indices(f, -1)
        return np.concatenate([x, zz[:, li, lj]], axis=1) @ w2

    return fn, ref, [dense, w1, w2, *tables, *idx]


FUZZ = {
    "dlrm_like_k3": lambda: dlrm_like(3),
    "stack_k2_times_two": lambda: (lambda *a: stacked(2)(*a) * 2.0,
                                   lambda t0, t1, i0, i1: 2.0 * np.stack([ref_bag(t0, i0), ref_bag(t1, i1)], 1),
                                   [*bag_inputs(2)[0], *bag_inputs(2)[1]]),
}


def _genomes(fn, args, kinds, tries=30, seed=0):
    graph = lf.jit(fn).trace(*args).hlir
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=kinds)
    rnd = random.Random(seed)
    for t in range(tries):
        genome = None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes)
        yield genome, ex.extract(genome)


def _uses(llir) -> bool:
    return any(n.op == "CustomOp" and n.attrs.get("name") in (KIND, KIND_RAW) for n in llir.live_nodes())


@pytest.mark.parametrize("name", sorted(FUZZ))
def test_random_genomes_with_the_multi_kernel_compute_the_reference(name):
    fn, ref, args = FUZZ[name]()
    want = ref(*args)
    be = NumpyBackend()
    used = 0
    for genome, ll in _genomes(fn, args, be.kernel_kinds):
        used += _uses(ll)
        got = be.compile(ll).run(list(args), {})[0]
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"{name} genome {genome}")
    assert used > 0, f"no genome of {name} used {KIND}"


def test_random_genomes_on_mlx_compute_the_reference():
    pytest.importorskip("mlx.core")
    from luminal_fn.backends import get_backend

    fn, ref, args = dlrm_like(2)
    want = ref(*args)
    mlx = get_backend("mlx")
    used = 0
    for genome, ll in _genomes(fn, args, mlx.kernel_kinds, tries=12):
        used += _uses(ll)
        got = mlx.to_numpy(mlx.compile(ll).run([mlx.from_numpy(a) for a in args], {})[0])
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"MLX genome {genome}")
    assert used > 0


def test_extracted_multi_kernel_runs_on_the_cuda_emulation(tmp_path):
    """The kernel exactly as the rule builds it in a DLRM graph (stride-0 prefix view of x, the
    scalar row stride, per-table views) planned for CUDA and run on the emulation, its inputs
    random buffers of the producers' shapes, against the NumPy backend."""
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    import cuda_model_emulation as emu
    from cuda_cases import isolated_kernels, rand

    _need_gxx()
    fn, _, args = dlrm_like(3)
    ll = next(ll for _, ll in _genomes(fn, args, KERNEL_KINDS) if _uses(ll))
    # the raw kernel (row counts as literal inputs) once the rule offers it; indices out of range too
    (g, data), *_ = isolated_kernels(ll, (KIND, KIND_RAW), data=lambda shape, d: (
        R.integers(-3, 30, shape).astype(np.int32) if d is dt.int32 else rand(shape, d)))
    node = next(n for n in g.nodes if n.op == "CustomOp")
    kind = node.attrs["name"]
    bp = plan_graph(g, {})
    assert [s.label for s in bp.steps] == [kind]
    lib = emu.build([bp], str(tmp_path))
    want = NumpyBackend().compile(g).run(data, {})[0]
    np.testing.assert_allclose(emu.run(lib, bp, data, {})[0], want, rtol=1e-5, atol=1e-5,
                               err_msg=f"views {[str(v) for _, v in node.inputs]}")


# ---- the DLRM example -----------------------------------------------------------------------------
def _load_example():
    spec = importlib.util.spec_from_file_location("dlrm_example_multi", ROOT / "examples" / "dlrm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_jitted_dlrm_matches_float64_and_its_multi_kernel_genomes_too():
    dlrm = _load_example()
    r = dlrm.run(3, batch=32, iters=1, rows=50)
    assert r["shape"] == (32, 1) and r["max_abs_diff"] <= 1e-5, r
    # the extracted DLRM graphs that do use the kernel (the search may not pick it on NumPy)
    params = dlrm.init_params(3, 50, 0)
    dense, idx = dlrm.make_batch(3, 16, 50, 1)
    want = dlrm.reference(params, dense, idx)
    be = NumpyBackend()
    traced = lf.jit(dlrm.forward).trace(params, dense, idx)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=be.kernel_kinds)
    leaves = [np.asarray(x) for x in pytree.flatten((params, dense, idx))[0]]  # the Inputs' order
    rnd = random.Random(1)
    used = 0
    for t in range(8):
        genome = None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes)
        ll = ex.extract(genome)
        used += _uses(ll)
        got = be.compile(ll).run(leaves, {})[0]
        assert np.abs(got.astype(np.float64) - want).max() <= 1e-5, f"genome {genome}"
    assert used > 0


@pytest.mark.gpu
def test_jitted_dlrm_on_cuda_matches_float64():
    dlrm = _load_example()
    for num_cat in (3, 8):
        r = dlrm.run(num_cat, batch=256, iters=2, rows=200, backend="cuda")
        assert r["max_abs_diff"] <= 1e-5, r


@pytest.mark.parametrize("name", ["raw_prefix_k3", "raw_no_prefix_k2_counts_in_buffers", "prefix_k3"])
def test_cuda_bag_issues_a_bags_row_loads_together_where_its_rows_are_normalised(name, monkeypatch):
    """Raw lnp.take indices are normalised into the table, so every row of a bag can be loaded
    before any is added (checked at run time: the table holds all its rows); indices used as
    given keep the row-by-row clamp; LUMINAL_CUDA_BAG_BATCHED=0 turns the batched form off."""
    from luminal_fn.backends.cuda.bagkernels import BATCHED_SWITCH
    from luminal_fn.backends.cuda.executable import plan_graph

    p, k, *sym = CUDA_CASES[name]
    g, _, dims = cuda_case(p, k, *sym)
    (src,) = plan_graph(g, _bucket(dims)).kernels()
    raw = len(sym) > 1
    assert ("xs[l]" in src.text) == raw
    assert "j + 4 <= tsize" in src.text  # (the row-by-row form stays, for tables short of rows)
    monkeypatch.setenv(BATCHED_SWITCH, "0")
    (off,) = plan_graph(g, _bucket(dims)).kernels()
    assert "xs[l]" not in off.text
    if raw:  # (a typo is an error, not the default)
        monkeypatch.setenv(BATCHED_SWITCH, "maybe")
        with pytest.raises(ValueError, match=BATCHED_SWITCH):
            plan_graph(g, _bucket(dims))


def test_cuda_bag_grid_holds_few_blocks_an_sm(monkeypatch):
    """The bag's grid-stride loop runs BLOCKS_PER_SM blocks an SM (each fills the tables' shared
    entries once); $LUMINAL_CUDA_BAG_BLOCKS_PER_SM sets another, 0 the backend's default cap."""
    from luminal_fn.backends.cuda.bagkernels import BLOCKS_PER_SM, BLOCKS_SWITCH
    from luminal_fn.backends.cuda.executable import plan_graph

    g, _, dims = cuda_case(1, 8, False, "literal")
    (src,) = plan_graph(g, _bucket(dims), sm_count=132).kernels()
    assert src.grid_cap == 132 * BLOCKS_PER_SM
    monkeypatch.setenv(BLOCKS_SWITCH, "0")
    assert plan_graph(g, _bucket(dims), sm_count=132).kernels()[0].grid_cap == 0
    monkeypatch.setenv(BLOCKS_SWITCH, "many")
    with pytest.raises(ValueError, match=BLOCKS_SWITCH):
        plan_graph(g, _bucket(dims))

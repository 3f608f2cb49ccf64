"""The MLX backend against the NumPy reference.

* Registration and the missing-mlx error run everywhere.
* Metal source generation is checked structurally everywhere (no mlx, no Metal needed), and,
  where g++ exists, every rendered kernel is type-checked as C++ against a small stand-in for
  Metal's types (catching undeclared names and malformed code, not Metal-only rules).
* Execution through MLX's own ops needs mlx (installed with the test extra on Linux and macOS):
  the traced equivalence suite with backend "mlx", and LLIR graphs with fused / fused_reduce /
  matmul CustomOp nodes built directly, each compared with the NumPy backend on the same graph.
* Tests marked ``metal`` execute the rendered Metal kernels; they run where
  ``mx.metal.is_available()`` and are skipped elsewhere.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.backends import BackendUnavailable, available_backends, get_backend
from luminal_fn.backends.mlx.metal import BLOCK, MetalKernel, kernel_for
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.backends.render import KernelInput
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.expr import var
from luminal_fn.ir.graph import Graph
from luminal_fn.ir.view import View

try:
    import mlx.core as mx

    HAVE_MLX = True
    HAVE_METAL = bool(mx.metal.is_available())
except ImportError:
    HAVE_MLX = HAVE_METAL = False

needs_mlx = pytest.mark.skipif(not HAVE_MLX, reason='mlx is not installed (pip install "luminal-fn[mlx]")')
metal = [pytest.mark.metal,
         pytest.mark.skipif(not HAVE_METAL, reason="needs Apple Metal (mx.metal.is_available() is False)")]

S = var("s")
R = np.random.default_rng(5)


# ---- registration --------------------------------------------------------------------------------
def test_registered_without_importing_mlx():
    code = ("import sys, luminal_fn as lf; "
            "print('mlx' in lf.available_backends(), any(m == 'mlx' or m.startswith('mlx.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.split() == ["True", "False"]
    assert "mlx" in available_backends()


def test_missing_mlx_names_the_extra(monkeypatch):
    from luminal_fn.backends import mlx as mlx_backend

    for name in ("mlx", "mlx.core"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import mlx.core` raise ImportError
    with pytest.raises(BackendUnavailable, match=r'pip install "luminal-fn\[mlx\]"'):
        mlx_backend.MLXBackend()


# ---- LLIR graphs built directly --------------------------------------------------------------------
class B:
    def __init__(self):
        self.g = Graph("llir")
        self.n_in = self.n_out = 0

    def input(self, shape, d=dt.float32):
        i = self.g.add("Input", (), shape, d, index=self.n_in, name=f"x{self.n_in}")
        self.n_in += 1
        return i

    def c(self, i):
        return (i, View.contiguous(self.g.nodes[i].shape))

    def node(self, op, ins, shape, d=dt.float32, **attrs):
        return self.g.add(op, tuple(ins), shape, d, **attrs)

    def custom(self, name, ins, shape, d=dt.float32, **attrs):
        return self.g.add("CustomOp", tuple(ins), shape, d, name=name, **attrs)

    def output(self, src):
        n = self.g.nodes[src]
        self.g.add("Output", ((src, View.contiguous(n.shape)),), n.shape, n.dtype, index=self.n_out)
        self.n_out += 1


def rand(shape, d=dt.float32, lo=-2.0, hi=2.0):
    if d is dt.int32:
        return R.integers(-20, 20, shape).astype(np.int32)
    if d is dt.bool_:
        return R.random(shape) < 0.5
    return R.uniform(lo, hi, shape).astype(np.float32).astype(dt.to_numpy(d))


def row(n_rows, n):
    return View((n_rows, n), (0, 1), 0, None)


def case_fused(d=dt.float32):
    b = B()
    x, w = b.input((4, 37), d), b.input((37,), d)
    n = d.name
    tree = ("Add", n, ("Mul", n, ("in", 0), ("in", 1)),
            ("Exp2", n, ("Recip", n, ("Add", n, ("in", 0), ("const", 3.0, n)))))
    b.output(b.custom("fused", [b.c(x), (w, row(4, 37))], (4, 37), d, expr=tree))
    return b.g, [rand((4, 37), d), rand((37,), d)], {}


def case_select_iota_gather_mod():
    b = B()
    x, idx = b.input((6, 8)), b.input((6, 8), dt.int32)
    tree = ("Select", "float32", ("LessThan", "bool", ("in", 0), ("const", 0.0, "float32")),
            ("Gather", "float32", 0, ("Mod", "int32", ("in", 1), ("const", 60, "int32"))),  # past the end: clamped
            ("Cast", "float32", ("Add", "int32", ("iota", var("z")), ("Cast", "int32", ("in", 0)))))
    b.output(b.custom("fused", [b.c(x), b.c(idx)], (6, 8), dt.float32, expr=tree))
    return b.g, [rand((6, 8)), R.integers(-70, 70, (6, 8)).astype(np.int32)], {}


def case_masked_transposed():
    b = B()
    x = b.input((3, 5))
    v = View((5, 9), (1, 5), -10, ((0, 5), (2, 5)))  # transposed, zero-padded by 2 before and 4 after
    tree = ("Add", "float32", ("Mul", "float32", ("in", 0), ("in", 0)), ("const", 1.0, "float32"))
    b.output(b.custom("fused", [(x, v)], (5, 9), dt.float32, expr=tree))
    return b.g, [rand((3, 5))], {}


def case_reduce(shape, axis, op, d=dt.float32, nan=False):
    b = B()
    x = b.input(shape, d)
    out = tuple(s for k, s in enumerate(shape) if k != axis)
    n = d.name
    tree = ("Mul", n, ("in", 0), ("in", 0)) if op == "sum" else ("Sin", n, ("in", 0))
    b.output(b.custom("fused_reduce", [b.c(x)], out, d, expr=tree, in_shape=shape, axis=axis, reduce=op))
    xv = rand(shape, d, -1.0, 1.0)
    if nan:
        xv.reshape(-1)[3] = np.nan
    return b.g, [xv], {}


def case_matmul(m, k, n, d=dt.float32, batch=(), transposed=False):
    b = B()
    a = b.input(batch + (m, k), d)
    nd = len(batch) + 2
    if transposed:
        w = b.input(batch + (n, k), d)
        vb = View.contiguous(batch + (n, k)).permute(list(range(nd - 2)) + [nd - 1, nd - 2])
    else:
        w = b.input(batch + (k, n), d)
        vb = View.contiguous(batch + (k, n))
    b.output(b.custom("matmul", [b.c(a), (w, vb)], batch + (m, n), d, m=m, n=n, k=k))
    wshape = batch + ((n, k) if transposed else (k, n))
    return b.g, [rand(batch + (m, k), d, -1, 1), rand(wshape, d, -1, 1)], {}


def case_symbolic(s=5):
    b = B()
    x, w = b.input((S, 64)), b.input((64,))
    e = b.custom("fused", [b.c(x), (w, View((S, 64), (0, 1), 0, None))], (S, 64), dt.float32,
                 expr=("Mul", "float32", ("Exp2", "float32", ("in", 0)), ("in", 1)))
    r = b.custom("fused_reduce", [b.c(e)], (S,), dt.float32, expr=("in", 0), in_shape=(S, 64), axis=1,
                 reduce="max")
    io = b.node("Iota", [], (S,), dt.int32, expr=var("z") * 3 + S)
    b.output(e)
    b.output(r)
    b.output(io)
    return b.g, [rand((s, 64)), rand((64,))], {"s": s}


def case_primitives():
    """Primitives with the reference's edge semantics: fmod signs, saturating casts, clamped
    gather, scatter dropping out-of-range indices and keeping the last of repeated ones."""
    b = B()
    x, y, idx = b.input((5, 7)), b.input((7,)), b.input((6,), dt.int32)
    a = b.node("Add", [b.c(x), (y, row(5, 7))], (5, 7))
    md = b.node("Mod", [b.c(x), (y, row(5, 7))], (5, 7))
    big = b.node("Mul", [b.c(x), (b.node("Constant", [], (), value=np.float32(3e9)), View((5, 7), (0, 0), 0, None))],
                 (5, 7))
    ci = b.node("Cast", [b.c(big)], (5, 7), dt.int32)
    s = b.node("SumReduce", [b.c(a)], (5,), axis=1)
    m = b.node("MaxReduce", [b.c(a)], (7,), axis=0)
    ga = b.node("Gather", [b.c(idx), b.c(a)], (6,))
    for mode in ("set", "add", "max"):
        b.output(b.node("Scatter", [(s, View.contiguous((5,))), b.c(idx), (m, View((6,), (1,), 0, None))],
                        (5,), mode=mode))
    for o in (a, md, ci, s, m, ga):
        b.output(o)
    xv = rand((5, 7))
    xv[0, :3] = [np.nan, -np.inf, np.inf]
    return b.g, [xv, rand((7,), lo=0.5, hi=2.0) * np.where(R.random(7) < 0.5, -1, 1).astype(np.float32),
                 np.array([0, 4, 4, 9, -1, 2], np.int32)], {}


def case_scatter_of_one_element():
    """A scatter whose index and source are one element of rank 2 (a sorted 1x1 block's ranks):
    the source was broadcast to the flat index length without flattening it first."""
    b = B()
    d, idx, src = b.input((4,)), b.input((1, 1), dt.int32), b.input((1, 1))
    for mode in ("set", "add", "max"):
        b.output(b.node("Scatter", [b.c(d), b.c(idx), b.c(src)], (4,), mode=mode))
    return b.g, [rand((4,)), np.array([[2]], np.int32), rand((1, 1))], {}


def case_view_of_a_broadcast_result():
    """A fused value of constants only is broadcast to its shape, which MLX keeps as a stride-0
    array; read through a transposing and a padded view, as_strided refused it."""
    b = B()
    x = b.input((2, 3))
    k = b.custom("fused", [], (3, 2), expr=("Add", "float32", ("const", 1.5, "float32"), ("const", 2.0, "float32")))
    b.output(b.node("Add", [b.c(x), (k, View((2, 3), (1, 2), 0, ((0, 1), (0, 3))))], (2, 3)))
    return b.g, [rand((2, 3))], {}


def case_iota_of_a_dim():
    """A static-shaped kernel whose tree reads a dim only through an iota (x.shape[0] * 5 as a
    value): its Metal kernel named s without reading lf_dims, and did not compile."""
    b = B()
    x = b.input((S, 2))
    k = b.custom("fused", [], (1,), dt.int32, expr=("Add", "int32", ("iota", var("s") * 5 + var("z")),
                                                        ("const", 1, "int32")))
    b.output(k)
    b.output(b.node("SumReduce", [b.c(x)], (2,), axis=0))
    s = 3
    return b.g, [rand((s, 2))], {"s": s}


def case_int_mod_and_bool():
    b = B()
    x, y, p = b.input((9,), dt.int32), b.input((9,), dt.int32), b.input((9,), dt.bool_)
    b.output(b.node("Mod", [b.c(x), b.c(y)], (9,), dt.int32))
    b.output(b.node("Add", [b.c(p), b.c(p)], (9,), dt.bool_))
    b.output(b.node("SumReduce", [(p, View((3, 3), (3, 1), 0, None))], (3,), dt.bool_, axis=1))
    return b.g, [np.array([7, -7, 7, -7, 0, 5, -5, 3, 9], np.int32),
                 np.array([3, 3, -3, -3, 2, 0, 0, 1, -4], np.int32), rand((9,), dt.bool_)], {}


CASES = {
    "fused_f32": case_fused,
    "fused_f16": lambda: case_fused(dt.float16),
    "fused_bf16": lambda: case_fused(dt.bfloat16),
    "select_iota_gather_mod": case_select_iota_gather_mod,
    "scatter_of_one_element": case_scatter_of_one_element,
    "view_of_a_broadcast_result": case_view_of_a_broadcast_result,
    "iota_of_a_dim": case_iota_of_a_dim,
    "masked_transposed": case_masked_transposed,
    "reduce_sum_rows": lambda: case_reduce((16, 3000), 1, "sum"),
    "reduce_sum_short": lambda: case_reduce((30, 7), 1, "sum"),
    "reduce_max_cols": lambda: case_reduce((513, 8), 0, "max"),
    "reduce_max_nan": lambda: case_reduce((4, 50), 1, "max", nan=True),
    "reduce_sum_bf16": lambda: case_reduce((8, 300), 1, "sum", dt.bfloat16),
    "matmul_f32": lambda: case_matmul(16, 24, 20),
    "matmul_f16": lambda: case_matmul(9, 32, 10, dt.float16),
    "matmul_i32": lambda: case_matmul(5, 6, 7, dt.int32),
    "matmul_batched_transposed": lambda: case_matmul(5, 7, 3, batch=(2,), transposed=True),
    "symbolic": case_symbolic,
    "primitives": case_primitives,
    "int_mod_and_bool": case_int_mod_and_bool,
}
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def compare(graph, inputs, dims, options=None):
    want = NumpyBackend().compile(graph).run([np.asarray(x) for x in inputs], dims)
    be = get_backend("mlx")
    exe = be.compile(graph, options)
    got = exe.run([be.from_numpy(x) for x in inputs], dims)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g = be.to_numpy(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f" or w.dtype == dt.to_numpy(dt.bfloat16):
            t = TOL.get(graph.nodes[graph.outputs[k]].dtype.name, 2e-5)
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=t, atol=t,
                                       equal_nan=True, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
    return exe


@needs_mlx
@pytest.mark.parametrize("name", sorted(CASES))
def test_llir_mlx_ops(name):
    compare(*CASES[name](), options={"metal": False})


@needs_mlx
@pytest.mark.parametrize("name", ["matmul_f32", "matmul_f16", "matmul_batched_transposed", "matmul_i32"])
def test_llir_generic_matmul(name):
    exe = compare(*CASES[name](), options={"metal": False, "matmul": "generic"})
    assert "matmul_generic" in exe.describe()


@needs_mlx
def test_primitive_edge_values():
    """The reference semantics, asserted on values (not only by agreement with NumPy)."""
    g, ins, dims = case_int_mod_and_bool()
    be = get_backend("mlx")
    out = [be.to_numpy(o) for o in be.compile(g).run([be.from_numpy(x) for x in ins], dims)]
    np.testing.assert_array_equal(out[0], np.fmod(ins[0], np.where(ins[1] == 0, 1, ins[1])) * (ins[1] != 0))
    assert out[0][1] == -1 and out[0][2] == 1  # sign of the dividend, as C
    g, ins, dims = case_primitives()
    out = [be.to_numpy(o) for o in be.compile(g).run([be.from_numpy(x) for x in ins], dims)]
    sset, ci, gathered = out[0], out[5], out[8]
    assert ci[0, 0] == 0 and ci[0, 1] == -2**31 and ci[0, 2] == 2**31 - 1  # NaN, -inf, inf
    big = np.float32(3e9) * ins[0][1:]
    want = np.clip(np.trunc(big.astype(np.float64)), -2**31, 2**31 - 1).astype(np.int32)  # float64 holds 2**31 - 1
    np.testing.assert_array_equal(ci[1:], want)
    a = ins[0] + ins[1]
    np.testing.assert_array_equal(gathered, a.reshape(-1)[np.clip(ins[2], 0, a.size - 1)])
    m = np.max(a, axis=0)
    assert sset[4] == m[2]  # index 4 written twice: the last write wins
    s = np.sum(a, axis=1, dtype=np.float32)
    assert sset[3] == np.float32(s[3]) and sset[1] == np.float32(s[1])  # 9 and -1 dropped


@needs_mlx
def test_weights_stay_mlx_arrays_and_outputs_read_with_numpy():
    w = lf.device_put(np.arange(12, dtype=np.float32).reshape(3, 4), "mlx")
    assert isinstance(w._buf, mx.array)
    f = lf.jit(lambda w, x: w @ x + 1.0, backend="mlx")
    x = np.ones((4, 2), np.float32)
    y = f(w, x)
    assert isinstance(y._buf, mx.array) and y.backend == "mlx"
    np.testing.assert_allclose(np.asarray(y), np.arange(12, dtype=np.float32).reshape(3, 4) @ x + 1.0)
    bf = lf.device_put(np.array([1.5, -2.25], dtype=dt.to_numpy(dt.bfloat16)), "mlx")
    assert np.asarray(bf).dtype == dt.to_numpy(dt.bfloat16) and np.asarray(bf).tolist() == [1.5, -2.25]


@needs_mlx
def test_profile_timeout_and_memory_budget():
    from luminal_fn.backends.mlx.executor import MemoryBudgetError

    g, ins, dims = case_symbolic(s=7)
    be = get_backend("mlx")
    exe = be.compile(g, {"metal": False})
    bufs = [be.from_numpy(x) for x in ins]
    t = exe.profile(bufs, dims, trials=3, timeout_s=30.0)
    assert 0.0 < t < 30.0
    with pytest.raises(TimeoutError, match="longer than 0"):
        exe.profile(bufs, dims, trials=3, timeout_s=0.0)
    need = exe.buffer_bytes(dims)
    assert need == 7 * 64 * 4 + 7 * 4 + 7 * 4
    with pytest.raises(MemoryBudgetError, match="MiB"):
        exe.profile(bufs, dims, trials=1, timeout_s=30.0, max_memory_mib=need / 2**20 / 2)


@needs_mlx
@pytest.mark.skipif(HAVE_METAL, reason="checks the error on machines without Metal")
def test_metal_option_without_metal_is_clear():
    with pytest.raises(BackendUnavailable, match="is_available"):
        get_backend("mlx").compile(case_fused()[0], {"metal": True})


@needs_mlx
def test_metal_failure_names_kernel_and_saves_source(tmp_path, monkeypatch):
    import types

    from luminal_fn.backends.mlx import metal_host
    from luminal_fn.backends.mlx.metal_host import MetalCompileError, MetalKernels

    def failing_eval(*arrays):
        raise RuntimeError("[metal::Device] Unable to build metal library from source")

    monkeypatch.setattr(metal_host, "mx", types.SimpleNamespace(eval=failing_eval))

    g, _, _ = case_reduce((4, 300), 1, "sum")
    mk = MetalKernels(g, {"metal_source_dir": str(tmp_path)})
    nid = next(n.id for n in g.live_nodes() if n.op == "CustomOp")
    node = g.nodes[nid]
    mk.by_node[nid] = kernel_for(node, [KernelInput(v, dt.float32) for _, v in node.inputs])
    with pytest.raises(MetalCompileError) as err:
        mk.check(nid, None)  # evaluation fails as MLX reports a Metal build error
    name = mk.by_node[nid].name
    assert name in str(err.value) and "fused_reduce" in str(err.value) and "Unable to build" in str(err.value)
    saved = tmp_path / f"{name}.metal"
    assert saved.exists() and "threadgroup_barrier" in saved.read_text()


# ---- the traced equivalence suite with backend "mlx" --------------------------------------------------
def _equivalence_cases():
    import test_numpy_equivalence as eq

    out = []
    for name, fn in vars(eq).items():
        if not name.startswith("test_") or not callable(fn):
            continue
        grids = [{}]
        for mark in getattr(fn, "pytestmark", []):
            if mark.name != "parametrize":
                continue
            names, values = mark.args[0], mark.args[1]
            names = [s.strip() for s in names.split(",")] if isinstance(names, str) else list(names)
            grids = [{**g, **dict(zip(names, v if len(names) > 1 else (v,)))} for g in grids for v in values]
        for k, kw in enumerate(grids):
            out.append(pytest.param(fn, kw, id=f"{name}-{k}"))
    return out


EQUIVALENCE = _equivalence_cases()


def test_equivalence_cases_imported():
    assert len(EQUIVALENCE) > 150


@needs_mlx
@pytest.mark.parametrize("fn,kwargs", EQUIVALENCE)
def test_equivalence_with_mlx(fn, kwargs, monkeypatch):
    monkeypatch.setenv("LUMINAL_BACKEND", "mlx")
    monkeypatch.setenv("LUMINAL_SEARCH_LIMIT", "12")  # a short search: each candidate runs on MLX and is checked
    # the suite draws inputs from its module-level generator: a fresh one keeps this run
    # repeatable and leaves the NumPy run's draws as they would be without this file
    monkeypatch.setattr(sys.modules[fn.__module__], "R", np.random.default_rng(7))
    assert get_backend().name == "mlx"
    fn(**kwargs)


def _genome_fuzz_cases():
    import luminal_fn.numpy as lnp
    from luminal_fn import nn

    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8,)).astype(np.float32)
    return {
        "softmax": (lambda x: nn.softmax(x, axis=-1), (x,)),
        "linear_relu": (lambda x, w, b: lnp.maximum(x @ w + b, 0.0), (x, w, b)),
        "rms_norm": (lambda x: x / lnp.sqrt(lnp.mean(x * x, axis=-1, keepdims=True) + 1e-5), (x,)),
        "strided_slices": (lambda x: x[:, ::-2][1:3] * 2.0, (x,)),
    }


@needs_mlx
@pytest.mark.parametrize("name", ["softmax", "linear_relu", "rms_norm", "strided_slices"])
def test_random_genomes_match_numpy(name):
    """Every implementation the optimizer can extract (sampled genomes) computes on MLX what
    the NumPy backend computes for the same LLIR."""
    import random

    fn, args = _genome_fuzz_cases()[name]
    program = lf.jit(fn, backend="mlx", search={"progress": False}).trace(*args).lower().program
    ex = getattr(program, "extractor", None)
    if ex is None:
        pytest.skip("this optimizer build exposes no extractor to sample genomes from")
    space = ex.space()
    rng = random.Random(0)
    n = min(space.count(), 12)
    genomes = [space.genome_at(k) for k in range(n)] if space.count() <= 12 else \
        [space.random_genome(rng) for _ in range(n)]
    kinds = set()
    for genome in genomes:
        llir = ex.extract(genome)
        kinds |= {nd.attrs.get("name") for nd in llir.live_nodes() if nd.op == "CustomOp"}
        compare(llir, list(args), {}, options={"metal": False})
    if name in ("softmax", "rms_norm"):
        assert kinds & {"fused", "fused_reduce"}, kinds


# ---- Metal sources (structure; no Metal needed) --------------------------------------------------------
def _kernels_of(graph, name=None):
    out = {}
    for node in graph.live_nodes():
        ins = [KernelInput(v, graph.nodes[i].dtype) for i, v in node.inputs]
        k = kernel_for(node, ins, name if node.op == "CustomOp" else None)
        if k is not None:
            out[node.id] = k
    return out


ALL_KINDS = sorted(CASES) + ["matmul_generic"]


def _all_kernels():
    """(case name, graph, {node id: kernel}) for every case, plus the generic matmul."""
    for name in sorted(CASES):
        g = CASES[name]()[0]
        yield name, g, _kernels_of(g)
    g = case_matmul(5, 40, 3, batch=(2,), transposed=True)[0]
    yield "matmul_generic", g, _kernels_of(g, "matmul_generic")


def test_every_kernel_kind_renders():
    kinds = set()
    for name, _g, ks in _all_kernels():
        for nid, k in ks.items():
            assert isinstance(k, MetalKernel)
            assert "kernel void" not in k.body and "[[buffer" not in k.body, f"{name}: body only"
            assert "out[" in k.body
            assert all(n in k.body for n in k.input_names)
            kinds.add(k.kind)
    assert kinds == {"ew", "red", "tree"}
    # primitives rendered: unary/binary/cast/iota/gather/reduce; library matmul, scatter, constants stay MLX ops
    ops = {g.nodes[n].op for g in [case_primitives()[0]] for n in _kernels_of(g)}
    assert ops == {"Add", "Mod", "Mul", "Cast", "SumReduce", "MaxReduce", "Gather"}
    assert _kernels_of(case_matmul(4, 4, 4)[0]) == {}


def test_reduction_source_is_a_threadgroup_tree():
    g, _, _ = case_reduce((16, 3000), 1, "sum")
    (k,) = _kernels_of(g).values()
    b = k.body
    assert k.kind == "tree" and k.input_names == ["b0"] and k.block == BLOCK
    assert f"threadgroup float lf_tree[{BLOCK}];" in b
    assert "threadgroup_position_in_grid" in b and "thread_position_in_threadgroup" in b
    assert b.count("threadgroup_barrier(mem_flags::mem_threadgroup);") == 3
    assert f"for (uint s = {BLOCK // 2}; s > 0; s >>= 1)" in b
    assert "if (tid < s) lf_tree[tid] = (lf_tree[tid] + lf_tree[tid + s]);" in b
    assert "simd_" not in b and "lf_shfl" not in b  # portable: no SIMD shuffles
    assert "b0[base0 + r]" in b and "const int base0 = c0 * 3000;" in b
    assert "if (tid == 0) out[o] = lf_tree[0];" in b
    assert k.launch({}) == ((16 * BLOCK, 1, 1), (BLOCK, 1, 1))  # one threadgroup per row, in threads
    gm, _, _ = case_reduce((4, 50), 1, "max")
    (km,) = _kernels_of(gm).values()
    assert "lf_max(lf_tree[tid], lf_tree[tid + s])" in km.body and "(-LF_INF)" in km.body
    short = _kernels_of(case_reduce((30, 7), 1, "sum")[0])
    assert [k.kind for k in short.values()] == ["red"] and "threadgroup" not in next(iter(short.values())).body.replace(
        "threadgroup_position_in_grid", "").replace("thread_position_in_threadgroup", "").replace(
        "threads_per_threadgroup", "").replace("threadgroups_per_grid", "")


def test_fused_source_reads_views_and_dims():
    g, _, _ = case_fused()
    (k,) = _kernels_of(g).values()
    assert k.kind == "ew" and k.input_names == ["b0", "b1"] and k.input_roles == [0, 1]
    b = k.body
    assert "const int n = 148;" in b
    assert "b0[" in b and "b1[c1]" in b  # the broadcast row reads only the column coordinate
    assert "exp2(" in b and "1.0f / " in b and "out[i] = " in b
    gs, _, dims = case_symbolic()
    ks = _kernels_of(gs)
    fused = next(k for k in ks.values() if k.kind == "ew" and "exp2" in k.body)
    assert fused.input_names[-1] == "lf_dims" and fused.dims == ["s"] and "const int d_s = lf_dims[0];" in fused.body
    assert fused.launch({"s": 5})[0][0] == 256 * 2  # 320 elements -> 2 threadgroups
    masked = next(iter(_kernels_of(case_masked_transposed()[0]).values()))
    assert ">= 2" in masked.body and "< 5" in masked.body and "0.0f)" in masked.body  # the pad test


def test_gather_source_clamps_and_indexes():
    g, _, _ = case_primitives()
    ks = _kernels_of(g)
    nid = next(n for n in ks if g.nodes[n].op == "Gather")
    b = ks[nid].body
    assert ks[nid].input_names == ["b0", "b1"]
    assert "int g0_i = (int)(t0); g0_i = g0_i < 0 ? 0 : (g0_i >= 35 ? 35 - 1 : g0_i);" in b
    assert "g0_c1 = g0_c_r % 7" in b and "b1[g0_c0 * 7 + g0_c1]" in b
    cast = next(ks[n].body for n in ks if g.nodes[n].op == "Cast")
    assert "lf_f2i(" in cast
    mod = next(ks[n].body for n in ks if g.nodes[n].op == "Mod")
    assert "fmod(" in mod
    bf = next(iter(_kernels_of(case_fused(dt.bfloat16)[0]).values()))
    assert "bfloat16_t(" in bf.body and "float(b0[" in bf.body


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_rendered_kernels_type_check_as_cpp(tmp_path):
    """Every kernel (float16/bfloat16 included) compiles as C++ against a stand-in for Metal."""
    from mlx_metal_emulation import typecheck

    jobs = []
    for _name, g, ks in _all_kernels():
        for nid, k in ks.items():
            node = g.nodes[nid]
            jobs.append((k, ["int32" if role == "dims" else g.nodes[node.inputs[role][0]].dtype.name
                             for role in k.input_roles]))
    assert len(jobs) >= 20
    err = typecheck(jobs, str(tmp_path))
    assert err is None, err


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_rendered_kernels_compute_the_reference_on_a_cpu_emulation(tmp_path):
    """The Metal bodies run as C++ threads (a std::barrier per threadgroup) with the backend's
    launch sizes; each kernel's output matches the NumPy value of its node."""
    from mlx_metal_emulation import emulate

    cases = {**CASES, "generic_matmul": lambda: case_matmul(5, 40, 3, batch=(2,), transposed=True)}
    results = emulate(cases, str(tmp_path), kinds={"generic_matmul": "matmul_generic"})
    assert {kind for _, _, kind, _, _ in results} == {"ew", "red", "tree"} and len(results) >= 20
    for case, nid, kind, out, ref in results:
        msg = f"{case} %{nid} ({kind})"
        if ref.dtype.kind == "f":
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=msg)
        else:
            np.testing.assert_array_equal(out, ref, err_msg=msg)


@needs_mlx
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_metal_host_path_with_emulated_kernels(tmp_path, monkeypatch):
    """The Metal path's host logic (kernel per node, input roles, flattened producer buffers,
    the lf_dims array, launch in threads, output reshape, MLX ops for the rest) through
    MLXExecutable, with mx.fast.metal_kernel replaced by the CPU emulation of the same source."""
    import types

    from luminal_fn.backends.mlx import metal_host
    from luminal_fn.backends.mlx.executor import MLXExecutable
    from luminal_fn.backends.mlx.metal import PRELUDE
    from luminal_fn.backends.mlx.ops import to_mlx
    from mlx_metal_emulation import NP_TYPES, build_library, in_types, launch

    library = {}
    calls = []

    def fake_metal_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True):
        assert output_names == ["out"] and header == PRELUDE and "kernel void" not in source

        def call(inputs, output_shapes, output_dtypes, grid, threadgroup, **kw):
            assert len(inputs) == len(input_names) and grid[0] % threadgroup[0] == 0
            bufs = [np.ascontiguousarray(np.array(x)) for x in inputs]
            (shape,) = output_shapes
            out = np.zeros(shape, NP_TYPES[{mx.float32: "float32", mx.int32: "int32", mx.bool_: "bool"}[output_dtypes[0]]])
            launch(library["so"], name, bufs, out, grid[0] // threadgroup[0], threadgroup[0])
            calls.append(name)
            return [mx.array(out)]

        return call

    class MxWithFakeMetal:
        fast = types.SimpleNamespace(metal_kernel=fake_metal_kernel)

        def __getattr__(self, attr):
            return getattr(mx, attr)

    monkeypatch.setattr(metal_host, "mx", MxWithFakeMetal())
    monkeypatch.setattr(metal_host.MetalKernels, "_compiled", {})
    names = ["fused_f32", "select_iota_gather_mod", "masked_transposed", "reduce_sum_rows", "reduce_max_nan",
             "symbolic", "primitives", "int_mod_and_bool", "matmul_f32"]
    runs, pairs = [], []
    for name in names:
        graph, ins, dims = CASES[name]()
        opts = {"matmul": "generic"} if name.startswith("matmul") else {}
        exe = MLXExecutable(graph, opts, metal_host.MetalKernels(graph, opts))
        for nid, mk in exe.metal.by_node.items():
            pairs.append((mk, in_types(graph, graph.nodes[nid], mk)))
        runs.append((name, graph, ins, dims, exe))
    assert all(t is not None for _, t in pairs) and len(pairs) >= 15
    library["so"] = build_library(pairs, str(tmp_path))
    for name, graph, ins, dims, exe in runs:
        want = NumpyBackend().compile(graph).run([np.asarray(x) for x in ins], dims)
        got = exe.run([to_mlx(x) for x in ins], dims)
        assert "metal" in exe.describe()
        for k, (g, w) in enumerate(zip(got, want)):
            g = np.array(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (name, k)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, equal_nan=True, err_msg=f"{name} {k}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{name} {k}")
    assert len(calls) >= len(pairs)


# ---- executing Metal (Apple silicon only) ----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.metal
@pytest.mark.skipif(not HAVE_METAL, reason="needs Apple Metal (mx.metal.is_available() is False)")
def test_llir_metal(name):
    exe = compare(*CASES[name](), options={"metal": True})
    assert "metal" in exe.describe()


@pytest.mark.parametrize("name", ["matmul_f32", "matmul_f16", "matmul_batched_transposed", "matmul_i32"])
@pytest.mark.metal
@pytest.mark.skipif(not HAVE_METAL, reason="needs Apple Metal (mx.metal.is_available() is False)")
def test_llir_metal_generic_matmul(name):
    exe = compare(*CASES[name](), options={"metal": True, "matmul": "generic"})
    assert "matmul_generic:metal" in exe.describe()


@pytest.mark.metal
@pytest.mark.skipif(not HAVE_METAL, reason="needs Apple Metal (mx.metal.is_available() is False)")
@pytest.mark.parametrize("fn,kwargs", EQUIVALENCE[::7])
def test_equivalence_with_metal(fn, kwargs, monkeypatch):
    monkeypatch.setenv("LUMINAL_BACKEND", "mlx")
    monkeypatch.setenv("LUMINAL_SEARCH_LIMIT", "12")
    monkeypatch.setattr(sys.modules[fn.__module__], "R", np.random.default_rng(7))
    assert get_backend().metal
    fn(**kwargs)

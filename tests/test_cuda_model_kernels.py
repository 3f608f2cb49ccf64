"""The CUDA backend's model kernels (embedding_bag, dlrm_interact, conv2d_bias, linear_bias,
matmul_t; backends/cuda/modelkernels.py).

CPU (any machine): every case plans (views, materialised operands, params, launch shapes) and the
module of all of them compiles with ``nvcc -arch=sm_90 --ptx`` where nvcc is installed; graphs the
optimizer extracts with these kernels plan too. GPU (marked ``gpu``, skipped without one): each
case against the NumPy backend's model kernels (the reference semantics), random genomes that
use each kernel, and a jitted DLRM-style function with backend="cuda" against backend="numpy".
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.executable import launch_shape, plan_graph
from luminal_fn.backends.cuda.modelkernels import MODEL_KINDS
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check
from luminal_fn.backends.numpy.model_kernels import MODEL_KERNELS
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.expr import var
from luminal_fn.ir.view import View

from cuda_cases import TOLERANCE, B, isolated_kernels, rand

S = var("s")
R = np.random.default_rng(5)


# ---- cases: name -> () -> (graph, inputs, dims) ------------------------------------------------
def emb_basic(d=dt.float32, bsz=6, bag=3, dim=8, rows=50):
    """(rows, dim) table, rows (B*L,), the row stride a scalar Constant (as lnp.take traces)."""
    b = B()
    t, r = b.input((rows, dim), d), b.input((bsz * bag,), dt.int32)
    c = b.const(dim)
    g = b.kernel_graph("embedding_bag", [b.c(t), b.c(r), (c, View((1,), (0,), 0, None))], (bsz, dim),
                (bsz, bag, dim), d)
    return g, [rand((rows, dim), d), R.integers(0, rows, bsz * bag).astype(np.int32)], {}


def emb_stride_buffer_clamped():
    """Row stride 5 (not D) read from a buffer; negative and too-large rows hit the clamp."""
    b = B()
    t, r, st = b.input((20, 8)), b.input((12,), dt.int32), b.input((1,), dt.int32)
    g = b.kernel_graph("embedding_bag", [b.c(t), b.c(r), b.c(st)], (4, 8), (4, 3, 8))
    rows = R.integers(-3, 40, 12).astype(np.int32)
    return g, [rand((20, 8)), rows, np.array([5], np.int32)], {}


def emb_symbolic_batch():
    """B = s (a dim of the call); rows a strided view; the table a transposed (materialised) view."""
    b = B()
    t, r = b.input((8, 30)), b.input((S * 3, 2), dt.int32)  # rows in column 1 of (s*3, 2)
    c = b.const(8)
    tv = View((30, 8), (1, 30), 0, None)  # the table read transposed: not linear, copied first
    rv = View((S * 3,), (2,), 1, None)
    g = b.kernel_graph("embedding_bag", [(t, tv), (r, rv), (c, View((1,), (0,), 0, None))], (S, 8),
                (S, 3, 8))
    s = 5
    return g, [rand((8, 30)), R.integers(0, 30, (s * 3, 2)).astype(np.int32)], {"s": s}


def emb_int32():
    return emb_basic(dt.int32, bsz=5, bag=4, dim=3, rows=9)


def emb_bf16():
    return emb_basic(dt.bfloat16, bsz=7, bag=2, dim=64, rows=33)


def dlrm_basic(bsz=5, f=5, dim=6, d=dt.float32):
    b = B()
    t = b.input((bsz, f, dim), d)
    g = b.kernel_graph("dlrm_interact", [b.c(t)], (bsz, f * (f - 1) // 2), (bsz, f, dim), d)
    return g, [rand((bsz, f, dim), d, -1, 1)], {}


def dlrm_dlrm_shape():
    return dlrm_basic(64, 9, 64)  # num_cat 8 at D 64 (P = 36: several pairs per warp)


def dlrm_many_pairs():
    return dlrm_basic(3, 33, 64)  # num_cat 32: 528 pairs, one sample a block, 4+ pairs a thread


def dlrm_strided_symbolic():
    """T read from a (F, s, D) buffer as (s, F, D), B = s."""
    b = B()
    t = b.input((4, S, 40))
    v = View((S, 4, 40), (40, S * 40, 1), 0, None)
    g = b.kernel_graph("dlrm_interact", [(t, v)], (S, 6), (S, 4, 40))
    return g, [rand((4, 7, 40), lo=-1, hi=1)], {"s": 7}


def dlrm_masked():
    """A padded view (zero rows past the data): materialised before the kernel."""
    b = B()
    t = b.input((3, 4, 5))
    v = View((3, 6, 5), (20, 5, 1), 0, ((0, 3), (0, 4), (0, 5)))
    g = b.kernel_graph("dlrm_interact", [(t, v)], (3, 15), (3, 6, 5))
    return g, [rand((3, 4, 5), lo=-1, hi=1)], {}


def dlrm_no_shared():
    """F * D * 4 bytes beyond 48 KiB: the kernel reads T from global memory."""
    return dlrm_basic(3, 4, 3200)


def dlrm_f16():
    return dlrm_basic(4, 7, 33, dt.float16)


def conv_case(c=2, h=7, w=6, co=4, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pt=1, pl=1, ho=None,
              wo=None, batch=None, d=dt.float32, x_view=None):
    ho = ho if ho is not None else (h + 2 * pt - dh * (kh - 1) - 1) // sh + 1
    wo = wo if wo is not None else (w + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    b = B()
    xshape = (c, h, w) if batch is None else (batch, c, h, w)
    x = b.input(xshape, d)
    wt, bias = b.input((co, c * kh * kw), d), b.input((co,), d)
    out = (co, ho, wo) if batch is None else (batch, co, ho, wo)
    xe = b.c(x) if x_view is None else (x, x_view)
    g = b.kernel_graph("conv2d_bias", [xe, b.c(wt), b.c(bias)], out, (kh, kw, sh, sw, dh, dw, pt, pl, ho, wo), d)
    return g, [rand(xshape, d, -1, 1), rand((co, c * kh * kw), d, -1, 1), rand((co,), d, -1, 1)], {}


def conv_padded_3x3():
    return conv_case()


def conv_seed_2x3x3():
    return conv_case(c=2, h=3, w=3, co=3)  # the seed's case: 2x3x3 input, 3x3 kernel, padding 1


def conv_stride_dilation_asym_pad():
    return conv_case(c=3, h=9, w=8, co=5, sh=2, sw=1, dh=1, dw=2, pt=1, pl=2)


def conv_1x1_strided_input():
    """A 1x1 conv over x read pixel-major from an (H, W, C) buffer."""
    b = B()
    x = b.input((4, 5, 3))
    xv = View((3, 4, 5), (1, 15, 3), 0, None)
    wt, bias = b.input((6, 3)), b.input((6,))
    g = b.kernel_graph("conv2d_bias", [(x, xv), b.c(wt), b.c(bias)], (6, 4, 5), (1, 1, 1, 1, 1, 1, 0, 0, 4, 5))
    return g, [rand((4, 5, 3)), rand((6, 3)), rand((6,))], {}


def conv_batched():
    return conv_case(c=2, h=6, w=5, co=3, batch=3)


def conv_large_filter():
    """C * kh * kw * 4 bytes beyond 48 KiB: the filter is read from global memory."""
    return conv_case(c=1400, h=3, w=3, co=2)


def conv_f16():
    return conv_case(c=3, h=5, w=5, co=2, d=dt.float16)


def linear_case(m, k, n, d=dt.float32, bias_const=None):
    b = B()
    x, w = b.input((m, k), d), b.input((k, n), d)
    if bias_const is None:
        bias = b.input((n,), d)
        be = b.c(bias)
    else:
        bias = b.const(bias_const, d)
        be = (bias, View((n,), (0,), 0, None))
    g = b.kernel_graph("linear_bias", [b.c(x), b.c(w), be], (m, n), (m, n, k), d)
    ins = [rand((m, k), d, -1, 1), rand((k, n), d, -1, 1)] + ([rand((n,), d, -1, 1)] if bias_const is None else [])
    return g, ins, {}


def linear_f32():
    return linear_case(33, 20, 17)  # cuBLAS


def linear_bf16():
    return linear_case(9, 24, 16, dt.bfloat16)  # the rendered reduction


def linear_gemv_f16():
    return linear_case(1, 64, 48, dt.float16)  # one row: the GEMV kernel


def linear_scalar_bias():
    return linear_case(5, 7, 6, bias_const=0.5)


def linear_symbolic_rows():
    b = B()
    x, w, bias = b.input((S, 12)), b.input((12, 10)), b.input((10,))
    g = b.kernel_graph("linear_bias", [b.c(x), b.c(w), b.c(bias)], (S, 10), (S, 10, 12))
    return g, [rand((6, 12)), rand((12, 10)), rand((10,))], {"s": 6}


def matmul_t_case(bt, m, n, k, d=dt.float32):
    b = B()
    a, c = b.input((bt, m, k), d), b.input((bt, n, k), d)
    g = b.kernel_graph("matmul_t", [b.c(a), b.c(c)], (bt, m, n), (bt, m, n, k), d)
    return g, [rand((bt, m, k), d, -1, 1), rand((bt, n, k), d, -1, 1)], {}


def matmul_t_f32():
    return matmul_t_case(2, 5, 4, 3)


def matmul_t_bf16():
    return matmul_t_case(3, 6, 7, 16, dt.bfloat16)


def matmul_t_gemv_f16():
    return matmul_t_case(1, 1, 24, 64, dt.float16)


CASES = {f.__name__: f for f in [
    emb_basic, emb_stride_buffer_clamped, emb_symbolic_batch, emb_int32, emb_bf16,
    dlrm_basic, dlrm_dlrm_shape, dlrm_many_pairs, dlrm_strided_symbolic, dlrm_masked, dlrm_no_shared, dlrm_f16,
    conv_padded_3x3, conv_seed_2x3x3, conv_stride_dilation_asym_pad, conv_1x1_strided_input,
    conv_batched, conv_large_filter, conv_f16,
    linear_f32, linear_bf16, linear_gemv_f16, linear_scalar_bias, linear_symbolic_rows,
    matmul_t_f32, matmul_t_bf16, matmul_t_gemv_f16]}

KIND_OF = {"emb": "embedding_bag", "dlrm": "dlrm_interact", "conv": "conv2d_bias",
           "linear": "linear_bias", "matmul_t": "matmul_t"}


def _kind(case: str) -> str:
    return next(v for k, v in KIND_OF.items() if case.startswith(k))


def _bucket(dims):
    return {k: 1 << max(0, (v - 1).bit_length()) for k, v in dims.items()}


# ---- CPU: planning and nvcc -------------------------------------------------------------------
def test_kernel_kinds_cover_the_model_rules():
    assert set(MODEL_KINDS) == set(MODEL_KERNELS)
    assert set(MODEL_KINDS) <= KERNEL_KINDS
    assert {_kind(c) for c in CASES} == set(MODEL_KINDS)


def _plan(name):
    g, _, dims = CASES[name]()
    return plan_graph(g, _bucket(dims))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_model_case_plans(name):
    bp = _plan(name)
    labels = [s.label for s in bp.steps]
    kind = _kind(name)
    assert any(lab.startswith(kind) or (kind == "matmul_t" and lab.startswith("matmul"))
               for lab in labels), (name, labels)
    for step in bp.steps:
        src = getattr(step, "source", None)
        if src is None:
            continue
        assert len(step.bufs) == len(src.buffers), name
        assert src.text.count("{") == src.text.count("}"), name
        grid, block = launch_shape(src, bp.dims_max, 132)
        assert all(1 <= x <= 2**31 - 1 for x in grid) and 32 <= block[0] <= 1024, (name, grid, block)
        assert grid[1] <= 65535 and grid[2] <= 65535, (name, grid)
        assert src.shared_bytes <= 48 * 1024, name


def test_model_case_plans_pick_the_expected_paths():
    labels = {name: [s.label for s in _plan(name).steps] for name in CASES}
    assert labels["linear_f32"] == ["matmul (cuBLAS)", "linear_bias (bias add)"]
    assert labels["linear_gemv_f16"][0].startswith("matmul (gemv")
    assert labels["linear_bf16"] == ["matmul (cuBLAS)", "linear_bias (bias add)"]
    assert labels["matmul_t_f32"] == ["matmul (cuBLAS)", "output copy"]  # capturable
    assert labels["matmul_t_gemv_f16"] == ["matmul (gemv nk)"]  # K is the unit-stride axis of c
    assert labels["emb_symbolic_batch"] == ["materialize", "embedding_bag"]  # transposed table
    assert labels["emb_basic"] == ["embedding_bag"]
    assert labels["dlrm_masked"] == ["materialize", "dlrm_interact"]
    assert labels["dlrm_strided_symbolic"] == ["dlrm_interact"]  # strides, no copy
    assert labels["conv_1x1_strided_input"] == ["conv2d_bias"]
    # linear_bias output written by the bias add, the product lives in scratch only
    bp = _plan("linear_f32")
    host, add = bp.steps
    assert bp.bufs[host.bufs[-1]].kind == "scratch" and add.bufs[0] == host.bufs[-1]


def test_shared_memory_only_where_it_fits():
    def model_src(name, kind):
        return next(s.source for s in _plan(name).steps if s.label == kind)

    assert model_src("dlrm_basic", "dlrm_interact").shared_bytes == 13 * 5 * 7 * 4  # 13 samples, rows padded to 7
    assert model_src("dlrm_no_shared", "dlrm_interact").shared_bytes == 0
    assert model_src("conv_padded_3x3", "conv2d_bias").shared_bytes == 2 * 9 * 4
    assert model_src("conv_large_filter", "conv2d_bias").shared_bytes == 0
    assert "__syncthreads" not in model_src("conv_large_filter", "conv2d_bias").text


def test_symbolic_params_come_from_the_dims_table():
    for name in ("emb_symbolic_batch", "dlrm_strided_symbolic", "linear_symbolic_rows"):
        bp = _plan(name)
        # (the materialised table of emb_symbolic_batch is static; linear_symbolic_rows' cuBLAS
        # product is a host step and its bias add reads s)
        ks = [s.source for s in bp.steps if getattr(s, "source", None) is not None and s.label != "materialize"]
        assert ks and all(k.dims == ["s"] for k in ks), name
    bp = _plan("dlrm_strided_symbolic")
    (k,) = bp.kernels()
    # F = 4 (6 pairs a sample): 22 samples share a block of 128 threads, at the bucket's max s
    assert launch_shape(k, {"s": 50}, 132)[0] == (3, 1, 1)


def test_scalar_row_stride_is_a_literal_and_a_buffer_stride_is_read():
    (k,) = _plan("emb_basic").kernels()
    assert k.buffers == ["in0", "in1", "out"] and "rstride = (long long)((8))" in k.text
    (k,) = _plan("emb_stride_buffer_clamped").kernels()
    assert k.buffers == ["in0", "in1", "in2", "out"] and "b2[0]" in k.text


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
def test_model_kernel_modules_compile_with_nvcc():
    kernels = []
    for name in sorted(CASES):
        kernels += _plan(name).kernels()
    kernels += [k for ll in _extracted_llirs() for k in plan_graph(ll, {}).kernels()]
    text = module_source(kernels)
    for kind in ("embedding_bag", "dlrm_interact", "conv2d_bias", "gemv"):
        assert f"lf_{kind}_" in text, kind
    nvcc_check(text)


# ---- graphs the optimizer extracts with these kernels --------------------------------------------
def _feats(f, bsz=5, dim=3):
    return [R.standard_normal((bsz, dim)).astype(np.float32) for _ in range(f)]


def _f32(*s):
    return R.standard_normal(s).astype(np.float32)


E2E = {
    "embedding_bag": (lambda t, i: lf.nn.embedding_bag(t, i),
                      lambda: [_f32(10, 4), R.integers(-10, 10, (3, 2)).astype(np.int32)]),
    "dlrm_interact": (lambda *xs: lf.nn.pairwise_dot(list(xs)), lambda: _feats(4)),
    "conv2d_bias": (lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1),
                    lambda: [_f32(2, 6, 5), _f32(3, 2, 3, 3), _f32(3)]),
    "linear_bias": (lf.nn.linear, lambda: [_f32(5, 3), _f32(3, 4), _f32(4)]),
    "matmul_t": (lambda a, c: a @ lnp.transpose(c, (0, 2, 1)), lambda: [_f32(2, 5, 3), _f32(2, 4, 3)]),
    "conv2d_bias/batched": (lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1, stride=(1, 2)),
                            lambda: [_f32(2, 2, 5, 6), _f32(3, 2, 3, 3), _f32(3)]),
    "dlrm_interact/model": (lambda *a: _dlrm_like_flat(*a), lambda: list(_dlrm_like_args())),
}


def _genomes_using(name, tries=24, kind=None):
    """(args, LLIR graph) for extracted genomes of case ``name`` that use kernel ``kind`` (default:
    the kernel the case is about; skipped without egglog)."""
    egraph_mod = pytest.importorskip("luminal_fn.optimize.egraph")
    extract_mod = pytest.importorskip("luminal_fn.optimize.extract")
    fn, make = E2E[name]
    name = kind or name.split("/")[0]
    args = make()
    graph = lf.jit(fn).trace(*args).hlir
    ex = extract_mod.Extractor(egraph_mod.build_egraph(graph), graph, kernel_kinds=KERNEL_KINDS)
    rnd = random.Random(0)
    out, seen = [], set()
    for t in range(tries):
        genome = None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes)
        ll = ex.extract(genome)
        if any(n.op == "CustomOp" and n.attrs.get("name") == name for n in ll.live_nodes()):
            key = tuple(n.key() for n in ll.live_nodes())
            if key not in seen:
                seen.add(key)
                out.append((args, graph, ll))
    return out


_LLIR_CACHE: dict = {}


def _extracted_llirs():
    if "all" not in _LLIR_CACHE:
        _LLIR_CACHE["all"] = [ll for name in sorted(E2E) for _, _, ll in _genomes_using(name, 12)]
    return _LLIR_CACHE["all"]


@pytest.mark.parametrize("name", sorted(E2E))
def test_extracted_graphs_with_each_kernel_plan(name):
    found = _genomes_using(name, 12)
    assert found, f"no extracted genome used the {name} kernel"
    for _, _, ll in found:
        bp = plan_graph(ll, {})
        kind = name.split("/")[0]
        assert any(s.label.startswith(kind) or s.label.startswith("matmul") for s in bp.steps), name


# ---- GPU: against the NumPy backend ----------------------------------------------------------------
def _close(got, want, d, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != reference {want.shape}"
    if d.is_float:
        rtol, atol = TOLERANCE[d.name]  # summation order differs (long sums: conv_large_filter)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=max(rtol, 1e-4), atol=atol * 10, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_model_kernel_matches_numpy_on_gpu(name):
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.numpy import NumpyBackend

    cuda = get_backend("cuda")
    g, ins, dims = CASES[name]()
    want = NumpyBackend().compile(g).run([np.asarray(x) for x in ins], dims)
    exe = cuda.compile(g)
    for call in (1, 2):  # the second call replays the captured CUDA graph (or the same launches)
        got = exe.run([cuda.from_numpy(x) for x in ins], dims)
        for k, (o, w, nid) in enumerate(zip(got, want, g.outputs)):
            shapes = [tuple(x.shape) for x in ins]
            _close(cuda.to_numpy(o), w, g.nodes[nid].dtype,
                   f"CUDA {_kind(name)} case {name} (inputs {shapes}, dims {dims}), output {k}, call {call}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(E2E))
def test_extracted_genomes_with_each_kernel_match_on_gpu(name):
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.numpy import NumpyBackend

    cuda = get_backend("cuda")
    found = _genomes_using(name)
    assert found, f"no extracted genome used the {name} kernel"
    for j, (args, graph, ll) in enumerate(found):
        want = NumpyBackend().compile(graph).run([np.asarray(a) for a in args], {})[0]
        got = cuda.to_numpy(cuda.compile(ll).run([cuda.from_numpy(a) for a in args], {})[0])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"CUDA {name}: extracted genome {j} of {name} "
                                           f"(input shapes {[a.shape for a in args]})")


def _dlrm_like_flat(dense, w1, b1, w2, b2, t0, t1, i0, i1):
    fn, _ = _dlrm_like(2)
    return fn(dense, w1, b1, w2, b2, [t0, t1], [i0, i1])


def _dlrm_like_args():
    _, (dense, w1, b1, w2, b2, tables, idx) = _dlrm_like(2, batch=8)
    return (dense, w1, b1, w2, b2, *tables, *idx)


def _dlrm_like(num_cat=3, batch=32, rows=40, dim=16, bag=4):
    rng = np.random.default_rng(3)
    dense = rng.standard_normal((batch, 8)).astype(np.float32)
    w1, b1 = (rng.standard_normal((8, dim)) / 3).astype(np.float32), rng.standard_normal(dim).astype(np.float32)
    tables = [(rng.standard_normal((rows, dim)) / 4).astype(np.float32) for _ in range(num_cat)]
    idx = [rng.integers(0, rows, (batch, bag)).astype(np.int32) for _ in range(num_cat)]
    f = 1 + num_cat
    w2 = (rng.standard_normal((dim + f * (f - 1) // 2, 1)) / 4).astype(np.float32)
    b2 = rng.standard_normal(1).astype(np.float32)

    def fn(dense, w1, b1, w2, b2, tables, idx):
        x = lf.nn.relu(lf.nn.linear(dense, w1, b1))
        sparse = [lf.nn.embedding_bag(t, i) for t, i in zip(tables, idx)]
        z = lf.nn.dlrm_interaction(x, sparse)
        return lf.nn.sigmoid(lf.nn.linear(z, w2, b2))

    return fn, (dense, w1, b1, w2, b2, tables, idx)


@pytest.mark.gpu
@pytest.mark.parametrize("num_cat", [1, 3])
def test_jitted_dlrm_on_cuda_matches_numpy(num_cat):
    fn, args = _dlrm_like(num_cat)
    want = np.asarray(lf.jit(fn, backend="numpy")(*args))
    got = np.asarray(lf.jit(fn, backend="cuda")(*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                               err_msg=f"jitted DLRM-style function, num_cat={num_cat}, backend='cuda'")


# ---- CPU: the model kernels run on an emulation of the CUDA launch ------------------------------
def _emulated_cases():
    from cuda_model_emulation import emulable

    out = []
    for name in sorted(CASES):
        g, ins, dims = CASES[name]()
        bp = plan_graph(g, _bucket(dims))
        if emulable(bp):
            out.append((name, g, ins, dims, bp))
    return out


def test_model_kernels_compute_the_reference_on_a_cpu_emulation(tmp_path):
    import shutil

    from luminal_fn.backends.numpy import NumpyBackend

    import cuda_model_emulation as emu

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed on this machine")
    cases = _emulated_cases()
    kinds = {_kind(name) for name, *_ in cases}
    assert kinds == {"embedding_bag", "dlrm_interact", "conv2d_bias"}, kinds
    assert len(cases) >= 12
    lib = emu.build([c[-1] for c in cases], str(tmp_path))
    for name, g, ins, dims, bp in cases:
        want = NumpyBackend().compile(g).run([np.asarray(x) for x in ins], dims)
        got = emu.run(lib, bp, ins, dims)
        for k, (o, w, nid) in enumerate(zip(got, want, g.outputs)):
            _close(o, w, g.nodes[nid].dtype, f"emulated CUDA {_kind(name)} case {name}, output {k}")


def test_extracted_model_kernels_compute_the_reference_on_a_cpu_emulation(tmp_path):
    """The views and params the rules produce (unfold views, the scalar row stride, stacked
    features), each kernel alone on random buffers, emulated vs the NumPy backend."""
    import shutil

    from luminal_fn.backends.numpy import NumpyBackend

    import cuda_model_emulation as emu

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed on this machine")
    cases = []
    rendered = ("embedding_bag", "embedding_bag_multi_raw", "dlrm_interact", "conv2d_bias")
    for key in sorted(E2E):
        if key.split("/")[0] not in rendered:
            continue
        found = _genomes_using(key, 12)
        if key == "dlrm_interact/model":  # its stacked bags: the multi-table kernel too
            found += _genomes_using(key, 12, kind="embedding_bag_multi_raw")
        for _, _, ll in found:
            for name in rendered:  # the DLRM model's genomes hold embedding bags too
                for g, data in isolated_kernels(ll, name):
                    bp = plan_graph(g, {})
                    if emu.emulable(bp):
                        cases.append((name, key, g, data, bp))
    assert {c[0] for c in cases} == set(rendered)
    # (the model's stacked bags of raw lnp.take indices become one embedding_bag_multi_raw in
    # most genomes; embedding_bag_multi over normalised rows is subsumed by it)
    assert any(c[0] == "embedding_bag_multi_raw" and c[1] == "dlrm_interact/model" for c in cases)
    lib = emu.build([c[-1] for c in cases], str(tmp_path))
    for _, key, g, data, bp in cases:
        want = NumpyBackend().compile(g).run(data, {})
        got = emu.run(lib, bp, data, {})
        n = next(x for x in g.live_nodes() if x.op == "CustomOp")
        what = (f"emulated CUDA {n.attrs['name']} from extracted case {key}: input views "
                f"{[str(v) for _, v in n.inputs]}, params {n.attrs['params']}")
        for o, w in zip(got, want):
            _close(o, w, n.dtype, what)

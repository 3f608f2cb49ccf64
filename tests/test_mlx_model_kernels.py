"""The MLX backend's model kernels (embedding_bag, embedding_bag_multi, dlrm_interact,
conv2d_bias, linear_bias, matmul_t) against the NumPy backend's kernels (the reference semantics).

* MLX ops (backends/mlx/model_kernels.py, MLX's CPU build here): every kernel on views like those
  the rules make (transposed and strided operands, scalar Constant strides, masks, symbolic batch,
  int32 and half types), and random genomes of traced graphs holding each pattern, DLRM included
  (against float64 NumPy).
* Metal (backends/mlx/metal_model.py hosting kernels/*.metal): without a Mac the bodies run on the
  CPU emulation of tests/mlx_metal_emulation.py (g++, threadgroups as real threads) in place of
  ``mx.fast.metal_kernel``; tests marked ``metal`` run the real kernels where
  ``mx.metal.is_available()`` and are skipped elsewhere.
"""
from __future__ import annotations

import importlib.util
import pathlib
import random
import shutil

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason='mlx is not installed (pip install "luminal-fn[mlx]")')

import luminal_fn as lf  # noqa: E402
import luminal_fn.numpy as lnp  # noqa: E402
from luminal_fn.backends import get_backend  # noqa: E402
from luminal_fn.backends.mlx import metal_host  # noqa: E402
from luminal_fn.backends.mlx.executor import MLXExecutable  # noqa: E402
from luminal_fn.backends.mlx.metal_model import HAND_KINDS  # noqa: E402
from luminal_fn.backends.mlx.ops import OPS, to_mlx  # noqa: E402
from luminal_fn.backends.numpy import NumpyBackend  # noqa: E402
from luminal_fn.ir import dtypes as dt  # noqa: E402
from luminal_fn.ir.expr import var  # noqa: E402
from luminal_fn.ir.view import View  # noqa: E402

from cuda_cases import B, rand  # noqa: E402
from test_cuda_model_kernels import dlrm_masked, dlrm_strided_symbolic  # noqa: E402  (the same cases)

ROOT = pathlib.Path(__file__).resolve().parents[1]
S = var("s")
R = np.random.default_rng(17)
HAVE_METAL = bool(mx.metal.is_available())
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed on this machine")
KINDS = ("embedding_bag", "embedding_bag_multi", "embedding_bag_multi_raw", "dlrm_interact", "conv2d_bias",
         "linear_bias", "matmul_t", "rms_norm_rows", "softmax_rows", "argmax_rows", "sort_rows",
         "argsort_rows", "top_k_rows", "scan_rows")
# NumPy kinds MLX does not offer (its graphs keep the generic form): the decode attention, RoPE
NOT_ON_MLX = ("attention_rows", "rope_half")
# kinds MLX offers that tests/test_mlx_math_kernels.py checks (mx.arctan2 and so on)
MATH_KINDS = ("arctan2", "arcsin", "arccos")


def _scalar(b, value):
    return (b.const(value), View((1,), (0,), 0, None))


def _rows(n, hi, lo=0):
    return R.integers(lo, hi, n).astype(np.int32)


# ---- cases: name -> () -> (graph, inputs, dims) ----------------------------------------------------
def emb_basic(d=dt.float32, bsz=6, bag=3, dim=8, rows=40):
    """(rows, dim) table, rows (B*L,), the row stride a scalar Constant (as lnp.take traces)."""
    b = B()
    t, r = b.input((rows, dim), d), b.input((bsz * bag,), dt.int32)
    g = b.kernel_graph("embedding_bag", [b.c(t), b.c(r), _scalar(b, dim)], (bsz, dim), (bsz, bag, dim), d)
    return g, [rand((rows, dim), d), _rows(bsz * bag, rows)], {}


def emb_transposed_table_symbolic_batch():
    """The table read transposed from an (8, 30) buffer, rows a strided column, B = s."""
    b = B()
    t, r = b.input((8, 30)), b.input((S * 3, 2), dt.int32)
    tv, rv = View((30, 8), (1, 30), 0, None), View((S * 3,), (2,), 1, None)
    g = b.kernel_graph("embedding_bag", [(t, tv), (r, rv), _scalar(b, 8)], (S, 8), (S, 3, 8))
    return g, [rand((8, 30)), R.integers(0, 30, (15, 2)).astype(np.int32)], {"s": 5}


def emb_stride_buffer_clamped():
    """Row stride 5 (not D) read from a buffer; negative and too-large rows hit the clamp."""
    b = B()
    t, r, st = b.input((20, 8)), b.input((12,), dt.int32), b.input((1,), dt.int32)
    g = b.kernel_graph("embedding_bag", [b.c(t), b.c(r), b.c(st)], (4, 8), (4, 3, 8))
    return g, [rand((20, 8)), _rows(12, 40, -3), np.array([5], np.int32)], {}


def emb_int32():
    return emb_basic(dt.int32, bsz=5, bag=4, dim=3, rows=9)


def emb_f16():
    return emb_basic(dt.float16, bsz=3, bag=2, dim=16, rows=11)


def multi_case(p=1, k=3, bsz=4, bag=3, dim=5, d=dt.float32, symbolic=False, raw=False):
    """[prefix (B, P, D) read with a stride-0 column view as DLRM's x], then K tables of different
    row counts (table 1 read transposed), scalar strides, rows as (B, L) buffers. raw: the
    embedding_bag_multi_raw kernel, raw indices (negative, past the end) and each table's row
    count a fourth input (a scalar literal; table 2's a (1,) buffer)."""
    b = B()
    bb = S if symbolic else bsz
    ins, data = [], []
    if p:
        x = b.input((bb, dim), d)
        ins.append((x, View((bb, p, dim), (dim, 0, 1), 0, None)))
        data.append(rand((bsz, dim), d))
    for j in range(k):
        n = 6 + 4 * j
        if j == 1:
            t = b.input((dim, n), d)
            ins.append((t, View((n, dim), (1, n), 0, None)))
            data.append(rand((dim, n), d))
        else:
            t = b.input((n, dim), d)
            ins.append(b.c(t))
            data.append(rand((n, dim), d))
        r = b.input((bb, bag), dt.int32)
        ins += [(r, View((bb * bag,), (1,), 0, None)), _scalar(b, dim)]
        lo, hi = (-n - 3, n + 4) if raw else (-1, n + 1)
        data.append(R.integers(lo, hi, (bsz, bag)).astype(np.int32))
        if raw and j == 2:
            ins.append(b.c(b.input((1,), dt.int32)))
            data.append(np.array([n], np.int32))
        elif raw:
            ins.append(_scalar(b, n))
    kind = "embedding_bag_multi_raw" if raw else "embedding_bag_multi"
    g = b.kernel_graph(kind, ins, (bb, p + k, dim), (bb, p, k, bag, dim), d)
    return g, data, ({"s": bsz} if symbolic else {})


def multi_prefix_k3():
    return multi_case()


def rawmulti_prefix_k3():
    return multi_case(raw=True)


def rawmulti_no_prefix_symbolic():
    return multi_case(p=0, k=3, bsz=6, symbolic=True, raw=True)


def multi_no_prefix_symbolic():
    return multi_case(p=0, k=2, bsz=6, symbolic=True)


def multi_int32():
    return multi_case(p=2, k=2, d=dt.int32)


def dlrm_basic(bsz=5, f=5, dim=6, d=dt.float32):
    b = B()
    t = b.input((bsz, f, dim), d)
    g = b.kernel_graph("dlrm_interact", [b.c(t)], (bsz, f * (f - 1) // 2), (bsz, f, dim), d)
    return g, [rand((bsz, f, dim), d, -1, 1)], {}


def dlrm_many_pairs():
    return dlrm_basic(3, 25, 4)  # P = 300: two threadgroups of pairs, the sqrt row guess fixed up


def dlrm_int32():
    return dlrm_basic(4, 4, 3, dt.int32)


def conv_case(c=2, h=7, w=6, co=4, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pt=1, pl=1, batch=None,
              d=dt.float32, x_view=None, w_transposed=False, ho=None, wo=None):
    ho = ho if ho is not None else (h + 2 * pt - dh * (kh - 1) - 1) // sh + 1
    wo = wo if wo is not None else (w + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    b = B()
    xshape = (c, h, w) if batch is None else (batch, c, h, w)
    x = b.input(xshape, d)
    kk = c * kh * kw
    if w_transposed:  # w (C_out, K) read from a (K, C_out) buffer
        wt = b.input((kk, co), d)
        we, wdata = (wt, View((co, kk), (1, co), 0, None)), rand((kk, co), d, -1, 1)
    else:
        wt = b.input((co, kk), d)
        we, wdata = b.c(wt), rand((co, kk), d, -1, 1)
    bias = b.input((co,), d)
    out = (co, ho, wo) if batch is None else (batch, co, ho, wo)
    xe = b.c(x) if x_view is None else (x, x_view)
    g = b.kernel_graph("conv2d_bias", [xe, we, b.c(bias)], out, (kh, kw, sh, sw, dh, dw, pt, pl, ho, wo), d)
    return g, [rand(xshape, d, -1, 1), wdata, rand((co,), d, -1, 1)], {}


def conv_padded_3x3():
    return conv_case()


def conv_seed_2x3x3():
    return conv_case(c=2, h=3, w=3, co=3)  # the seed's case: 2x3x3 input, 3x3 kernel, padding 1


def conv_stride_dilation_asym_pad_wt():
    return conv_case(c=3, h=9, w=8, co=5, sh=2, sw=1, dh=1, dw=2, pt=1, pl=2, w_transposed=True)


def conv_1x1_strided_input():
    """A 1x1 conv over x read pixel-major from an (H, W, C) buffer."""
    b = B()
    x = b.input((4, 5, 3))
    wt, bias = b.input((6, 3)), b.input((6,))
    g = b.kernel_graph("conv2d_bias", [(x, View((3, 4, 5), (1, 15, 3), 0, None)), b.c(wt), b.c(bias)], (6, 4, 5),
                (1, 1, 1, 1, 1, 1, 0, 0, 4, 5))
    return g, [rand((4, 5, 3)), rand((6, 3)), rand((6,))], {}


def conv_batched_cropped():
    """(N, C, H, W) with H_out below what the padding allows: the kernel crops."""
    return conv_case(c=2, h=6, w=5, co=3, batch=3, ho=4, wo=3)


def conv_int32():
    return conv_case(c=2, h=5, w=4, co=3, sh=2, d=dt.int32)


def conv_f16():
    return conv_case(c=3, h=5, w=5, co=2, d=dt.float16)


def linear_case(m, k, n, d=dt.float32, bias_const=None, rows=None, w_transposed=False):
    b = B()
    mm = m if rows is None else rows
    x = b.input((mm, k), d)
    if w_transposed:
        w = b.input((n, k), d)
        we, wd = (w, View((k, n), (1, k), 0, None)), rand((n, k), d, -1, 1)
    else:
        w = b.input((k, n), d)
        we, wd = b.c(w), rand((k, n), d, -1, 1)
    if bias_const is None:
        bias = b.input((n,), d)
        be, bd = b.c(bias), [rand((n,), d, -1, 1)]
    else:
        be, bd = (b.const(bias_const, d), View((n,), (0,), 0, None)), []
    g = b.kernel_graph("linear_bias", [b.c(x), we, be], (mm, n), (mm, n, k), d)
    return g, [rand((m, k), d, -1, 1), wd] + bd, ({"s": m} if rows is not None else {})


def linear_wt_f32():
    return linear_case(33, 20, 17, w_transposed=True)


def linear_symbolic_rows_scalar_bias():
    return linear_case(6, 12, 10, bias_const=0.5, rows=S)


def linear_int32():
    return linear_case(5, 7, 4, dt.int32)


def linear_bf16():
    return linear_case(9, 24, 16, dt.bfloat16)


def matmul_t_case(bt, m, n, k, d=dt.float32, a_strided=False):
    b = B()
    if a_strided:  # a (Bt, M, K) read from an (M, Bt, K) buffer
        a = b.input((m, bt, k), d)
        ae, ad = (a, View((bt, m, k), (k, bt * k, 1), 0, None)), rand((m, bt, k), d, -1, 1)
    else:
        a = b.input((bt, m, k), d)
        ae, ad = b.c(a), rand((bt, m, k), d, -1, 1)
    c = b.input((bt, n, k), d)
    g = b.kernel_graph("matmul_t", [ae, b.c(c)], (bt, m, n), (bt, m, n, k), d)
    return g, [ad, rand((bt, n, k), d, -1, 1)], {}


def matmul_t_strided_f32():
    return matmul_t_case(2, 5, 4, 3, a_strided=True)


def matmul_t_int32():
    return matmul_t_case(3, 2, 4, 5, dt.int32)


def matmul_t_bf16():
    return matmul_t_case(3, 6, 7, 16, dt.bfloat16)


def _extracted(fn, *args):
    """The cheapest LLIR of a traced function (the row kernels come from the rules, with the
    literals as scalar Constants), its inputs and dims."""
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    graph = lf.jit(fn).trace(*args).hlir
    llir = Extractor(build_egraph(graph), graph, kernel_kinds=NumpyBackend.kernel_kinds).extract(None)
    return llir, list(args), {}


def rows_rms_cast_bf16():
    x, w = rand((3, 32), dt.float32), rand((32,), dt.float32)
    return _extracted(lambda x, w: lf.nn.rms_norm(x, w, eps=1e-5).astype(lnp.bfloat16), x, w)


def rows_rms_half_bf16():  # Hugging Face's half-precision norm: CAST 2 rounds x * r to bf16
    x, w = rand((5, 64), dt.bfloat16), rand((64,), dt.bfloat16)
    return _extracted(lambda x, w: lf.nn.rms_norm(x, w, eps=1e-6), x, w)


def rows_rms_half_f16():  # CAST 3: rounded to float16
    x, w = rand((2, 3, 48), dt.float16), rand((48,), dt.float16)
    return _extracted(lambda x, w: lf.nn.rms_norm(x, w, eps=1e-6), x, w)


def rows_softmax_attention_mask():
    q, k, v = (rand(s, dt.float32) for s in ((2, 3, 8), (2, 5, 8), (2, 5, 8)))
    mask = np.where(R.random((3, 5)) < 0.4, -1e10, 0.0).astype(np.float32)
    mask[:, 0] = 0.0
    return _extracted(lambda q, k, v, m: lf.nn.scaled_dot_product_attention(q, k, v, mask=m), q, k, v, mask)


def _argmax_data(shape, d):
    """Rows with a NaN after the maximum, a row of ties, a row of -inf, +0 after -0."""
    x = rand(shape, d).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    rows[0, [5, 2]] = np.nan
    if len(rows) > 3:
        rows[1] = 0.25
        rows[2] = -np.inf
        rows[3] = -1.0
        rows[3, [4, 7]] = [-0.0, 0.0]
    return x.astype(d.np)


def rows_argmax_rows_f32():
    x = _argmax_data((6, 40), dt.float32)
    return _extracted(lambda x: lnp.argmax(x, axis=-1), x)


def rows_argmax_last_row_bf16():
    x = _argmax_data((3, 33), dt.bfloat16)
    return _extracted(lambda x: lnp.argmax(x[0]).astype(lnp.int32).reshape(1), x)


def rows_sort_f32_descending():
    return _extracted(lambda x: lnp.sort(x, descending=True), _argmax_data((6, 40), dt.float32))


def rows_argsort_bf16():
    return _extracted(lambda x: lnp.argsort(x, axis=0), _argmax_data((12, 40), dt.bfloat16))


def rows_top_k_f32_ties():  # (a fifth of each row ties at its largest value; a NaN)
    x = _argmax_data((6, 40), dt.float32)
    x[:, ::5] = x.max()
    x[2, 7] = np.nan
    return _extracted(lambda x: lnp.top_k(x, 9), x)


def rows_scan_cumsum_int32():
    return _extracted(lambda x: lnp.cumsum(x, axis=1), rand((4, 30), dt.int32))


def rows_scan_cumprod_f32_dynamic():
    x = rand((3, 17), dt.float32)
    graph = lf.jit(lambda x: lnp.cumprod(x, axis=-1), dynamic_axes={"x": {1: "n"}}).trace(x).hlir
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    llir = Extractor(build_egraph(graph), graph, kernel_kinds=NumpyBackend.kernel_kinds).extract(None)
    return llir, [x], {"n": 17}


CASES = {f.__name__: f for f in [
    rows_sort_f32_descending, rows_argsort_bf16, rows_top_k_f32_ties, rows_scan_cumsum_int32, rows_scan_cumprod_f32_dynamic,
    rows_argmax_rows_f32, rows_argmax_last_row_bf16,
    rows_rms_cast_bf16, rows_rms_half_bf16, rows_rms_half_f16, rows_softmax_attention_mask,
    emb_basic, emb_transposed_table_symbolic_batch, emb_stride_buffer_clamped, emb_int32, emb_f16,
    multi_prefix_k3, multi_no_prefix_symbolic, multi_int32, rawmulti_prefix_k3, rawmulti_no_prefix_symbolic,
    dlrm_basic, dlrm_strided_symbolic, dlrm_masked, dlrm_many_pairs, dlrm_int32,
    conv_padded_3x3, conv_seed_2x3x3, conv_stride_dilation_asym_pad_wt, conv_1x1_strided_input,
    conv_batched_cropped, conv_int32, conv_f16,
    linear_wt_f32, linear_symbolic_rows_scalar_bias, linear_int32, linear_bf16,
    matmul_t_strided_f32, matmul_t_int32, matmul_t_bf16]}
PREFIX = {"emb": "embedding_bag", "multi": "embedding_bag_multi", "rawmulti": "embedding_bag_multi_raw",
          "dlrm": "dlrm_interact",
          "conv": "conv2d_bias", "linear": "linear_bias", "matmul_t": "matmul_t",
          "rows_rms": "rms_norm_rows", "rows_softmax": "softmax_rows", "rows_argmax": "argmax_rows",
          "rows_sort": "sort_rows", "rows_argsort": "argsort_rows", "rows_top_k": "top_k_rows",
          "rows_scan": "scan_rows"}


def _kind(case: str) -> str:
    return next(v for k, v in PREFIX.items() if case.startswith(k))


def _close(got, want, d, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.shape} {got.dtype} != reference {want.shape} {want.dtype}"
    if d.is_float:
        tol = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1e-2}[d.name]  # summation order
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _check_graph(g, ins, dims, exe, what):
    want = NumpyBackend().compile(g).run([np.asarray(x) for x in ins], dims)
    got = exe.run([to_mlx(x) for x in ins], dims)
    for k, (o, w, nid) in enumerate(zip(got, want, g.outputs)):
        _close(get_backend("mlx").to_numpy(o), w, g.nodes[nid].dtype, f"{what}, output {k}")


# ---- MLX ops ---------------------------------------------------------------------------------------
def test_mlx_lists_and_runs_every_kernel_the_numpy_backend_has():
    mlx = get_backend("mlx")
    assert set(KINDS) == set(NumpyBackend.kernel_kinds) - set(NOT_ON_MLX) - set(MATH_KINDS)
    assert set(KINDS) | set(MATH_KINDS) <= set(mlx.kernel_kinds)
    assert not set(NOT_ON_MLX) & set(mlx.kernel_kinds)
    assert all(k in OPS for k in KINDS)
    assert {_kind(c) for c in CASES} == set(KINDS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_kernel_on_mlx_ops_matches_numpy(name):
    g, ins, dims = CASES[name]()
    exe = get_backend("mlx").compile(g, {"metal": False})
    assert f"{_kind(name)}:mlx" in exe.describe()
    _check_graph(g, ins, dims, exe, f"MLX-ops {_kind(name)} case {name} (dims {dims})")


@pytest.mark.parametrize("name,code", [("rows_rms_half_bf16", 2), ("rows_rms_half_f16", 3)])
def test_half_rms_norm_on_mlx_ops_gives_the_hugging_face_bits(name, code):
    """The half-precision norm's rounding before the weight (CAST 2 / 3) on MLX's ops: the same
    bits as Hugging Face's LlamaRMSNorm in float64 (a rare tie aside), as on NumPy and CUDA."""
    from test_row_kernels import ref_rms_half

    g, ins, dims = CASES[name]()
    (node,) = [n for n in g.live_nodes() if n.op == "CustomOp" and n.attrs.get("name") == "rms_norm_rows"]
    assert int(node.attrs["params"][2]) == code
    (got,) = get_backend("mlx").compile(g, {"metal": False}).run([to_mlx(x) for x in ins], dims)
    got, want = get_backend("mlx").to_numpy(got), ref_rms_half(ins[0], ins[1], 1e-6)
    assert got.dtype == want.dtype and (got == want).mean() >= 0.99


# ---- through the optimizer: random genomes of traced graphs with each pattern -----------------------
def _f32(*s):
    return R.standard_normal(s).astype(np.float32)


def _dlrm_like(num_cat=2, batch=6, rows=9, dim=8, bag=3):
    dense, w1, b1 = _f32(batch, 5), _f32(5, dim) / 3, _f32(dim)
    tables = [_f32(rows + 3 * j, dim) / 3 for j in range(num_cat)]
    idx = [R.integers(0, rows, (batch, bag)).astype(np.int32) for _ in range(num_cat)]
    f = 1 + num_cat
    w2, b2 = _f32(dim + f * (f - 1) // 2, 1) / 4, _f32(1)

    def fn(dense, w1, b1, w2, b2, *tab_idx):
        x = lf.nn.relu(lf.nn.linear(dense, w1, b1))
        sparse = [lf.nn.embedding_bag(t, i) for t, i in zip(tab_idx[:num_cat], tab_idx[num_cat:])]
        return lf.nn.sigmoid(lf.nn.linear(lf.nn.dlrm_interaction(x, sparse), w2, b2))

    return fn, [dense, w1, b1, w2, b2, *tables, *idx]


E2E = {
    "embedding_bag": (lambda t, i: lf.nn.embedding_bag(t, i) * 2.0,
                      lambda: [_f32(10, 4), R.integers(-10, 10, (3, 2)).astype(np.int32)]),
    "dlrm_interact": (lambda *xs: lf.nn.pairwise_dot(list(xs)), lambda: [_f32(5, 3) for _ in range(4)]),
    "conv2d_bias": (lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1),
                    lambda: [_f32(2, 6, 5), _f32(3, 2, 3, 3), _f32(3)]),
    "conv2d_bias/batched": (lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1, stride=(1, 2)),
                            lambda: [_f32(2, 2, 5, 6), _f32(3, 2, 3, 3), _f32(3)]),
    "linear_bias": (lf.nn.linear, lambda: [_f32(5, 3), _f32(3, 4), _f32(4)]),
    "matmul_t": (lambda a, c: a @ lnp.transpose(c, (0, 2, 1)), lambda: [_f32(2, 5, 3), _f32(2, 4, 3)]),
    "embedding_bag_multi_raw/dlrm": (lambda *a: _dlrm_like()[0](*a), lambda: _dlrm_like()[1]),
}
_GENOMES: dict = {}


def _genomes_using(key, tries=16):
    """(args, HLIR, LLIR) for the distinct extracted genomes (MLX's kernel kinds) that use the
    kernel a key names; the first genome is the default extraction."""
    if key in _GENOMES:
        return _GENOMES[key]
    egraph_mod = pytest.importorskip("luminal_fn.optimize.egraph")
    extract_mod = pytest.importorskip("luminal_fn.optimize.extract")
    fn, make = E2E[key]
    kind = key.split("/")[0]
    args = make()
    graph = lf.jit(fn).trace(*args).hlir
    ex = extract_mod.Extractor(egraph_mod.build_egraph(graph), graph, kernel_kinds=get_backend("mlx").kernel_kinds)
    rnd = random.Random(0)
    out, seen = [], set()
    for t in range(tries):
        ll = ex.extract(None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes))
        if any(n.op == "CustomOp" and n.attrs.get("name") == kind for n in ll.live_nodes()):
            key_ = tuple(n.key() for n in ll.live_nodes())
            if key_ not in seen:
                seen.add(key_)
                out.append((args, graph, ll))
    _GENOMES[key] = out
    return out


@pytest.mark.parametrize("key", sorted(E2E))
def test_random_genomes_with_each_kernel_on_mlx_ops_match_numpy(key):
    mlx = get_backend("mlx")
    found = _genomes_using(key)
    assert found, f"no extracted genome used the {key} kernel"
    for j, (args, graph, ll) in enumerate(found):
        want = NumpyBackend().compile(graph).run([np.asarray(a) for a in args], {})[0]
        got = mlx.to_numpy(mlx.compile(ll, {"metal": False}).run([mlx.from_numpy(a) for a in args], {})[0])
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"MLX {key}: genome {j}")


def _load_dlrm_example():
    spec = importlib.util.spec_from_file_location("dlrm_example_mlx", ROOT / "examples" / "dlrm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dlrm_genomes(tries=10):
    """The DLRM example (num_cat 3, small) traced: (leaves, float64 reference, LLIRs using the
    multi-table bag or the interaction kernel)."""
    if "dlrm" in _GENOMES:
        return _GENOMES["dlrm"]
    from luminal_fn.frontend import pytree
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    dlrm = _load_dlrm_example()
    params = dlrm.init_params(3, 30, 0)
    dense, idx = dlrm.make_batch(3, 8, 30, 1)
    want = dlrm.reference(params, dense, idx)
    traced = lf.jit(dlrm.forward).trace(params, dense, idx)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=get_backend("mlx").kernel_kinds)
    leaves = [np.asarray(x) for x in pytree.flatten((params, dense, idx))[0]]  # the Inputs' order
    rnd = random.Random(2)
    lls = [ex.extract(None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes)) for t in range(tries)]
    _GENOMES["dlrm"] = (leaves, want, lls)
    return _GENOMES["dlrm"]


def _names(ll) -> set:
    return {n.attrs.get("name") for n in ll.live_nodes() if n.op == "CustomOp"}


def test_dlrm_example_genomes_on_mlx_ops_match_float64():
    mlx = get_backend("mlx")
    leaves, want, lls = _dlrm_genomes()
    used = set()
    for j, ll in enumerate(lls):
        used |= _names(ll)
        got = mlx.to_numpy(mlx.compile(ll, {"metal": False}).run([mlx.from_numpy(a) for a in leaves], {})[0])
        assert np.abs(got.astype(np.float64) - want).max() <= 1e-5, f"DLRM genome {j}"
    assert {"embedding_bag_multi_raw", "dlrm_interact", "linear_bias"} <= used, used


def test_jitted_dlrm_example_on_mlx_matches_float64():
    r = _load_dlrm_example().run(2, batch=16, backend="mlx", iters=1, rows=40, search_limit=4)
    assert r["shape"] == (16, 1) and r["max_abs_diff"] <= 1e-5, r


# ---- Metal: the hand kernels of kernels/*.metal on the CPU emulation --------------------------------
@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """mx.fast.metal_kernel replaced by the CPU emulation while a test runs (see the module doc)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed on this machine")
    from mlx_metal_emulation import EmulatedMetal

    return EmulatedMetal(str(tmp_path_factory.mktemp("metal_emulation")))


@pytest.fixture
def fake_metal(emulated, monkeypatch):
    import types

    class MxWithEmulatedMetal:
        fast = types.SimpleNamespace(metal_kernel=emulated.metal_kernel)

        def __getattr__(self, attr):
            return getattr(mx, attr)

    monkeypatch.setattr(metal_host, "mx", MxWithEmulatedMetal())
    monkeypatch.setattr(metal_host.MetalKernels, "_compiled", {})
    # only the hand kernels are emulated here; rendered kernels (fused regions) run as MLX ops
    # (tests/test_mlx.py emulates those)
    monkeypatch.setattr(metal_host, "kernel_for", lambda *a, **k: None)
    emulated.calls.clear()
    return emulated


def _metal_exe(g):
    return MLXExecutable(g, {}, metal_host.MetalKernels(g, {}))


HAND_CASES = sorted(n for n in CASES if _kind(n) in HAND_KINDS)


@needs_gxx
@pytest.mark.parametrize("name", HAND_CASES)
def test_metal_hand_kernel_on_cpu_emulation_matches_numpy(name, fake_metal):
    g, ins, dims = CASES[name]()
    exe = _metal_exe(g)
    kind = _kind(name)
    node = next(n for n in g.live_nodes() if n.op == "CustomOp")
    _check_graph(g, ins, dims, exe, f"emulated Metal {kind} case {name} (dims {dims})")
    if node.dtype.is_float:  # float nodes run the .metal body; integer ones stay on MLX ops
        assert f"{kind}:metal" in exe.describe()
        src = {"conv2d_bias": "conv2d_bias", "dlrm_interact": "dlrm_interact"}.get(kind, "embedding_bag")
        launches = [c for c in fake_metal.calls if c[0] == f"lf_hand_{src}"]
        want = node.attrs["params"][2] if kind.startswith("embedding_bag_multi") else 1
        assert len(launches) == want, (name, fake_metal.calls)
    else:
        assert f"{kind}:mlx" in exe.describe() and not fake_metal.calls


@needs_gxx
def test_metal_launch_sizes_follow_the_sources(fake_metal):
    g, ins, dims = conv_padded_3x3()  # C_out 4, H_out 7, W_out 6
    _check_graph(g, ins, dims, _metal_exe(g), "conv launch")
    g, ins, dims = dlrm_many_pairs()  # B 3, P 300
    _check_graph(g, ins, dims, _metal_exe(g), "dlrm launch")
    g, ins, dims = emb_transposed_table_symbolic_batch()  # B = s = 5, D 8
    _check_graph(g, ins, dims, _metal_exe(g), "bag launch")
    assert fake_metal.calls == [("lf_hand_conv2d_bias", (6, 7, 4), (6, 7, 1)),
                                ("lf_hand_dlrm_interact", (300, 3, 1), (256, 1, 1)),
                                ("lf_hand_embedding_bag", (8, 5, 1), (8, 1, 1))]


@needs_gxx
@pytest.mark.parametrize("key", ["conv2d_bias", "conv2d_bias/batched", "dlrm_interact", "embedding_bag"])
def test_random_genomes_on_emulated_metal_match_numpy(key, fake_metal):
    found = _genomes_using(key)
    assert found
    for j, (args, graph, ll) in enumerate(found):
        want = NumpyBackend().compile(graph).run([np.asarray(a) for a in args], {})[0]
        exe = _metal_exe(ll)
        got = np.array(exe.run([to_mlx(a) for a in args], {})[0])
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"emulated Metal {key}: genome {j}")
        assert f"{key.split('/')[0]}:metal" in exe.describe()


@needs_gxx
def test_dlrm_example_genomes_on_emulated_metal_match_float64(fake_metal):
    leaves, want, lls = _dlrm_genomes()
    # the default genome, and the first random ones with the interaction and the bags (which
    # genomes those are moves with every rule that adds or removes a choice)
    picked = [lls[0]] + [next(ll for ll in lls if kind in _names(ll))
                         for kind in ("dlrm_interact", "embedding_bag", "embedding_bag_multi_raw")]
    for j, ll in enumerate(picked):
        got = np.array(_metal_exe(ll).run([to_mlx(a) for a in leaves], {})[0])
        assert np.abs(got.astype(np.float64) - want).max() <= 1e-5, f"DLRM genome {j}"
    hosted = {c[0] for c in fake_metal.calls}
    assert {"lf_hand_embedding_bag", "lf_hand_dlrm_interact"} <= hosted, hosted


# ---- Metal hardware (Apple silicon only) -------------------------------------------------------------
@pytest.mark.parametrize("name", HAND_CASES)
@pytest.mark.metal
@pytest.mark.skipif(not HAVE_METAL, reason="needs Apple Metal (mx.metal.is_available() is False)")
def test_metal_hand_kernel_matches_numpy(name):
    g, ins, dims = CASES[name]()
    exe = get_backend("mlx").compile(g, {"metal": True})
    _check_graph(g, ins, dims, exe, f"Metal {_kind(name)} case {name} (dims {dims})")
    node = next(n for n in g.live_nodes() if n.op == "CustomOp")
    assert f"{_kind(name)}:{'metal' if node.dtype.is_float else 'mlx'}" in exe.describe()


@pytest.mark.metal
@pytest.mark.skipif(not HAVE_METAL, reason="needs Apple Metal (mx.metal.is_available() is False)")
def test_jitted_dlrm_example_on_metal_matches_float64():
    for num_cat in (1, 3, 8):
        r = _load_dlrm_example().run(num_cat, batch=256, backend="mlx", iters=2, rows=200)
        assert r["max_abs_diff"] <= 1e-5, r

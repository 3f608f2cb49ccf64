"""The row kernels of optimize/rules/specialize_norms.egg: rms_norm_rows and softmax_rows.

Rules fire on what nn.rms_norm and the softmax of nn.softmax / scaled_dot_product_attention trace
(and on the narrowing cast after them), not on near misses; every random genome of graphs holding
them computes a float64 NumPy reference on the NumPy backend; on the CUDA backend (marked ``gpu``,
skipped without one) the kernels agree with the same references, and their rendered module
compiles with nvcc where nvcc is installed.
"""
from __future__ import annotations

import random
import shutil

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

R = np.random.default_rng(11)
KINDS = ("rms_norm_rows", "softmax_rows")


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


# ---- float64 references ------------------------------------------------------------------------
def ref_rms(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.astype(np.float64)


def ref_softmax(s):
    s = s.astype(np.float64)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_attention(q, k, v, mask):
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    return np.einsum("hqk,hkd->hqd", ref_softmax(s + mask), v.astype(np.float64))


# ---- cases: name -> (fn, args, reference) ------------------------------------------------------
def rms_case():
    x, w = f32(5, 64), f32(64)
    return (lambda x, w: lf.nn.rms_norm(x, w, eps=1e-5)), (x, w), ref_rms(x, w, 1e-5)


def rms_cast_case():
    x, w = f32(3, 128), f32(128)
    fn = lambda x, w: lf.nn.rms_norm(x, w, eps=1e-6).astype(lnp.bfloat16)  # noqa: E731
    return fn, (x, w), ref_rms(x, w, 1e-6)


def rms_then_more_case():
    """The norm feeds a matmul and the residual is read again (the Llama layer's shape)."""
    x, w, m = f32(2, 32), f32(32), f32(32, 16)

    def fn(x, w, m):
        return x.sum() + lnp.matmul(lf.nn.rms_norm(x, w, eps=1e-5), m)

    return fn, (x, w, m), x.astype(np.float64).sum() + ref_rms(x, w, 1e-5) @ m


def rms3_case():
    x, w = f32(2, 3, 32), f32(32)
    return (lambda x, w: lf.nn.rms_norm(x, w, eps=1e-6)), (x, w), ref_rms(x, w, 1e-6)


def softmax2_case():
    x = f32(5, 9) * 3
    return (lambda x: lf.nn.softmax(x, axis=-1)), (x,), ref_softmax(x)


def softmax3_case():
    x = f32(2, 3, 7) * 4
    return (lambda x: lf.nn.softmax(x, axis=-1)), (x,), ref_softmax(x)


def softmax_held_case():
    """Rows of 16-byte vectors: read once and held in registers (lf_softmax_rows' first path)."""
    x = f32(7, 64) * 3
    return (lambda x: lf.nn.softmax(x, axis=-1)), (x,), ref_softmax(x)


def softmax_held_wide_case():
    """1000 columns: each thread holds up to four vectors, the last ones partly past the row."""
    x = f32(3, 1000) * 5
    return (lambda x: lf.nn.softmax(x, axis=-1)), (x,), ref_softmax(x)


def softmax_long_case():
    """A row longer than the threads can hold (256 threads x 4 vectors of 4 floats): three passes."""
    x = f32(2, 4100) * 2
    return (lambda x: lf.nn.softmax(x, axis=-1)), (x,), ref_softmax(x)


def attention_held_case():
    """Eight keys a row: the scaled, masked scores held in registers."""
    q, k, v = f32(2, 5, 16), f32(2, 8, 16), f32(2, 8, 16)
    mask = np.where(R.random((5, 8)) < 0.3, -1e10, 0.0).astype(np.float32)
    mask[:, 3] = 0.0

    def fn(q, k, v, m):
        return lf.nn.scaled_dot_product_attention(q, k, v, mask=m)

    return fn, (q, k, v, mask), ref_attention(q, k, v, mask)


def attention_case():
    q, k, v = f32(4, 3, 16), f32(4, 6, 16), f32(4, 6, 16)
    mask = np.where(R.random((3, 6)) < 0.3, -1e10, 0.0).astype(np.float32)
    mask[:, 0] = 0.0  # no row fully masked

    def fn(q, k, v, m):
        return lf.nn.scaled_dot_product_attention(q, k, v, mask=m)

    return fn, (q, k, v, mask), ref_attention(q, k, v, mask)


CASES = {"rms": rms_case, "rms_cast": rms_cast_case, "rms_then_more": rms_then_more_case,
         "rms3": rms3_case, "softmax2": softmax2_case, "softmax3": softmax3_case,
         "attention": attention_case, "softmax_held": softmax_held_case,
         "softmax_held_wide": softmax_held_wide_case, "softmax_long": softmax_long_case,
         "attention_held": attention_held_case}


def _extractor(fn, args, kinds):
    graph = lf.jit(fn).trace(*args).hlir
    return Extractor(build_egraph(graph), graph, kernel_kinds=kinds)


def _kernels(llir) -> list:
    return [(n.attrs["name"], tuple(n.attrs.get("params") or ()), len(n.inputs))
            for n in llir.live_nodes() if n.op == "CustomOp" and n.attrs.get("name") in KINDS]


def _close(got, want, dtype):
    tol = 1e-2 if dtype == ml_dtypes.bfloat16 else 2e-5
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol, atol=tol)


# ---- the rules ---------------------------------------------------------------------------------
def test_rms_norm_becomes_one_kernel_reading_the_traced_literals():
    fn, args, _ = rms_case()
    ks = _kernels(_extractor(fn, args, NumpyBackend.kernel_kinds).extract(None))
    assert ks == [("rms_norm_rows", (5, 64, 0), 4)]


def ref_rms_half(x, w, eps):
    """Hugging Face's LlamaRMSNorm on a half x: normalised in float32 (r in float64 here), cast
    back to x's dtype, then times the weight, rounded to the result's dtype."""
    xf = x.astype(np.float64)
    r = 1.0 / np.sqrt((xf * xf).mean(-1, keepdims=True) + eps)
    y = (xf * r).astype(np.float32).astype(x.dtype).astype(np.float64)
    return (y * w.astype(np.float64)).astype(np.float32).astype(x.dtype)


HALF_RMS = {"bfloat16_2d": (ml_dtypes.bfloat16, (5, 64), 2), "bfloat16_3d": (ml_dtypes.bfloat16, (2, 3, 32), 2),
            "float16_2d": (np.float16, (4, 128), 3), "float16_3d": (np.float16, (2, 2, 48), 3)}


@pytest.mark.parametrize("name", sorted(HALF_RMS))
def test_a_half_precision_rms_norm_is_one_kernel_that_rounds_before_the_weight(name):
    """lf.nn.rms_norm of a bf16 / f16 x casts the normalised row back to x's dtype before the
    weight multiply; the rule offers rms_norm_rows with CAST 2 / 3, and the kernel's NumPy
    semantics agree with that model to one unit in the last place of the result."""
    d, shape, code = HALF_RMS[name]
    x = (R.standard_normal(shape) * 2).astype(d)
    w = R.standard_normal(shape[-1:]).astype(d)
    ll = _extractor(lambda a, b: lf.nn.rms_norm(a, b, eps=1e-6), (x, w), NumpyBackend.kernel_kinds).extract(None)
    rows = int(np.prod(shape[:-1]))
    assert _kernels(ll) == [("rms_norm_rows", (rows, shape[-1], code), 4)]
    got = np.asarray(NumpyBackend().compile(ll).run([x, w], {})[0])
    want = ref_rms_half(x, w, 1e-6)
    assert got.dtype == want.dtype
    # the same roundings give the same bits (r is float32 in the kernel, float64 in the model:
    # a rare tie may differ); without the rounding before the multiply ~25% of them differ
    assert (got == want).mean() >= 0.99
    ulp = 2.0 ** (-7 if d is ml_dtypes.bfloat16 else -10)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=ulp, atol=ulp * np.abs(want.astype(np.float64)).max())


def test_the_cast_after_the_norm_is_stored_by_the_kernel():
    fn, args, _ = rms_cast_case()
    ll = _extractor(fn, args, NumpyBackend.kernel_kinds).extract(None)
    assert _kernels(ll) == [("rms_norm_rows", (3, 128, 1), 4)]
    assert [n.attrs.get("name") for n in ll.live_nodes() if n.op == "CustomOp"] == ["rms_norm_rows"]


def test_attention_softmax_reads_the_scores_through_scale_and_mask():
    fn, args, _ = attention_case()
    ks = _kernels(_extractor(fn, args, NumpyBackend.kernel_kinds).extract(None))
    assert ks == [("softmax_rows", (4, 3, 6, 0), 5)]


def test_3d_rms_norm_and_2d_softmax():
    fn, args, _ = rms3_case()
    assert _kernels(_extractor(fn, args, NumpyBackend.kernel_kinds).extract(None))[0][:2] == \
        ("rms_norm_rows", (6, 32, 0))
    fn, args, _ = softmax2_case()
    assert _kernels(_extractor(fn, args, NumpyBackend.kernel_kinds).extract(None)) == \
        [("softmax_rows", (1, 5, 9, 0), 3)]


def test_plain_softmax_over_the_last_axis_of_3d():
    fn, args, _ = softmax3_case()
    assert _kernels(_extractor(fn, args, NumpyBackend.kernel_kinds).extract(None)) == \
        [("softmax_rows", (2, 3, 7, 0), 3)]


@pytest.mark.parametrize("name,fn,args", [
    # the sum over the first axis is not a row norm
    ("axis0", lambda x, w: x * lnp.reciprocal(lnp.sqrt(lnp.mean(x * x, axis=0, keepdims=True) + 1e-5)) * w,
     (f32(4, 8), f32(1, 8))),
    # the squares of another tensor
    ("other_square", lambda x, y, w: x * lnp.reciprocal(lnp.sqrt(lnp.mean(x * y, axis=-1, keepdims=True) + 1e-5)) * w,
     (f32(4, 8), f32(4, 8), f32(8))),
    # a norm without the reciprocal square root
    ("no_rsqrt", lambda x, w: x * lnp.sqrt(lnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w,
     (f32(4, 8), f32(8))),
    # the softmax over a middle axis
    ("softmax_axis1", lambda x: lf.nn.softmax(x, axis=1), (f32(2, 5, 3),)),
    # max subtracted from another tensor than the one exponentiated
    ("softmax_two_inputs", lambda x, y: lnp.exp(x - lnp.max(y, axis=-1, keepdims=True))
     / lnp.sum(lnp.exp(x - lnp.max(y, axis=-1, keepdims=True)), axis=-1, keepdims=True), (f32(2, 3, 4), f32(2, 3, 4))),
])
def test_near_misses_do_not_fire(name, fn, args):
    ex = _extractor(fn, args, NumpyBackend.kernel_kinds)
    assert _kernels(ex.extract(None)) == [], name
    assert list(ex.kernel_genomes()) == [], name


def test_the_rules_leave_other_backends_alone():
    fn, args, _ = rms_case()
    assert _kernels(_extractor(fn, args, frozenset()).extract(None)) == []


# ---- every genome computes the reference (NumPy backend) -----------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_random_genomes_compute_the_reference(name):
    fn, args, want = CASES[name]()
    ex = _extractor(fn, args, NumpyBackend.kernel_kinds)
    be = NumpyBackend()
    rnd = random.Random(3)
    used = 0
    genomes = [None, *ex.kernel_genomes()] + [tuple(rnd.randrange(g.n_options) for g in ex.genes)
                                              for _ in range(24)]
    for genome in genomes:
        ll = ex.extract(genome)
        used += bool(_kernels(ll))
        got = be.compile(ll).run(list(args), {})[0]
        _close(got, want, got.dtype)
    assert used > 0


def test_jit_default_backend_matches_reference_with_symbolic_rows():
    fn, _, _ = rms_case()
    jf = lf.jit(fn, backend="numpy", dynamic_axes={"x": {0: "n"}}, buckets={"n": [(1, 16)]})
    for n in (1, 7):
        x, w = f32(n, 64), f32(64)
        _close(jf(x, w), ref_rms(x, w, 1e-5), np.float32)


# ---- CUDA --------------------------------------------------------------------------------------
def test_cuda_plans_and_the_module_compiles():
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    labels = []
    kernels = []
    for name in sorted(CASES):
        fn, args, _ = CASES[name]()
        ll = _extractor(fn, args, KERNEL_KINDS).extract(None)
        plan = plan_graph(ll, {})
        labels += [s.label for s in plan.steps]
        kernels += plan.kernels()
    assert labels.count("rms_norm_rows") == 4 and labels.count("softmax_rows") == 7
    if nvcc_available():
        nvcc_check(module_source(kernels))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_row_kernels_compute_the_reference(name):
    fn, args, want = CASES[name]()
    jf = lf.jit(fn, backend="cuda")
    got = np.asarray(jf(*args))
    _close(got, want, got.dtype)
    assert jf.lower(*args).as_text().count("rms_norm_rows") + jf.lower(*args).as_text().count("softmax_rows") >= 1


@pytest.mark.gpu
def test_cuda_attention_in_bfloat16_with_a_dynamic_context():
    jf = lf.jit(lambda q, k, v, m: lf.nn.scaled_dot_product_attention(q, k, v, mask=m), backend="cuda",
                dynamic_axes={"k": {1: "c"}, "v": {1: "c"}, "m": {1: "c"}}, buckets={"c": [(1, 64)]})
    for c in (5, 33):
        q, k, v = (f32(4, n, 32) for n in (1, c, c))
        mask = np.zeros((1, c), np.float32)
        mask[0, c // 2:] = -1e10
        qb, kb, vb = (a.astype(ml_dtypes.bfloat16) for a in (q, k, v))
        got = np.asarray(jf(qb, kb, vb, mask))
        want = ref_attention(*(a.astype(np.float32) for a in (qb, kb, vb)), mask)
        _close(got, want, ml_dtypes.bfloat16)


# ---- the CUDA kernels on the CPU emulation of CUDA (g++ stand-in, tests/cuda_model_emulation.py) --
def _emulation_library(bp, workdir):
    """The stand-in for CUDA, kernels/rms_norm.cu and softmax.cu, and the plan's kernels."""
    import cuda_model_emulation as emu

    return emu.build_with_hand(bp, ("rms_norm.cu", "softmax.cu"), workdir)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("name", ["rms", "rms3", "softmax2", "softmax3", "attention", "softmax_held",
                                  "softmax_held_wide", "softmax_long", "attention_held"])
def test_cuda_row_kernels_on_the_cpu_emulation_compute_the_reference(name, tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    fn, args, want = CASES[name]()
    llir = _extractor(fn, args, KERNEL_KINDS).extract(None)
    for n in llir.live_nodes():  # cuBLAS is not emulated: the attention's products rendered
        if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
            n.attrs["strategy"] = "rendered"
    bp = plan_graph(llir, {})
    assert any(s.label in KINDS for s in bp.steps)
    got = emu.run(_emulation_library(bp, str(tmp_path)), bp, list(args), {})[0]
    _close(got, want, got.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(HALF_RMS))
def test_cuda_half_precision_rms_norm_and_softmax(name):
    """On the GPU: the half-precision norm's kernel (CAST 2 / 3, reading the half x directly)
    gives the Hugging Face model's bits (>= 99% identical), and a half softmax matches float64."""
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    d, shape, code = HALF_RMS[name]
    x = (R.standard_normal(shape) * 2).astype(d)
    w = R.standard_normal(shape[-1:]).astype(d)

    def norm(a, b):
        return lf.nn.rms_norm(a, b, eps=1e-6)

    ll = _extractor(norm, (x, w), KERNEL_KINDS).extract(None)
    assert [k[1][2] for k in _kernels(ll)] == [code]
    assert [s.label for s in plan_graph(ll, {}).steps if s.label != "output copy"] == ["rms_norm_rows"]
    jf = lf.jit(norm, backend="cuda")
    got, want = np.asarray(jf(x, w)), ref_rms_half(x, w, 1e-6)
    assert (got == want).mean() >= 0.99
    s = (R.standard_normal(shape) * 3).astype(d)
    _close(np.asarray(lf.jit(lambda a: lf.nn.softmax(a, axis=-1), backend="cuda")(s)), ref_softmax(s), ml_dtypes.bfloat16)

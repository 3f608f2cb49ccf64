"""Issue 7: the model rules (optimize/rules/specialize_models.egg) fire on the patterns the front
end traces and not on near misses; the NumPy model kernels match NumPy references; the DLRM
example matches its float64 reference.

The rules are run with egglog directly (encode(graph) + the rule files + a bounded schedule) and
queried with ``(check (= (NodeOf id) (Kernel "name" ...)))``."""
import importlib.util
import pathlib
from types import SimpleNamespace

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy import KERNELS, NumpyBackend
from luminal_fn.backends.numpy.model_kernels import MODEL_KERNELS
from luminal_fn.ir import dtypes as dt
from luminal_fn.optimize.encode import encode

egglog_bindings = pytest.importorskip("egglog.bindings")

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = ROOT / "luminal_fn" / "optimize" / "rules"
MODEL_RULES = RULES / "specialize_models.egg"  # and the embedding-bag rules after it:
MODEL_RULE_FILES = sorted(RULES.glob("specialize_models*.egg"))
R = np.random.default_rng(7)


def f32(*s):
    return R.standard_normal(s).astype(np.float32)


# ---- the generated flat pairwise rules --------------------------------------------------------
GEN_BEGIN = "; ---- generated: tril_rule(F) for F = 3..9 (tests/test_models.py; do not edit by hand) ----\n"
GEN_END = "; ---- end generated ----\n"


def tril_rule(f: int) -> str:
    """The one-premise-chain rule for F features: the left-nested Add of the F-1 row slices of Z,
    each slice's offset and mask spelled out (row i covers columns [i(i-1)/2, i(i+1)/2) at offset
    i*F - i(i-1)/2 of Z's (B, F, F) buffer)."""
    p, ff = f * (f - 1) // 2, f * f

    def leaf(i):
        lo = i * (i - 1) // 2
        return (f"(V z sh st (MNum {i * f - lo}) (MaskSome (ECons (MNum 0) (ECons (MNum {lo}) (ENil))) "
                f"(ECons b (ECons (MNum {lo + i}) (ENil)))))")

    chain = leaf(1)
    for i in range(2, f):
        chain = f"(Bin \"Add\" {chain}\n                {leaf(i)})"
    return (f"(rule ((= sh (ECons b (ECons (MNum {p}) (ENil))))\n"
            f"       (= st (ECons (MNum {ff}) (ECons (MNum 1) (ENil))))\n"
            f"       (Gram z tv b {f} d)\n"
            f"       (= e {chain}))\n"
            f"      ((union e (Kernel \"dlrm_interact\" (ICons tv (INil)) (ECons b (ECons (MNum {f}) (ECons d (ENil)))))))\n"
            f"      :ruleset specialize)\n")


def generated_block() -> str:
    return GEN_BEGIN + "".join(tril_rule(f) for f in range(3, 10)) + GEN_END


def test_generated_pairwise_rules_are_current():
    text = MODEL_RULES.read_text()
    assert GEN_BEGIN in text, "regenerate: python tests/test_models.py --regen"
    block = text[text.index(GEN_BEGIN): text.index(GEN_END) + len(GEN_END)]
    assert block == generated_block(), "regenerate: python tests/test_models.py --regen"


# ---- running the rules ------------------------------------------------------------------------
def saturate(fn, *args, iterations=2):
    """Trace fn, load it with base.egg, the expression/fusion rules and this file's rules, run
    ``iterations`` rounds of specialize (the optimizer's schedule runs 2). Returns (graph, egraph)."""
    graph = lf.jit(fn).trace(*args).hlir
    eg = egglog_bindings.EGraph()
    for text in (RULES / "base.egg").read_text(), (RULES / "expr.egg").read_text(), \
            (RULES / "fuse.egg").read_text(), *(f.read_text() for f in MODEL_RULE_FILES):
        eg.run_program(*eg.parse_program(text))
    eg.run_program(*eg.parse_program("\n".join(encode(graph).commands)))
    eg.run_program(*eg.parse_program(
        f"(run-schedule (saturate (run expr)) (repeat {iterations} (run specialize)) (run fuse))"))
    return graph, eg


def holds(eg, fact: str) -> bool:
    try:
        eg.run_program(*eg.parse_program(f"(check {fact})"))
        return True
    except Exception as e:  # egglog raises EggSmolError when the check fails
        assert "Check failed" in str(e) or "check" in str(e).lower(), e
        return False


def result_id(graph) -> int:
    (out,) = [n for n in graph.live_nodes() if n.op == "Output"]
    return out.inputs[0][0]


def fires(eg, graph, name: str) -> bool:
    return holds(eg, f'(= (NodeOf {result_id(graph)}) (Kernel "{name}" i p))')


def ml(*xs):
    """An egglog Expr cons-list of integers."""
    out = "(ENil)"
    for x in reversed(xs):
        out = f"(ECons (MNum {x}) {out})"
    return out


# ---- embedding-bag ----------------------------------------------------------------------------
def test_embedding_bag_rule_fires_with_its_exact_kernel():
    table, idx = f32(10, 4), R.integers(0, 10, (3, 2)).astype(np.int32)
    g, eg = saturate(lambda t, i: lf.nn.embedding_bag(t, i), table, idx)
    assert fires(eg, g, "embedding_bag")
    # inputs: the table as is, the 6 row indices, the row stride; params B L D
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "embedding_bag" (ICons (Inp 0) rest) {ml(3, 2, 4)}))')


def test_embedding_bag_mean_still_uses_the_sum_kernel_and_max_does_not():
    table, idx = f32(10, 4), R.integers(0, 10, (3, 2)).astype(np.int32)
    g, eg = saturate(lambda t, i: lf.nn.embedding_bag(t, i, mode="mean"), table, idx)
    sum_id = [n.id for n in g.live_nodes() if n.op == "SumReduce"][0]
    assert holds(eg, f'(= (NodeOf {sum_id}) (Kernel "embedding_bag" i p))')
    g, eg = saturate(lambda t, i: lf.nn.embedding_bag(t, i, mode="max"), table, idx)
    assert not fires(eg, g, "embedding_bag")


def test_embedding_bag_near_misses():
    table, idx = f32(10, 4), R.integers(0, 10, (3, 2)).astype(np.int32)
    # summing gathered rows over the wrong axis (the bag index, not the bag members)
    g, eg = saturate(lambda t, i: lnp.sum(lnp.reshape(lf.nn.gather_rows(t, i.reshape(-1)), (3, 2, 4)), axis=0), table, idx)
    assert not fires(eg, g, "embedding_bag")
    # a plain reduction of a table (no gather)
    g, eg = saturate(lambda t: lnp.sum(lnp.reshape(t, (5, 2, 4)), axis=1), table)
    assert not fires(eg, g, "embedding_bag")


# ---- DLRM pairwise interaction ----------------------------------------------------------------
def _feats(f, b=5, d=3):
    return [f32(b, d) for _ in range(f)]


@pytest.mark.parametrize("f", [3, 4, 9])
def test_pairwise_rule_fires_in_two_iterations(f):
    g, eg = saturate(lambda *xs: lf.nn.pairwise_dot(list(xs)), *_feats(f))
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "dlrm_interact" (ICons t (INil)) {ml(5, f, 3)}))')


def test_pairwise_rule_for_large_f_needs_more_iterations():
    feats = _feats(11, b=2, d=2)
    g, eg = saturate(lambda *xs: lf.nn.pairwise_dot(list(xs)), *feats, iterations=2)
    assert not fires(eg, g, "dlrm_interact")  # no flat rule for F = 11; the induction is F + 1 deep
    g, eg = saturate(lambda *xs: lf.nn.pairwise_dot(list(xs)), *feats, iterations=12)
    assert fires(eg, g, "dlrm_interact")


def _tril_by_slices(rows_of, f):
    def fn(*xs):
        t = lnp.stack(list(xs), axis=1)
        z = lnp.matmul(t, lnp.transpose(t, (0, 2, 1)))
        return lnp.concatenate([rows_of(z, i) for i in range(1, f)], axis=1)
    return fn


@pytest.mark.parametrize("case", ["upper", "shifted", "reversed", "incomplete", "not_gram"])
def test_pairwise_near_misses(case):
    f = 4
    feats = _feats(f)
    if case == "upper":  # same count and layout of slices, but the strict upper triangle
        fn = _tril_by_slices(lambda z, i: z[:, f - 1 - i, f - i:], f)
    elif case == "shifted":  # right widths, wrong columns (includes the diagonal)
        fn = _tril_by_slices(lambda z, i: z[:, i, 1:i + 1], f)
    elif case == "reversed":  # the right pairs in the wrong order
        def fn(*xs):
            t = lnp.stack(list(xs), axis=1)
            z = lnp.matmul(t, lnp.transpose(t, (0, 2, 1)))
            return lnp.concatenate([z[:, i, :i] for i in range(f - 1, 0, -1)], axis=1)
    elif case == "incomplete":  # rows 1..F-2 only
        def fn(*xs):
            t = lnp.stack(list(xs), axis=1)
            z = lnp.matmul(t, lnp.transpose(t, (0, 2, 1)))
            return lnp.concatenate([z[:, i, :i] for i in range(1, f - 1)], axis=1)
    else:  # T @ U^T with U != T
        def fn(*xs):
            t = lnp.stack(list(xs), axis=1)
            z = lnp.matmul(t, lnp.transpose(t * 2.0, (0, 2, 1)))
            return lnp.concatenate([z[:, i, :i] for i in range(1, f)], axis=1)
    g, eg = saturate(fn, *feats, iterations=6)
    assert not holds(eg, '(= e (Kernel "dlrm_interact" i p))')


# ---- conv2d -----------------------------------------------------------------------------------
def test_conv2d_rule_seed_case_padded_3x3():
    # the seed's case: 2x3x3 input, 3x3 kernel, padding 1 -> params kh kw sh sw dh dw pt pl Ho Wo
    x, w, b = f32(2, 3, 3), f32(4, 2, 3, 3), f32(4)
    g, eg = saturate(lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1), x, w, b)
    xin = f"(V (Inp 0) {ml(2, 3, 3)} {ml(9, 3, 1)} (MNum 0) (MaskNone))"
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "conv2d_bias" (ICons {xin} rest) '
                     f'{ml(3, 3, 1, 1, 1, 1, 1, 1, 3, 3)}))')


@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(padding=(1, 2), stride=(2, 1)),
                                dict(padding=2, dilation=2)])
def test_conv2d_rule_fires_and_its_kernel_matches(kw):
    x, w, b = f32(2, 7, 6), f32(3, 2, 3, 3), f32(3)
    fn = lambda x, w, b: lf.nn.conv2d(x, w, b, **kw)  # noqa: E731
    g, eg = saturate(fn, x, w, b)
    assert fires(eg, g, "conv2d_bias")
    # the kernel with the parameters the padded rule derives reproduces the traced conv
    stride = kw.get("stride", 1)
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dil = kw.get("dilation", 1)
    pad = kw.get("padding", 0)
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    want = np.asarray(lf.jit(fn)(x, w, b))
    ho, wo = want.shape[1:]
    got = run_kernel("conv2d_bias", [x, w.reshape(3, -1), b], [3, 3, sh, sw, dil, dil, ph, pw, ho, wo])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if ph or pw:
        xin = f"(V (Inp 0) {ml(2, 7, 6)} {ml(42, 6, 1)} (MNum 0) (MaskNone))"
        assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "conv2d_bias" (ICons {xin} rest) '
                         f'{ml(3, 3, sh, sw, dil, dil, ph, pw, ho, wo)}))')


def test_conv2d_rule_1x1_as_transposed_matmul():
    x, w, b = f32(2, 4, 5), f32(3, 2, 1, 1), f32(3)
    g, eg = saturate(lambda x, w, b: lf.nn.conv2d(x, w, b), x, w, b)
    xin = f"(V (Inp 0) {ml(2, 4, 5)} {ml(20, 5, 1)} (MNum 0) (MaskNone))"
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "conv2d_bias" (ICons {xin} rest) '
                     f'{ml(1, 1, 1, 1, 1, 1, 0, 0, 4, 5)}))')


def test_conv2d_rule_after_nearest_upsample():
    # the seed's VAE decoder pattern: upsample 2x (a broadcast view, copied) -> padded 3x3 conv
    x, w, b = f32(2, 3, 4), f32(3, 2, 3, 3), f32(3)
    fn = lambda x, w, b: lf.nn.conv2d(lf.nn.nearest_upsample_2x(x), w, b, padding=1)  # noqa: E731
    g, eg = saturate(fn, x, w, b)
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "conv2d_bias" i {ml(3, 3, 1, 1, 1, 1, 1, 1, 6, 8)}))')


@pytest.mark.parametrize("n,kw", [(1, dict(padding=1)), (2, dict(padding=1)), (3, dict(padding=(1, 2), stride=2)),
                                  (2, dict()), (1, dict(stride=(2, 1)))])
def test_conv2d_rule_batched(n, kw):
    x, w, b = f32(n, 2, 7, 6), f32(3, 2, 3, 3), f32(3)
    fn = lambda x, w, b: lf.nn.conv2d(x, w, b, **kw)  # noqa: E731
    g, eg = saturate(fn, x, w, b)
    want = np.asarray(lf.jit(fn)(x, w, b))
    pad = kw.get("padding", 0)
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    stride = kw.get("stride", 1)
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ho, wo = want.shape[2:]
    xin = f"(V (Inp 0) {ml(n, 2, 7, 6)} {ml(84, 42, 6, 1)} (MNum 0) (MaskNone))" if ph or pw else "x"
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "conv2d_bias" (ICons {xin} rest) '
                     f'{ml(3, 3, sh, sw, 1, 1, ph, pw, ho, wo)}))')
    got = run_kernel("conv2d_bias", [x, w.reshape(3, -1), b], [3, 3, sh, sw, 1, 1, ph, pw, ho, wo])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv2d_rule_batched_1x1():
    x, w, b = f32(2, 2, 4, 5), f32(3, 2, 1, 1), f32(3)
    g, eg = saturate(lambda x, w, b: lf.nn.conv2d(x, w, b), x, w, b)
    xin = f"(V (Inp 0) {ml(2, 2, 4, 5)} {ml(40, 20, 5, 1)} (MNum 0) (MaskNone))"
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "conv2d_bias" (ICons {xin} rest) '
                     f'{ml(1, 1, 1, 1, 1, 1, 0, 0, 4, 5)}))')


def test_conv2d_near_miss_batched_output_not_per_sample():
    # a batched patch matmul whose first sample is broadcast to both outputs: the output view
    # has the (N, C_out, H_out, W_out) shape but batch stride 0, so it is not a conv
    x, w, b = f32(2, 2, 5, 6), f32(3, 2, 3, 3), f32(3)

    def fn(x, w, b, first_only):
        u = lnp.unfold(lnp.unfold(x, 2, 3, 1, 1), 4, 3, 1, 1)  # (N, C, Ho, kh, Wo, kw)
        ho, wo = u.shape[2], u.shape[4]
        p = lnp.reshape(lnp.transpose(u, (0, 2, 4, 1, 3, 5)), (2, ho * wo, 18))
        out = lnp.matmul(p, lnp.reshape(w, (3, -1)).T)  # (N, M, C_out)
        if first_only:
            out = lnp.broadcast_to(out[:1], out.shape)
        out = lnp.transpose(lnp.reshape(out, (2, ho, wo, 3)), (0, 3, 1, 2))
        return out + lnp.reshape(b, (3, 1, 1))

    g, eg = saturate(lambda x, w, b: fn(x, w, b, False), x, w, b)
    assert fires(eg, g, "conv2d_bias")  # the control: the same code per sample is a conv
    g, eg = saturate(lambda x, w, b: fn(x, w, b, True), x, w, b)
    assert not fires(eg, g, "conv2d_bias")


def test_conv2d_near_miss_without_conv_output_shape():
    # the seed's negative case: the same unfold + matmul + bias, left as (H_out*W_out, C_out)
    x, w, b = f32(2, 5, 6), f32(3, 2, 3, 2), f32(3)

    def fn(x, w, b):
        u = lnp.unfold(lnp.unfold(x, 1, 3, 1, 1), 3, 2, 1, 1)  # (C, Ho, kh, Wo, kw)
        ho, wo = u.shape[1], u.shape[3]
        patches = lnp.reshape(lnp.transpose(u, (1, 3, 0, 2, 4)), (ho * wo, 2 * 3 * 2))
        return lnp.matmul(patches, lnp.reshape(w, (3, -1)).T) + b

    g, eg = saturate(fn, x, w, b)
    assert not fires(eg, g, "conv2d_bias")
    assert fires(eg, g, "linear_bias")  # it is a linear layer, and that rule sees it


# ---- linear + bias, matmul with transposed rhs ------------------------------------------------
def test_linear_bias_and_matmul_t_rules():
    x, w, b = f32(5, 3), f32(3, 4), f32(4)
    g, eg = saturate(lf.nn.linear, x, w, b)
    xv = f"(V (Inp 0) {ml(5, 3)} {ml(3, 1)} (MNum 0) (MaskNone))"
    wv = f"(V (Inp 1) {ml(3, 4)} {ml(4, 1)} (MNum 0) (MaskNone))"
    bv = f"(V (Inp 2) {ml(4)} {ml(1)} (MNum 0) (MaskNone))"
    assert holds(eg, f'(= (NodeOf {result_id(g)}) (Kernel "linear_bias" (ICons {xv} (ICons {wv} (ICons {bv} (INil)))) {ml(5, 4, 3)}))')
    g, eg = saturate(lambda x, w: x @ w, x, w)  # no bias: no linear_bias
    assert not fires(eg, g, "linear_bias")
    a, c = f32(2, 5, 3), f32(2, 4, 3)
    g, eg = saturate(lambda a, c: a @ lnp.transpose(c, (0, 2, 1)), a, c)
    assert fires(eg, g, "matmul_t")
    g, eg = saturate(lambda a, c: a @ c, a, f32(2, 3, 4))  # rhs not transposed: K is strided
    assert not fires(eg, g, "matmul_t")


# ---- through the optimizer: random genomes with the model kernels agree with the HLIR ------------
E2E_CASES = {
    "embedding_bag": (lambda t, i: lf.nn.embedding_bag(t, i),
                      lambda: [f32(10, 4), R.integers(-10, 10, (3, 2)).astype(np.int32)]),
    "dlrm_interact": (lambda *xs: lf.nn.pairwise_dot(list(xs)), lambda: _feats(4)),
    "conv2d_bias": (lambda x, w, b: lf.nn.conv2d(x, w, b, padding=(1, 2), stride=2, dilation=(1, 2)),
                    lambda: [f32(2, 7, 6), f32(4, 2, 3, 3), f32(4)]),
    "conv2d_bias_nchw": (lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1, stride=(1, 2)),
                         lambda: [f32(2, 2, 5, 6), f32(3, 2, 3, 3), f32(3)]),
    "linear_bias": (lf.nn.linear, lambda: [f32(5, 3), f32(3, 4), f32(4)]),
    "matmul_t": (lambda a, c: a @ lnp.transpose(c, (0, 2, 1)), lambda: [f32(2, 5, 3), f32(2, 4, 3)]),
}


@pytest.mark.parametrize("name", sorted(E2E_CASES))
def test_random_genomes_with_model_kernels_match(name):
    egraph_mod = pytest.importorskip("luminal_fn.optimize.egraph")
    extract_mod = pytest.importorskip("luminal_fn.optimize.extract")
    import random

    fn, make = E2E_CASES[name]
    args = make()
    graph = lf.jit(fn).trace(*args).hlir
    backend = NumpyBackend()
    ref = backend.compile(graph).run([backend.from_numpy(a) for a in args], {})[0]
    ex = extract_mod.Extractor(egraph_mod.build_egraph(graph), graph, kernel_kinds=backend.kernel_kinds)
    rnd = random.Random(0)
    used = 0
    for t in range(10):
        genome = None if t == 0 else tuple(rnd.randrange(g.n_options) for g in ex.genes)
        llir = ex.extract(genome)
        kind = name.split("_nchw")[0]
        used += any(n.op == "CustomOp" and n.attrs.get("name") == kind for n in llir.live_nodes())
        out = backend.compile(llir).run([backend.from_numpy(a) for a in args], {})[0]
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert used > 0, f"no genome used the {name} kernel"


# ---- NumPy kernels vs references ----------------------------------------------------------------
def run_kernel(name, inputs, params, dtype=dt.float32):
    node = SimpleNamespace(attrs={"name": name, "params": tuple(params)}, dtype=dtype)
    readers = [(lambda k: (lambda vals, dims: vals[k]))(k) for k in range(len(inputs))]
    return KERNELS[name](node, readers)(list(inputs), {})


def test_numpy_backend_lists_the_model_kernels():
    assert set(MODEL_KERNELS) <= set(NumpyBackend.kernel_kinds)
    assert set(MODEL_KERNELS) <= set(KERNELS)


def test_embedding_bag_kernel():
    table = f32(50, 8)
    rows = R.integers(0, 50, 6 * 3).astype(np.int32)
    got = run_kernel("embedding_bag", [table, rows, np.array([8], np.int32)], [6, 3, 8])
    want = table.astype(np.float64)[rows].reshape(6, 3, 8).sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # a row stride other than D reads the flat table as the Gather primitive would (clamped)
    got = run_kernel("embedding_bag", [table, rows, np.array([5], np.int32)], [6, 3, 8])
    flat = table.reshape(-1).astype(np.float64)
    idx = np.clip(rows.reshape(6, 3, 1) * 5 + np.arange(8), 0, flat.size - 1)
    np.testing.assert_allclose(got, flat[idx].sum(1), rtol=1e-5, atol=1e-5)
    ti = R.integers(-5, 5, (7, 2)).astype(np.int32)
    got = run_kernel("embedding_bag", [ti, np.array([6, 0, 3, 3], np.int32), np.array([2], np.int32)], [2, 2, 2], dt.int32)
    np.testing.assert_array_equal(got, ti[[6, 0, 3, 3]].reshape(2, 2, 2).sum(1))


def test_dlrm_interact_kernel():
    t = f32(4, 5, 6)
    got = run_kernel("dlrm_interact", [t], [4, 5, 6])
    z = t.astype(np.float64) @ t.astype(np.float64).transpose(0, 2, 1)
    li, lj = np.tril_indices(5, -1)
    assert got.shape == (4, 10)
    np.testing.assert_allclose(got, z[:, li, lj], rtol=1e-5, atol=1e-5)


def _conv_ref(x, w, b, sh, sw, dh, dw, pads):
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr)))
    co, c, kh, kw = w.shape
    ho = (xp.shape[1] - dh * (kh - 1) - 1) // sh + 1
    wo = (xp.shape[2] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((co, ho, wo))
    for i in range(kh):
        for j in range(kw):
            win = xp[:, i * dh: i * dh + (ho - 1) * sh + 1: sh, j * dw: j * dw + (wo - 1) * sw + 1: sw]
            out += np.einsum("oc,chw->ohw", w[:, :, i, j].astype(np.float64), win)
    return out + b.reshape(-1, 1, 1)


@pytest.mark.parametrize("sh,sw,dh,dw,pads", [(1, 1, 1, 1, ((1, 1), (1, 1))), (2, 1, 1, 2, ((0, 1), (2, 0))),
                                              (1, 2, 2, 1, ((0, 0), (0, 0)))])
def test_conv2d_bias_kernel(sh, sw, dh, dw, pads):
    x, w, b = f32(3, 7, 8), f32(4, 3, 3, 2), f32(4)
    want = _conv_ref(x, w, b, sh, sw, dh, dw, pads)
    params = [3, 2, sh, sw, dh, dw, pads[0][0], pads[1][0], *want.shape[1:]]
    got = run_kernel("conv2d_bias", [x, w.reshape(4, -1), b], params)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    xb = np.stack([x, -2 * x])  # batched: per sample
    got = run_kernel("conv2d_bias", [xb, w.reshape(4, -1), b], params)
    np.testing.assert_allclose(got[1], _conv_ref(xb[1], w, b, sh, sw, dh, dw, pads), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


def test_linear_bias_and_matmul_t_kernels():
    x, w, b = f32(5, 3), f32(3, 4), f32(4)
    np.testing.assert_allclose(run_kernel("linear_bias", [x, w, b], [5, 4, 3]),
                               x.astype(np.float64) @ w + b, rtol=1e-5, atol=1e-5)
    a, c = f32(2, 5, 3), f32(2, 4, 3)
    np.testing.assert_allclose(run_kernel("matmul_t", [a, c], [2, 5, 4, 3]),
                               a.astype(np.float64) @ c.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


# ---- the hand-written GPU sources ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["embedding_bag", "dlrm_interact", "conv2d"])
def test_cuda_model_kernels_compile(name, tmp_path):
    import shutil
    import subprocess

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this machine")
    src = ROOT / "kernels" / f"{name}.cu"
    r = subprocess.run(["nvcc", "-arch=sm_90", "--ptx", str(src), "-o", str(tmp_path / "k.ptx")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f".entry lf_{name}" in (tmp_path / "k.ptx").read_text()


def _metal():
    mx = pytest.importorskip("mlx.core")
    if not mx.metal.is_available():
        pytest.skip("Metal is not available (the .metal kernels run on Apple silicon)")
    return mx


METAL_CASES = {
    # name: (input names, inputs, params, output shape, grid, threadgroup, numpy kernel inputs/params)
    "embedding_bag": lambda: (
        ["table", "rows", "row_stride", "params"],
        [f32(20, 8), R.integers(0, 20, 12).astype(np.int32), np.array([8], np.int32),
         np.array([4, 3, 8, 160], np.int32)], (4, 8), (8, 4, 1), (8, 1, 1), [4, 3, 8]),
    "dlrm_interact": lambda: (
        ["t", "params"], [f32(3, 5, 6), np.array([3, 5, 6], np.int32)], (3, 10), (10, 3, 1),
        (10, 1, 1), [3, 5, 6]),
    "conv2d": lambda: (
        ["x", "w", "bias", "params"],
        [f32(2, 6, 5), f32(3, 2 * 3 * 3), f32(3), np.array([1, 2, 6, 5, 3, 3, 3, 2, 1, 1, 2, 1, 2, 3, 5], np.int32)],
        (3, 3, 5), (5, 3, 3), (5, 3, 1), [3, 3, 2, 1, 1, 2, 1, 2, 3, 5]),
}


@pytest.mark.metal
@pytest.mark.parametrize("name", sorted(METAL_CASES))
def test_metal_model_kernels_match_numpy(name):
    mx = _metal()
    names, inputs, out_shape, grid, group, params = METAL_CASES[name]()
    body = (ROOT / "kernels" / f"{name}.metal").read_text()
    k = mx.fast.metal_kernel(name=f"lf_test_{name}", input_names=names, output_names=["out"],
                             source=body, ensure_row_contiguous=True)
    (out,) = k(inputs=[mx.array(a) for a in inputs], output_shapes=[(int(np.prod(out_shape)),)],
               output_dtypes=[mx.float32], grid=grid, threadgroup=group)
    kernel_name = "conv2d_bias" if name == "conv2d" else name
    want = run_kernel(kernel_name, inputs[:-1], params)
    np.testing.assert_allclose(np.array(out).reshape(out_shape), want, rtol=1e-5, atol=1e-5)


# ---- the VAE helpers on the seed's unbatched cases ----------------------------------------------
def test_unbatched_conv2d_and_upsample_seed_cases():
    x, w, b = f32(2, 3, 3), f32(4, 2, 3, 3), f32(4)
    got = np.asarray(lf.jit(lambda x, w, b: lf.nn.conv2d(x, w, b, padding=1))(x, w, b))
    np.testing.assert_allclose(got, _conv_ref(x, w, b, 1, 1, 1, 1, ((1, 1), (1, 1))), rtol=1e-5, atol=1e-5)
    u = f32(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(lf.jit(lf.nn.nearest_upsample_2x)(u)),
                                  u.repeat(2, axis=1).repeat(2, axis=2))


# ---- nn helpers and the DLRM example ------------------------------------------------------------
def test_pairwise_dot_values_and_errors():
    for f in (2, 3, 6):
        feats = _feats(f, b=4, d=5)
        got = np.asarray(lf.jit(lambda *xs: lf.nn.pairwise_dot(list(xs)))(*feats))
        t = np.stack(feats, 1).astype(np.float64)
        z = t @ t.transpose(0, 2, 1)
        li, lj = np.tril_indices(f, -1)
        np.testing.assert_allclose(got, z[:, li, lj], rtol=1e-5, atol=1e-5)
    with pytest.raises(lf.ShapeError, match="pairwise_dot.*at least 2"):
        lf.nn.pairwise_dot([f32(2, 3)])
    with pytest.raises(lf.ShapeError, match="pairwise_dot.*features\\[1\\]"):
        lf.nn.pairwise_dot([f32(2, 3), f32(2, 4)])


def test_embedding_bag_errors_name_the_function():
    table = f32(10, 4)
    with pytest.raises(ValueError, match="embedding_bag.*per_sample_weights"):
        lf.nn.embedding_bag(table, np.zeros((2, 3), np.int32), per_sample_weights=np.ones((2, 3), np.float32))
    with pytest.raises(lf.ShapeError, match="embedding_bag.*fixed bag size"):
        lf.nn.embedding_bag(table, np.zeros(5, np.int32), offsets=[0, 2])
    with pytest.raises(ValueError, match="embedding_bag.*mode"):
        lf.nn.embedding_bag(table, np.zeros((2, 3), np.int32), mode="median")


def _load_example():
    spec = importlib.util.spec_from_file_location("dlrm_example", ROOT / "examples" / "dlrm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("num_cat", [1, 4])
def test_dlrm_example_matches_float64(num_cat):
    dlrm = _load_example()
    r = dlrm.run(num_cat, batch=64, iters=1, rows=100)
    assert r["shape"] == (64, 1)
    assert r["max_abs_diff"] <= 1e-5, r


if __name__ == "__main__":
    import sys

    if "--regen" in sys.argv:
        text = MODEL_RULES.read_text()
        if GEN_BEGIN in text:
            text = text[:text.index(GEN_BEGIN)] + text[text.index(GEN_END) + len(GEN_END):]
        MODEL_RULES.write_text(text.rstrip("\n") + "\n\n" + generated_block())

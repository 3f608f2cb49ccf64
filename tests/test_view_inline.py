"""Inlining an elementwise producer into a consumer that reads it through a view (FView).

The cheapest genome must fuse an RMS norm's rsqrt, a softmax's negated max and reciprocal, and a
cast read reshaped into heads (or sliced into halves) into their consumers; every random genome
must still compute the function (checked against independent NumPy, also with symbolic dims);
padded reads and reshapes strides cannot compose must never be inlined.
"""
import random

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import VIEW_INLINE, Extractor
from luminal_fn.ir.view import View
from luminal_fn.ir.expr import var
from luminal_fn.optimize.view_inline import through

R = np.random.default_rng(3)


def _r(*shape, dtype=np.float32):
    return R.standard_normal(shape).astype(dtype)


def rms(x, g):
    return x * lnp.reciprocal(lnp.sqrt(lnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)) * g


def rms_ref(x, g):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g


def softmax(x):
    return lf.nn.softmax(x, axis=-1)


def softmax_ref(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def heads(x, c):
    """A half-precision projection cast to f32 and read split into heads (RoPE's pattern)."""
    return x.astype(np.float32).reshape(x.shape[0], 4, 8) * c + 1.0


def heads_ref(x, c):
    return x.astype(np.float64).reshape(x.shape[0], 4, 8) * c + 1.0


def nested(x, y):
    """A producer inlined through a view that itself reads a producer through a view."""
    return (lnp.exp(x)[:, None] + 1.0) * y


def nested_ref(x, y):
    return (np.exp(x.astype(np.float64))[:, None] + 1.0) * y


def halves(x):
    """Both halves of each head of a cast projection, read sliced (RoPE's rotate_half)."""
    h = x.astype(np.float32).reshape(x.shape[0], 4, 16)
    return h[..., 8:] * 2.0 - h[..., :8]


def halves_ref(x):
    h = x.astype(np.float64).reshape(x.shape[0], 4, 16)
    return h[..., 8:] * 2.0 - h[..., :8]


def padded_inside(x, y):
    """The producer reads a padded input: the padding composes (exp(0) = 1 there)."""
    return lnp.exp(lnp.pad(x, (1, 1)))[:, None] * y


def padded_inside_ref(x, y):
    return np.exp(np.pad(x.astype(np.float64), (1, 1)))[:, None] * y


def padded_read(x, y):
    """The consumer reads exp(x) with its last element replaced by padding: a view of exp's
    whole buffer at offset 0 but masked, where an inlined exp would give exp(x[-1])."""
    return lnp.pad(lnp.exp(x)[:-1], (0, 1))[:, None] * y


def padded_read_ref(x, y):
    return np.pad(np.exp(x.astype(np.float64))[:-1], (0, 1))[:, None] * y


def transposed(x, y):
    """exp(x.T) read reshaped: x's transposed view cannot be reshaped to (3, 8) by strides."""
    return lnp.exp(x.T * 2.0).reshape(3, 8) * y


def transposed_ref(x, y):
    return np.exp(x.T.astype(np.float64) * 2.0).reshape(3, 8) * y


# name: (fn, reference, args, dynamic_axes, dims of the args, fused kernels of the default genome)
CASES = {
    "rms": (rms, rms_ref, lambda s: (_r(s, 16), _r(16)), {"x": {0: "s"}},
            ["fused_reduce", "fused"]),
    "softmax": (softmax, softmax_ref, lambda s: (_r(s, 7),), {"x": {0: "s"}},
                ["fused_reduce", "fused_reduce", "fused"]),
    "heads": (heads, heads_ref, lambda s: (_r(s, 32, dtype=np.float16), _r(4, 8)), {"x": {0: "s"}},
              ["fused"]),
    "halves": (halves, halves_ref, lambda s: (_r(s, 64, dtype=np.float16),), {"x": {0: "s"}},
               ["fused"]),
    "nested": (nested, nested_ref, lambda s: (_r(s), _r(s, 4)), {"x": {0: "s"}, "y": {0: "s"}},
               ["fused"]),
    "padded_inside": (padded_inside, padded_inside_ref, lambda s: (_r(s), _r(3)),
                      {"x": {0: "s"}}, None),
    "padded_read": (padded_read, padded_read_ref, lambda s: (_r(s), _r(3)),
                    {"x": {0: "s"}}, ["fused", "fused"]),
    "transposed": (transposed, transposed_ref, lambda s: (_r(4, 6), _r(8)), None,
                   ["fused", "fused"]),
}


def _kernels(llir):
    return [n.attrs.get("name") for n in llir.live_nodes() if n.op == "CustomOp"]


def _extractor(name, s=5, dynamic=False):
    fn, _, make, axes, _ = CASES[name]
    args = make(s)
    jitted = lf.jit(fn, dynamic_axes=axes) if dynamic and axes else lf.jit(fn)
    traced = jitted.trace(*args)
    return Extractor(build_egraph(traced.hlir), traced.hlir)


@pytest.mark.parametrize("name", ["rms", "softmax", "heads", "halves", "nested", "padded_read",
                                  "transposed"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_default_genome_fuses_producers_read_through_views(name, dynamic):
    if dynamic and CASES[name][3] is None:
        pytest.skip("no symbolic dim in this case")
    ex = _extractor(name, dynamic=dynamic)
    want = CASES[name][4]
    assert _kernels(ex.extract(ex.generic_genome())) == want
    assert _kernels(ex.extract()) == want  # the all-zeros genome too


def test_the_plain_read_stays_a_choice():
    """Each FView is a gene: a genome that declines it gives back the separate kernel."""
    ex = _extractor("heads")
    (ft,) = ex.through
    gene = [g.name for g in ex.genes].index(ex.gene_of[ft])
    assert [n.op for n in ex.options[ft]] == [VIEW_INLINE, "FLeaf"]
    genome = list(ex.generic_genome())
    genome[gene] = 1
    assert _kernels(ex.extract(genome)) == ["fused", "fused"]


def test_a_stored_reciprocal_is_only_a_fallback():
    """The RMS norm's x * recip(sqrt(ms)): its reciprocal is computed where x is multiplied (one
    division), never read stored; the plain read is kept last, for extraction to repair to."""
    ex = _extractor("rms")
    (ft,) = ex.through
    assert ft not in ex.gene_of and ex.n_choices(ft) == 1
    assert [n.op for n in ex.options[ft]] == [VIEW_INLINE, "FLeaf"]
    assert _kernels(ex.extract(ex.generic_genome())) == ["fused_reduce", "fused"]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dynamic", [False, True])
def test_every_random_genome_computes_the_function(name, dynamic):
    fn, ref_fn, make, axes, _ = CASES[name]
    if dynamic and axes is None:
        pytest.skip("no symbolic dim in this case")
    ex = _extractor(name, dynamic=dynamic)
    be = get_backend("numpy")
    sizes = (5, 1, 9) if dynamic else (5,)
    rng = random.Random(17)
    genomes = [ex.generic_genome()] + [tuple(rng.randrange(g.n_options) for g in ex.genes)
                                       for _ in range(32)]
    distinct = set()
    for genome in genomes:
        llir = ex.extract(genome)
        distinct.add(llir.structural_hash())
        prog = be.compile(llir)
        for s in sizes:
            args = make(s)
            (out,) = prog.run(list(args), {"s": s} if dynamic else {})
            np.testing.assert_allclose(out, ref_fn(*args), rtol=2e-5, atol=2e-5,
                                       err_msg=f"{name} s={s} genome {genome}")
    assert len(distinct) > 1


def _input_reads(ex, shape, seed, n=30):
    """(genome, reading node, view) of every read of the Input of ``shape``, over the generic
    genome and ``n`` random ones."""
    rng = random.Random(seed)
    for genome in [ex.generic_genome()] + [tuple(rng.randrange(g.n_options) for g in ex.genes)
                                           for _ in range(n)]:
        llir = ex.extract(genome)
        for node in llir.live_nodes():
            for src, view in node.inputs:
                if llir.nodes[src].op == "Input" and llir.nodes[src].shape == shape:
                    yield genome, node, view


def test_padded_and_unrepresentable_reads_are_never_inlined():
    # a padded read of exp: the FView is offered, but exp(0) = 1 is not the padding's 0, so no
    # genome computes exp under the pad: x is never read through a masked view
    for genome, node, view in _input_reads(_extractor("padded_read"), (5,), 3):
        assert view.mask is None, f"genome {genome}: x read as {view} by {node.attrs}"
    # exp(x.T * 2) read reshaped to (3, 8): the FView is offered (the read itself is a plain
    # reshape) but the transposed input cannot compose, so the multiply keeps its own kernel
    # reading x transposed, whatever the genome
    ex = _extractor("transposed")
    assert ex.through
    for genome, _, view in _input_reads(ex, (4, 6), 2):
        assert view.shape == (6, 4), f"genome {genome}: x read as {view}"


def test_which_views_compose():
    s = var("s")
    # reshape then broadcast: composes
    assert through(View((s, 4, 16), (64, 16, 1)), (s, 64)) is not None
    assert through(View((s, 64), (1, 0)), (s,)) is not None
    # an in-bounds slice of a concrete axis composes
    assert through(View((s, 8), (16, 1), 8), (s, 16)).starts == (0, 8)
    # symbolically masked, permuted, strided, a single column, a symbolic offset or a
    # different count: not
    assert through(View((s + 2, 3), (1, 0), -1, ((1, s + 1), (0, 3))), (s,)) is None
    # a concrete padded read composes through its core, the padding kept for the inputs
    assert through(View((4,), (1,), 0, ((0, 3),)), (4,)).pads == ((0, 0, 1),)
    assert through(View((16, s), (1, 16)), (s, 16)) is None
    assert through(View((s, 8), (16, 2)), (s, 16)) is None
    assert through(View((s,), (16,), 3), (s, 16)) is None
    assert through(View((4, 8), (16, 1), s), (s, 16)) is None
    assert through(View((s, 4, 8), (32, 8, 1)), (s, 64)) is None
    # the composed view: an input read transposed cannot be flattened, a broadcast expands
    how = through(View((s * 64,), (1,)), (s, 64))
    assert how.apply(View((s, 64), (1, s))) is None
    assert how.apply(View((s, 64), (64, 1))) == View((s * 64,), (1,))
    how = through(View((s, 64), (1, 0)), (s,))
    assert how.apply(View((s,), (2,), 3)) == View((s, 64), (2, 0), 3)


@pytest.mark.parametrize("fn, ref", [
    (lambda h, b: lf.nn.relu(h + b), lambda h, b: np.maximum(h + b, 0)),
    (lambda h, b: lnp.where(h > b, h * 2.0, lnp.exp(b)), lambda h, b: np.where(h > b, h * 2, np.exp(b))),
])
def test_a_select_reads_its_branches_through_full_masks_inline(fn, ref):
    """lnp.where stacks its branches on a padded axis; the select reads each branch back through
    a mask that keeps every element, which must not stop inlining: relu(h + b) and a where over
    computed branches are one kernel with no stored intermediate, and scalar constants are
    literals."""
    h, b = _r(4, 8), _r(8)
    traced = lf.jit(fn).trace(h, b)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    llir = ex.extract(ex.generic_genome())
    kernels = [n for n in llir.live_nodes() if n.op == "CustomOp"]
    assert [n.attrs["name"] for n in kernels] == ["fused"], [n.attrs.get("expr") for n in kernels]
    assert all(llir.nodes[i].op == "Input" for i, _ in kernels[0].inputs)
    (out,) = get_backend("numpy").compile(llir).run([h, b], {})
    np.testing.assert_allclose(out, ref(h, b), rtol=1e-6, atol=1e-6)


def test_zero_preserving_computations_inline_under_a_padded_read():
    """rotate_half: concatenate(-x2, x1) of a cast reads each half through a padded view; the
    cast and the negation give 0 on zeros, so they are computed in the consumer (one kernel for
    the whole rotation); an op that does not (exp) is not, and values match NumPy either way."""
    from luminal_fn.optimize.view_inline import maps_zero_to_zero

    assert maps_zero_to_zero(("Mul", "float32", ("Cast", "float32", ("in", 0)), ("const", -1.0, "float32")))
    assert maps_zero_to_zero(("Sin", "float32", ("Add", "float32", ("in", 0), ("in", 1))))
    assert not maps_zero_to_zero(("Exp2", "float32", ("in", 0)))
    assert not maps_zero_to_zero(("Recip", "float32", ("in", 0)))
    assert not maps_zero_to_zero(("Add", "float32", ("in", 0), ("const", 1.0, "float32")))

    def rope(q, cos, sin):
        x = q.astype(lnp.float32)
        x1, x2 = x[:, :8], x[:, 8:]
        return x * cos + lnp.concatenate([-x2, x1], axis=-1) * sin

    def rope_ref(q, cos, sin):
        x = q.astype(np.float64)
        return x * cos + np.concatenate([-x[:, 8:], x[:, :8]], axis=-1) * sin

    q = _r(3, 16).astype(np.float16)
    cos, sin = _r(3, 16), _r(3, 16)
    traced = lf.jit(rope).trace(q, cos, sin)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    llir = ex.extract(ex.generic_genome())
    assert _kernels(llir) == ["fused"], [n.attrs.get("expr") for n in llir.live_nodes() if n.op == "CustomOp"]
    be = get_backend("numpy")
    rng = random.Random(4)
    for genome in [ex.generic_genome()] + [tuple(rng.randrange(g.n_options) for g in ex.genes)
                                           for _ in range(20)]:
        (out,) = be.compile(ex.extract(genome)).run([q, cos, sin], {})
        np.testing.assert_allclose(out, rope_ref(q, cos, sin), rtol=1e-5, atol=1e-5)

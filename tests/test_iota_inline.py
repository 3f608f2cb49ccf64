"""Iota computed inside the fused trees that read it (optimize/extract.py ``_iota_value``).

A read of an Iota becomes ("iota", expr) in the reading tree, with the flat index z replaced by
the buffer index the read's view gives (a broadcast row of positions reads z % n), so positions
cost no kernel and no load: argmax is two reductions, not an Iota kernel plus two. Reads under a
mask (padding) keep the materialised Iota. Checked against NumPy on every random genome (with a
symbolic dim), on the CUDA CPU emulation, and by the planned kernel count of the greedy pick.
"""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import get_backend
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

R = np.random.default_rng(5)


def _r(*shape):
    return R.standard_normal(shape).astype(np.float32)


def _ties(s):
    x = np.round(_r(s, 7) * 2) / 2  # repeated maxima: the first one must win
    x[0, 3] = np.nan  # the first NaN wins, as in NumPy
    return (x,)


# name: (fn, reference, args(s), dynamic axes)
CASES = {
    "argmax_rows": (lambda x: lnp.argmax(x, axis=-1), lambda x: np.argmax(x, axis=-1), _ties,
                    {"x": {0: "s"}}),
    "argmin_cols": (lambda x: lnp.argmin(x, axis=0), lambda x: np.argmin(x, axis=0), _ties,
                    {"x": {0: "s"}}),
    "positions": (lambda x: x * 0.5 + lnp.arange(x.shape[0]).astype(lnp.float32),
                  lambda x: x * 0.5 + np.arange(x.shape[0]), lambda s: (_r(s),), {"x": {0: "s"}}),
    "broadcast_row": (lambda x: x + lnp.arange(7, dtype=lnp.float32), lambda x: x + np.arange(7),
                      lambda s: (_r(s, 7),), {"x": {0: "s"}}),
    "transposed": (lambda x: x + lnp.arange(x.shape[0], dtype=lnp.float32)[:, None] * 10.0,
                   lambda x: x + np.arange(x.shape[0])[:, None] * 10.0, lambda s: (_r(s, 3),),
                   {"x": {0: "s"}}),
    "padded": (lambda x: x + lnp.pad(lnp.arange(5, dtype=lnp.float32), (1, 1)),
               lambda x: x + np.pad(np.arange(5.0), (1, 1)), lambda s: (_r(s, 7),), {"x": {0: "s"}}),
}


def _extractor(name, s=5):
    fn, _, make, axes = CASES[name]
    traced = lf.jit(fn, dynamic_axes=axes).trace(*make(s))
    return Extractor(build_egraph(traced.hlir), traced.hlir)


def _ops(llir):
    return [n.op for n in llir.live_nodes()]


@pytest.mark.parametrize("name", ["argmax_rows", "argmin_cols", "positions", "broadcast_row", "transposed"])
def test_no_iota_kernel_is_left(name):
    ex = _extractor(name)
    for genome in (None, ex.generic_genome()):
        assert "Iota" not in _ops(ex.extract(genome))


def test_a_masked_read_keeps_the_iota_buffer():
    # inside the padding the read gives 0, which no expression of z says: the Iota stays a kernel
    assert "Iota" in _ops(_extractor("padded").extract())


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_random_genome_computes_the_function(name):
    fn, ref, make, _ = CASES[name]
    ex = _extractor(name)
    be = get_backend("numpy")
    rng = random.Random(3)
    for genome in [ex.generic_genome()] + [tuple(rng.randrange(g.n_options) for g in ex.genes)
                                           for _ in range(12)]:
        prog = be.compile(ex.extract(genome))
        for s in (5, 1, 9):
            args = make(s)
            (out,) = prog.run(list(args), {"s": s})
            want = ref(*args)
            if want.dtype.kind in "iu":
                np.testing.assert_array_equal(out, want, err_msg=f"{name} s={s} genome {genome}")
            else:
                np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6, err_msg=f"{name} s={s}")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CUDA emulation needs it")
def test_the_rendered_kernels_compute_it_on_the_cuda_emulation(tmp_path):
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph

    plans, runs = [], []
    for name in sorted(CASES):
        fn, ref, make, _ = CASES[name]
        bp = plan_graph(_extractor(name).extract(), {"s": 16})
        assert emu.why_not_emulable(bp) is None, name
        plans.append(bp)
        runs.append((name, bp, make, ref))
    lib = emu.build(plans, str(tmp_path))
    for name, bp, make, ref in runs:
        for s in (5, 16):
            args = make(s)
            (got,) = emu.run(lib, bp, list(args), {"s": s})
            want = ref(*args)
            if want.dtype.kind in "iu":
                np.testing.assert_array_equal(got, want, err_msg=f"{name} s={s}")
            else:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"{name} s={s}")


def test_the_greedy_pick_plans_two_kernels_and_writes_its_output_directly():
    # argmax over a vocabulary row: max, then the first hit with the sign flip as its epilogue
    # writing the (1,) output itself (each split among warps whose last one merges the row in
    # the same launch); no Iota kernel, no second stages, no output copy (2 launches, 8 before).
    # That is the traced form, which the search still times; the cheapest genome takes the one
    # argmax_rows kernel (specialize_argmax.egg), also writing the output itself.
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    f = lf.jit(lambda logits: lnp.argmax(logits[-1]).astype(lnp.int32).reshape(1),
               dynamic_axes={"logits": {0: "s"}})
    traced = f.trace(np.zeros((1, 128256), np.float32))
    for kinds, want in ((KERNEL_KINDS - {"argmax_rows"}, ["fused_reduce", "fused_reduce + epilogue"]),
                        (KERNEL_KINDS, ["argmax_rows"])):
        ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=kinds)
        bp = plan_graph(ex.extract(), {"s": 1})
        labels = [s.label for s in bp.steps]
        assert labels == want, labels
        assert bp.bufs[bp.steps[-1].bufs[-1]].kind == "output"
    assert bp.steps[0].source.meta["parts"] == 126  # the row over 126 blocks, merged in the launch
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS - {"argmax_rows"})
    assert all(s.source.meta.get("strategy") == "split" for s in plan_graph(ex.extract(), {"s": 1}).steps)

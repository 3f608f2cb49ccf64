"""Random array programs (tests/program_gen.py) jitted and compared with NumPy in float64.

Each program strings together up to ten of 38 op kinds (elementwise, reductions, views, gathers
and scatters, sorts, matmuls, einsum, integer and boolean math) over one to three inputs, returning
one or two of its values. It runs:
- on the NumPy backend, with static shapes and with input 0's axis 0 a dynamic dim called at
  several lengths (one trace, one compile);
- on the MLX backend (MLX's CPU build here);
- planned for CUDA and run on the g++ emulation of tests/cuda_model_emulation.py, every kernel
  the renderer emits, for the generic genome and random ones (matmuls forced to the rendered
  kernel: cuBLAS and the GEMV kernels are not emulated), in float32 static and with a bucket,
  and in bfloat16;
- every Metal kernel the MLX backend would run, on the CPU emulation of tests/mlx_metal_emulation.py;
- on a real GPU where one is present.
The same cases run int32/bool programs (tests/int_program_gen.py), compared bit for bit with
NumPy's int32. The bugs this found have their own tests at the end (and in test_mlx.py,
test_numpy_shape.py, test_numpy_integer.py). ``LUMINAL_FUZZ_PROGRAMS=N`` runs N programs a case
instead of the default.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import LuminalError

from int_program_gen import IntProgram, assert_exact
from program_gen import Program, assert_matches
from test_cuda_emulated_plans import _genomes  # the generic genome, then n random ones

N = int(os.environ.get("LUMINAL_FUZZ_PROGRAMS", "0"))


def _seeds(default: int, base: int) -> list:
    return list(range(base, base + (N or default)))


def _batches(seeds, size: int) -> list:
    return [tuple(seeds[i:i + size]) for i in range(0, len(seeds), size)]


def _static_check(seed: int, backend: str) -> None:
    prog = Program(seed)
    args = prog.inputs()
    got = lf.jit(lambda *a: prog.run(lnp, a), backend=backend)(*args)
    assert_matches(got, prog.reference(args), f"{prog} on {backend}")


@pytest.mark.parametrize("seed", _seeds(60, 0))
def test_random_program_numpy(seed):
    _static_check(seed, "numpy")


@pytest.mark.parametrize("backend", ["numpy", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("make,check,default,base", [
    (Program, assert_matches, 40, 1000), (IntProgram, assert_exact, 20, 8000)], ids=["float32", "int32"])
def test_random_programs_with_a_dynamic_dim(make, check, default, base, backend):
    """Input 0's axis 0 is the dynamic dim ``s``: the first call traces at s = 1, later lengths
    reuse the trace (on CUDA: one search and one set of kernels for the bucket s <= 8). A
    program whose ops cannot take a symbolic axis there (a ``roll`` along it, broadcasting s
    against a fixed length) must say so with a LuminalError when traced; once traced, every
    length NumPy accepts must run and match."""
    seeds = _seeds(default, base + (300 if backend == "cuda" else 0))
    calls = 0
    for seed in seeds:
        prog = make(seed)
        f = lf.jit(lambda *a: prog.run(lnp, a), dynamic_axes={0: {0: "s"}}, backend=backend)
        traced = False
        for lead in (1, 2, 3, 5, 8):
            args = prog.inputs(lead)
            try:
                want = prog.reference(args)
            except (ValueError, IndexError):
                continue  # this length is not a valid input for the program
            if any(w.size == 0 for w in want):
                continue
            try:
                got = f(*args)
            except LuminalError as e:
                assert not traced, f"{prog}: traced, then failed at s={lead}: {e}"
                assert "jitted function" in str(e) or "dynamic" in str(e) or "symbolic" in str(e), e
                continue
            traced = True
            check(got, want, f"{prog} at s={lead}")
            calls += 1
        assert f.trace_count <= 1 or not traced, f"{prog}: traced {f.trace_count} times"
    assert calls >= len(seeds), f"only {calls} calls ran for {len(seeds)} programs"


def test_random_programs_mlx():
    pytest.importorskip("mlx.core", reason="MLX is not installed (pip install 'luminal-fn[mlx]')")
    for seed in _seeds(20, 2000):
        _static_check(seed, "mlx")


def _int_check(seed: int, backend: str) -> None:
    prog = IntProgram(seed)
    args = prog.inputs()
    got = lf.jit(lambda *a: prog.run(lnp, a), backend=backend)(*args)
    assert_exact(got, prog.reference(args), f"{prog} on {backend}")


@pytest.mark.parametrize("seeds", _batches(_seeds(40, 7000), 10))
def test_random_int_programs_numpy(seeds):
    """int32 and bool programs (tests/int_program_gen.py), bit for bit against NumPy's int32."""
    for seed in seeds:
        _int_check(seed, "numpy")


def test_random_int_programs_mlx():
    pytest.importorskip("mlx.core", reason="MLX is not installed (pip install 'luminal-fn[mlx]')")
    for seed in _seeds(16, 7500):
        _int_check(seed, "mlx")


# ---- planned for CUDA, run on the CPU emulation ------------------------------------------------
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not installed: the CUDA emulation compiles kernels with it")


def _cuda_plans(prog, args, bucket: dict, genomes: int, fn=None):
    """(genome, plan, LLIR) for the generic genome and ``genomes`` random ones of ``prog`` (or of
    ``fn``), each planned for the CUDA backend with matmuls on the rendered kernel."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    axes = {0: {0: "s"}} if bucket else None
    traced = lf.jit(fn or (lambda *a: prog.run(lnp, a)), dynamic_axes=axes).trace(*args)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    out = []
    for g in _genomes(ex, genomes, prog.seed if prog is not None else 0):
        llir = ex.extract(g)
        for n in llir.live_nodes():
            if n.op == "CustomOp" and n.attrs.get("name") == "matmul":
                n.attrs["strategy"] = "rendered"
        bp = plan_graph(llir, bucket, donated=())
        why = emu.why_not_emulable(bp)
        assert why is None, f"{prog or fn} genome {g}: not emulable: {why}"
        out.append((g, bp, llir))
    return out


@needs_gxx
@pytest.mark.parametrize("make,check,default,base,genomes", [
    (Program, assert_matches, 16, 3000, 3), (IntProgram, assert_exact, 12, 7800, 2)],
    ids=["float32", "int32"])
def test_random_programs_on_the_cuda_emulation(tmp_path, make, check, default, base, genomes):
    import cuda_model_emulation as emu

    jobs = []
    for seed in _seeds(default, base):
        prog = make(seed)
        args = prog.inputs()
        jobs += [(prog, g, bp, args) for g, bp, _ in _cuda_plans(prog, args, {}, genomes=genomes)]
    lib = emu.build([bp for _, _, bp, _ in jobs], str(tmp_path))
    for prog, g, bp, args in jobs:
        check(emu.run(lib, bp, args, {}), prog.reference(args),
              f"{prog} genome {g}, emulated CUDA\n{bp.describe()}")


@needs_gxx
def test_random_bfloat16_programs_on_the_cuda_emulation(tmp_path):
    """bfloat16 inputs: the kernels' half loads, float32 math and rounded stores. The reference
    is the NumPy backend on the same LLIR (it rounds at the same stores), since a float64 run
    cannot tell a rounding placed elsewhere from a bug at bfloat16's precision."""
    import ml_dtypes

    import cuda_model_emulation as emu
    from luminal_fn.backends import get_backend

    numpy_backend = get_backend("numpy")
    jobs = []
    for seed in _seeds(12, 3500):
        prog = Program(seed)
        args = prog.inputs(dtype=ml_dtypes.bfloat16)
        jobs += [(prog, g, bp, llir, args) for g, bp, llir in _cuda_plans(prog, args, {}, genomes=3)]
    lib = emu.build([j[2] for j in jobs], str(tmp_path))
    for prog, g, bp, llir, args in jobs:
        want = numpy_backend.compile(llir).run([np.array(x) for x in args], {})
        got = emu.run(lib, bp, args, {})
        for k, (o, w) in enumerate(zip(got, want)):
            w = np.asarray(w).astype(np.float64)
            np.testing.assert_allclose(np.asarray(o).astype(np.float64), w, rtol=1e-2,
                                       atol=1e-2 * max(1.0, float(np.max(np.abs(w)))),
                                       err_msg=f"{prog} genome {g}, output {k}, emulated CUDA")


@needs_gxx
@pytest.mark.parametrize("make,check,default,base", [
    (Program, assert_matches, 16, 4000), (IntProgram, assert_exact, 10, 8500)], ids=["float32", "int32"])
def test_random_programs_with_a_dynamic_dim_on_the_cuda_emulation(tmp_path, make, check, default, base):
    """One plan per program for the bucket s <= 8, run at several s below its largest."""
    import cuda_model_emulation as emu

    jobs = []
    for seed in _seeds(default, base):
        prog = make(seed)
        try:
            plans = _cuda_plans(prog, prog.inputs(5), {"s": 8}, genomes=2)
        except LuminalError:
            continue  # not traceable with a symbolic s (the NumPy test checks the error)
        for lead in (1, 3, 8):
            args = prog.inputs(lead)
            try:
                want = prog.reference(args)
            except (ValueError, IndexError):
                continue
            if all(w.size for w in want):
                jobs += [(prog, g, bp, args, lead, want) for g, bp, _ in plans]
    assert len(jobs) >= default, f"only {len(jobs)} emulated calls"
    lib = emu.build(list({id(j[2]): j[2] for j in jobs}.values()), str(tmp_path))
    for prog, g, bp, args, lead, want in jobs:
        check(emu.run(lib, bp, args, {"s": lead}), want,
              f"{prog} genome {g} at s={lead}, emulated CUDA\n{bp.describe()}")


@needs_gxx
def test_random_programs_metal_kernels_on_the_cpu_emulation(tmp_path):
    """Every Metal kernel the MLX backend would run for random programs (generic and random
    genomes; static, and with a dynamic dim at two lengths), run by tests/mlx_metal_emulation.py
    on the NumPy values of its node's inputs and compared with the node's NumPy value."""
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor
    from mlx_metal_emulation import emulate

    cases = {}
    for seed in _seeds(8, 6000):
        prog = Program(seed)
        for dynamic in (False, True):
            axes = {0: {0: "s"}} if dynamic else None
            try:
                traced = lf.jit(lambda *a: prog.run(lnp, a), dynamic_axes=axes).trace(*prog.inputs(5))
            except LuminalError:
                continue
            ex = Extractor(build_egraph(traced.hlir), traced.hlir)
            for g in _genomes(ex, 1, seed):
                llir = ex.extract(g)
                for lead in ((2, 5) if dynamic else (5,)):
                    args = prog.inputs(lead)
                    try:
                        prog.reference(args)
                    except (ValueError, IndexError):
                        continue
                    dims = {"s": lead} if dynamic else {}
                    cases[f"{prog} genome {g} dims {dims}"] = lambda c=(llir, args, dims): c
    results = emulate(cases, str(tmp_path))
    assert len(results) >= 100, len(results)
    for case, nid, kind, out, ref in results:
        ref = np.asarray(ref, np.float64)
        finite = np.abs(ref[np.isfinite(ref)])  # (an Inf in the reference must not make atol Inf)
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=1e-4, atol=1e-4 * scale,
                                   equal_nan=True, err_msg=f"{case}: %{nid} ({kind})")


@pytest.mark.gpu
@pytest.mark.parametrize("seeds", _batches(_seeds(40, 5000), 10))
def test_random_programs_cuda_gpu(seeds):
    for seed in seeds:
        _static_check(seed, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("seeds", _batches(_seeds(20, 7200), 10))
def test_random_int_programs_cuda_gpu(seeds):
    for seed in seeds:
        _int_check(seed, "cuda")


# ---- what the fuzz found -------------------------------------------------------------------------
def test_egglog_global_names_never_read_as_another_node():
    """egglog names a flattened term's temporaries after the globals it reads plus a count, so
    with globals named ``$n9`` and ``$n91`` a term reading both was built with ``$n9``'s value
    for ``$n91`` (egglog 13.2): this triu of a sorted row then read its mask negated and
    returned zeros. Node names now end in a non-digit (optimize/encode.py ``global_name``)."""
    from luminal_fn.optimize.encode import encode, global_name

    r = np.random.default_rng(134)
    a = r.standard_normal((3, 3, 3)).astype(np.float32)
    x = r.standard_normal((2, 4)).astype(np.float32)
    b = r.standard_normal((2, 3, 4)).astype(np.float32)

    def f(a, x, b):  # a and b only shift the node numbers to where the names collided
        s = lnp.sort(x, axis=1)
        return lnp.cumsum(x, axis=0), lnp.triu(s, -1)

    want = (np.cumsum(x, axis=0), np.triu(np.sort(x, axis=1), -1))
    for limit in (1, 6):
        got = lf.jit(f, search=limit)(a, x, b)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6)
    cmds = encode(lf.jit(f).trace(a, x, b).hlir).commands
    lets = [c.split()[1] for c in cmds if c.startswith("(let ")]
    assert lets and all(not n[-1].isdigit() for n in lets), lets[:5]
    assert global_name(9) + "1" != global_name(91)


def test_a_long_chain_of_ops_compiles():
    """Extraction and the renderers recurse a few frames a node: 120 dependent where-steps
    (about 1,200 HLIR nodes) overflowed Python's default recursion limit in every candidate."""
    import sys

    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)

    def chain(xp):
        def f(x):
            for k in range(120):
                x = xp.where(x > 0.5, x - 0.25, x + 0.125 * (k % 3))
            return x
        return f

    limit = sys.getrecursionlimit()
    got = lf.jit(chain(lnp), search=3)(x)
    np.testing.assert_allclose(np.asarray(got), chain(np)(x.astype(np.float64)), rtol=1e-6, atol=1e-6)
    assert sys.getrecursionlimit() == limit  # raised only while compiling


@needs_gxx
def test_a_dynamic_roll_on_the_cuda_emulation(tmp_path):
    """A roll along a dynamic axis splits it at (shift mod s), a dims expression with a negative
    numerator for a negative shift. C's % truncates where Python's floors: the kernels read the
    wrong rows at most lengths until the C renderer emitted the floored forms (ir/expr.py)."""
    import cuda_model_emulation as emu

    def f(x):
        return lnp.roll(x, -4, axis=0) * 2.0, lnp.roll(x, 3, axis=0) - lnp.roll(x, -1, axis=0)

    r = np.random.default_rng(6026)
    plans = _cuda_plans(None, [r.standard_normal((5, 3)).astype(np.float32)], {"s": 8}, 2, fn=f)
    lib = emu.build([bp for _, bp, _ in plans], str(tmp_path))
    for s in (1, 2, 3, 5, 8):
        x = r.standard_normal((s, 3)).astype(np.float32)
        want = (np.roll(x, -4, 0) * 2.0, np.roll(x, 3, 0) - np.roll(x, -1, 0))
        for g, bp, _ in plans:
            got = emu.run(lib, bp, [x], {"s": s})
            for k, (o, w) in enumerate(zip(got, want)):
                np.testing.assert_allclose(o, w, rtol=1e-6, atol=1e-6, err_msg=f"genome {g} s={s} output {k}")



@needs_gxx
def test_scans_along_a_dynamic_axis_on_the_cuda_emulation(tmp_path):
    """prod, cumprod and cummax along a dynamic axis, planned for CUDA once for s <= 8 and run at
    several s. prod's first form counted the axis's lanes in a reduction of an iota alone, which
    no fused kernel can take its shape from: the extraction failed (int fuzz seed 8549)."""
    import cuda_model_emulation as emu

    def f(x):
        return lnp.prod(x, axis=0), lnp.cumprod(x, axis=0), lnp.cummax(x, axis=0)

    r = np.random.default_rng(8549)
    plans = _cuda_plans(None, [r.standard_normal((5, 3)).astype(np.float32)], {"s": 8}, 1, fn=f)
    lib = emu.build([bp for _, bp, _ in plans], str(tmp_path))
    for s in (1, 2, 3, 5, 8):
        x = (r.standard_normal((s, 3)) * 0.5 + 1).astype(np.float32)
        want = (np.prod(x, 0), np.cumprod(x, 0), np.maximum.accumulate(x, 0))
        for g, bp, _ in plans:
            got = emu.run(lib, bp, [x], {"s": s})
            for k, (o, w) in enumerate(zip(got, want)):
                np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-6, err_msg=f"genome {g} s={s} output {k}")

def test_a_value_reused_at_every_level_keeps_each_kernel_small():
    """a = a * a / 2 + 1 / 2 forty times: each level reads the one below twice. The extractor
    shares that subtree in one fused kernel, but every backend walks a kernel's tree as a tree,
    so it doubled a level (x = x * x: 16 levels took 17 s on the NumPy backend and 2.6 MB of
    CUDA). Past MAX_EXPANDED nodes, counted so, a subtree read again reads its buffer; below it,
    the CUDA renderer, the NumPy kernel sharing and MLX's closures each handle a subtree once."""
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor
    from luminal_fn.optimize.fused_tree import MAX_EXPANDED

    def f(xp):
        def g(a):
            for _ in range(40):
                a = a * a * 0.5 + 0.5  # creeps up to 1 from below
            return a
        return g

    def expanded(t, seen):  # nodes of the tree as walked, counted once per distinct subtree object
        if id(t) not in seen:
            seen[id(t)] = 1 + sum(expanded(c, seen) for c in t[2:] if isinstance(c, tuple)) \
                if t[0] not in ("in", "const") else 1
        return seen[id(t)]

    x = np.array([0.3, -0.9, 0.99, 0.0, -1e-3], np.float32)
    want = f(np)(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(lf.jit(f(lnp), search=1)(x)), want, rtol=1e-5)
    if importlib.util.find_spec("mlx") is not None:  # (its closures evaluate each subtree once)
        np.testing.assert_allclose(np.asarray(lf.jit(f(lnp), backend="mlx", search=1)(x)), want, rtol=1e-5)
    traced = lf.jit(f(lnp)).trace(x)
    ex = Extractor(build_egraph(traced.hlir), traced.hlir)
    for genome in _genomes(ex, 3, 0):
        llir = ex.extract(genome)
        sizes = [expanded(n.attrs["expr"], {}) for n in llir.live_nodes() if "expr" in n.attrs]
        assert sizes and max(sizes) <= 2 * MAX_EXPANDED, sizes
        bp = plan_graph(llir, {}, donated=())
        assert sum(len(k.text) for k in bp.kernels()) < 400_000

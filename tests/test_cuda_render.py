"""CUDA backend pieces that need no GPU: registration without CuPy, bucket planning, and the
rendered module sources (well-formed, compiled by nvcc to PTX where nvcc is installed)."""
import importlib.util
import shutil

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends import available_backends
from luminal_fn.backends.cuda.executable import launch_shape, plan_graph
from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

import cuda_cases as C
import test_numpy_equivalence as EQ

HAS_CUPY = importlib.util.find_spec("cupy") is not None


def _bucket(dims):
    return {k: 1 << max(0, (v - 1).bit_length()) for k, v in dims.items()}


def test_cuda_is_registered_and_lazy():
    assert "cuda" in available_backends()
    if HAS_CUPY:
        pytest.skip("CuPy is installed here: the missing-CuPy error cannot be observed")
    from luminal_fn.backends import BackendUnavailable

    with pytest.raises(BackendUnavailable, match=r'pip install "luminal-fn\[cuda\]"'):
        lf.jit(lambda x: x + 1, backend="cuda")(np.ones(3, np.float32))


def _plans():
    for name, mk in sorted(C.CASES.items()):
        g, _, dims = mk()
        yield name, plan_graph(g, _bucket(dims))


def test_plans_bind_every_kernel_argument():
    for name, bp in _plans():
        for step in bp.steps:
            if hasattr(step, "source"):
                src = step.source
                assert len(step.bufs) == len(src.buffers), name
                assert src.name in src.text
                assert src.text.count("{") == src.text.count("}"), name
                grid, block = launch_shape(src, bp.dims_max, 132)
                assert all(x >= 1 for x in grid) and 32 <= block[0] <= 1024, name
        # arena intervals never overlap while both buffers are alive
        live = [b for b in bp.bufs if b.kind in ("arena", "scratch") and b.first >= 0]
        for a in live:
            for b in live:
                if a.id < b.id and not (a.last < b.first or b.last < a.first):
                    assert a.offset + a.nbytes_max <= b.offset or b.offset + b.nbytes_max <= a.offset, name
                    assert a.offset + a.nbytes_max <= bp.arena_bytes


def test_matmul_lowering_choices():
    kinds = {name: [s.label for s in bp.steps] for name, bp in _plans()}
    assert kinds["gemv_kn_bf16"] == ["matmul (gemv kn)", "matmul (gemv partials)"]
    assert kinds["gemv_nk_bf16"] == ["matmul (gemv nk)"]
    assert kinds["matmul_f32"] == ["matmul (cuBLAS)", "output copy"]  # graph-capturable
    assert kinds["matmul_bf16"] == ["matmul (cuBLAS)", "output copy"]  # cuBLAS called directly
    assert kinds["matmul_i32"] == ["matmul"]  # rendered


def test_symbolic_kernels_read_dims_from_the_table():
    g, _, _ = C.symbolic_chain()
    a = plan_graph(g, {"s": 8})
    for k in a.kernels():
        assert k.dims == ["s"] and "(int)P[dd0]" in k.text
    # the sources do not depend on the dims of a call inside the bucket
    b = plan_graph(g, {"s": 8})
    assert [k.text for k in a.kernels()] == [k.text for k in b.kernels()]


def _traced_graphs():
    """The traced graphs of the equivalence cases that test_cuda.py runs on the GPU."""
    for name in EQ.UNARY + EQ.POSITIVE:
        yield (lambda name: lambda x: getattr(lnp, name)(x))(name), (EQ.f32(3, 4, lo=1.1, hi=4.0),)
    for name in EQ.BINARY:
        yield (lambda name: lambda a, b: getattr(lnp, name)(a, b))(name), (EQ.f32(3, 1), EQ.f32(2, 1, 4))
    for name in ["sum", "mean", "max", "min", "prod", "var", "argmax", "any", "cumsum", "logsumexp"]:
        for axis in (None, 0, -1):
            x = EQ.f32(3, 5) > 0 if name == "any" else EQ.f32(3, 5)
            yield (lambda name, axis: lambda x: getattr(lnp, name)(x, axis=axis))(name, axis), (x,)
    for fn, shape in EQ.SHAPE_CASES:
        yield fn, (EQ.f32(*shape),)
    for a, b in [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((5,), (5,)), ((1, 1), (1, 1))]:
        yield (lambda a, b: a @ b), (EQ.f32(*a), EQ.f32(*b))
    yield (lambda: lnp.eye(3, 4, k=1) + lnp.arange(4)), ()


def _traced_kernels():
    kernels = []
    for fn, args in _traced_graphs():
        kernels += plan_graph(lf.jit(fn).trace(*args).hlir, {}).kernels()
    return kernels


def test_every_traced_case_plans():
    """Planning (rendering every kernel) needs no GPU: 0-d results, size-1 dims, masks, gathers."""
    assert len(_traced_kernels()) > 300


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
def test_rendered_modules_compile_with_nvcc():
    kernels = []
    for _, bp in _plans():
        kernels += bp.kernels()
    kernels += _traced_kernels()
    text = module_source(kernels)
    assert "lf_gemv_kn" in text  # hand sources ride along when a hand kernel is used
    nvcc_check(text)


def test_batched_single_row_matmul_stays_in_the_graph():
    """A decode step's attention (one query row per head) is rendered, not cuBLAS: a host step
    would keep the whole step from replaying as one CUDA graph."""
    traced = lf.jit(lambda q, k: q @ lnp.swapaxes(k, -1, -2)).trace(
        np.ones((32, 1, 64), np.float32), np.ones((8 * 4, 40, 64), np.float32))
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    llir = Extractor(build_egraph(traced.hlir), traced.hlir).extract()
    labels = [s.label for s in plan_graph(llir, {}).steps]
    assert labels and all("cuBLAS" not in lab for lab in labels), labels
    # the same with a symbolic query length: rendered in the decode bucket (s = 1), cuBLAS above
    jf = lf.jit(lambda q, k: q @ lnp.swapaxes(k, -1, -2), dynamic_axes={"q": {1: "s"}})
    traced = jf.trace(np.ones((32, 3, 64), np.float32), np.ones((32, 40, 64), np.float32))
    llir = Extractor(build_egraph(traced.hlir), traced.hlir).extract()
    decode = [s.label for s in plan_graph(llir, {"s": 1}).steps]
    prefill = [s.label for s in plan_graph(llir, {"s": 64}).steps]
    assert all("cuBLAS" not in lab for lab in decode), decode
    assert any("cuBLAS" in lab for lab in prefill), prefill


def test_symbolic_single_row_weight_product_plans_gemv():
    """A decode step's weight products (x of shape (1, s, K) with s = 1 in the decode bucket)
    take the GEMV kernel, guarded so that s = 0 writes nothing; a larger bucket does not."""
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    for dtype in (np.float32, np.float16):
        jf = lf.jit(lambda x, w: x @ w.T, dynamic_axes={"x": {1: "s"}})
        traced = jf.trace(np.ones((1, 3, 256), dtype), np.ones((512, 256), dtype))
        llir = Extractor(build_egraph(traced.hlir), traced.hlir).extract()
        decode = plan_graph(llir, {"s": 1})
        gemv = [s for s in decode.steps if "gemv" in s.label]
        assert len(gemv) == 1, [s.label for s in decode.steps]
        assert "if ((d_s) == 0) { lf_pdl_wait(); return; }" in gemv[0].source.text
        prefill = plan_graph(llir, {"s": 64})
        assert not any("gemv" in s.label for s in prefill.steps), [s.label for s in prefill.steps]


def test_a_cublas_product_that_is_an_output_writes_the_arena_and_is_copied_out():
    """Host steps bake their pointers into a captured CUDA graph and an output buffer is new every
    call, so a cuBLAS product never writes an output directly."""
    g, _, _ = C.matmul_case(64, 96, 80)
    bp = plan_graph(g, {})
    host = [s for s in bp.steps if not hasattr(s, "source")]
    assert len(host) == 1 and "cuBLAS" in host[0].label
    assert all(bp.bufs[b].kind != "output" for b in host[0].bufs)
    assert bp.steps[-1].label == "output copy"
    assert bp.bufs[bp.outputs[0]].kind == "output"
    # a GEMV (a kernel in the graph) still writes the output directly
    g, _, _ = C.matmul_case(1, 256, 512)
    bp = plan_graph(g, {})
    labels = [s.label for s in bp.steps]
    assert "matmul (gemv kn)" in labels and "output copy" not in labels, labels


def _cache_update_llir():
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    def step(cache, idx, rows):
        new = lf.nn.scatter_rows(cache, idx, rows)
        return new, lnp.sum(lf.nn.gather_rows(new, idx), axis=0)

    traced = lf.jit(step, donate_argnums=0).trace(
        np.zeros((16, 8), np.float32), np.array([3, 5], np.int32), np.ones((2, 8), np.float32))
    return Extractor(build_egraph(traced.hlir), traced.hlir).extract()


def test_a_donated_cache_is_updated_in_place(monkeypatch):
    """Scatter into a donated input that nothing else reads: no copy of the destination, the
    output is the input's own buffer; without donation the copy stays."""
    monkeypatch.setenv("LUMINAL_CUDA_MERGE_INDEPENDENT", "0")  # one label a step
    llir = _cache_update_llir()
    plain = plan_graph(llir, {})
    assert "Scatter" in [s.label for s in plain.steps]
    assert plain.bufs[plain.outputs[0]].kind == "output"
    donated = plan_graph(llir, {}, donated=(0,))
    labels = [s.label for s in donated.steps]
    assert "Scatter (in place)" in labels and "Scatter" not in labels, labels
    out = donated.bufs[donated.outputs[0]]
    assert out.kind == "input" and out.index == 0
    assert len(donated.steps) == len(plain.steps) - 1  # the destination copy is gone


def test_block_timing_is_compiled_in_only_when_asked(monkeypatch):
    """LUMINAL_CUDA_TRACE (benchmarks/kernel_trace.py) defines LF_TRACE ahead of the prelude; every
    kernel carries the entry and end marks with its own digest either way, and they expand to
    nothing without it."""
    from luminal_fn.backends.cuda.source import TRACE_SWITCH

    kernels = [k for _, bp in _plans() for k in bp.kernels()]
    for k in kernels:
        assert "LF_TRACE_IN();" in k.text and f"LF_TRACE_OUT(0x{k.name.rsplit('_', 1)[1]}ull);" in k.text, k.name
    monkeypatch.delenv(TRACE_SWITCH, raising=False)
    assert "#define LF_TRACE " not in module_source(kernels)
    monkeypatch.setenv(TRACE_SWITCH, "4096")
    text = module_source(kernels)
    assert text.startswith("#define LF_TRACE 4096\n") and "lf_trace_rec[LF_TRACE][4]" in text
    if nvcc_available():
        nvcc_check(text)
    monkeypatch.setenv(TRACE_SWITCH, "all")
    with pytest.raises(ValueError, match="LUMINAL_CUDA_TRACE='all'"):
        module_source(kernels)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: this test compiles the prelude's helpers")
def test_the_preludes_int_max_and_min_are_numpys_over_the_whole_range(tmp_path):
    """The CUDA prelude's int lf_max and lf_min compare with the sign bit flipped, as unsigned
    (ptxas 12.9 and 13.0 drop a negation from a signed three-way max on sm_90). Their own text,
    compiled by g++, against NumPy over pairs of the int32 range's edges."""
    import ctypes
    import re
    import subprocess

    from luminal_fn.backends.render import CUDA

    lines = [ln for ln in CUDA.prelude.splitlines()
             if re.match(r"__device__ __forceinline__ (int|unsigned) lf_(max|min|ubias)\(int a", ln)]
    assert len(lines) == 3, lines
    text = "\n".join(ln.replace("__device__ __forceinline__ ", "static inline ") for ln in lines)
    text += ('\nextern "C" void both(const int* a, const int* b, int* mx, int* mn, int n) {'
             "\n  for (int i = 0; i < n; ++i) { mx[i] = lf_max(a[i], b[i]); mn[i] = lf_min(a[i], b[i]); } }\n")
    (tmp_path / "mm.cpp").write_text(text)
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-o", str(tmp_path / "mm.so"), str(tmp_path / "mm.cpp")],
                   check=True)
    edges = np.array([-2**31, -2**31 + 1, -2, -1, 0, 1, 2, 2**31 - 2, 2**31 - 1], np.int32)
    a, b = (np.ascontiguousarray(g.ravel()) for g in np.meshgrid(edges, edges))
    mx, mn = np.empty_like(a), np.empty_like(a)
    ptr = ctypes.POINTER(ctypes.c_int)
    ctypes.CDLL(str(tmp_path / "mm.so")).both(*(x.ctypes.data_as(ptr) for x in (a, b, mx, mn)), ctypes.c_int(a.size))
    np.testing.assert_array_equal(mx, np.maximum(a, b))
    np.testing.assert_array_equal(mn, np.minimum(a, b))

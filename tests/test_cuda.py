"""The CUDA backend against the NumPy backend (the reference), on the GPU.

Every test here is marked ``gpu``: conftest skips them, with the reason printed, where CuPy sees
no GPU. Cases: LLIR graphs built directly (fused, fused_reduce, matmul through GEMV, cuBLAS and
the rendered fallback, primitives, symbolic dims) and the traced cases of
test_numpy_equivalence.py run with backend="cuda".
"""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.ir import dtypes as dt

import cuda_cases as C
import test_numpy_equivalence as EQ

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    from luminal_fn.backends import get_backend

    return get_backend("cuda")


def _numpy_ref(g, ins, dims):
    from luminal_fn.backends.numpy import NumpyBackend

    return NumpyBackend().compile(g).run([np.asarray(x) for x in ins], dims)


def _assert_close(got, want, d):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f" or d in (dt.bfloat16,):
        rtol, atol = C.TOLERANCE[d.name]
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def _run_case(cuda, g, ins, dims, **options):
    exe = cuda.compile(g, options or None)
    outs = exe.run([cuda.from_numpy(x) for x in ins], dims)
    return exe, [cuda.to_numpy(o) for o in outs]


@pytest.mark.parametrize("name", sorted(C.CASES))
def test_llir_case_matches_numpy(cuda, name):
    g, ins, dims = C.CASES[name]()
    want = _numpy_ref(g, ins, dims)
    exe, got = _run_case(cuda, g, ins, dims)
    for o, w, nid in zip(got, want, g.outputs):
        _assert_close(o, w, g.nodes[nid].dtype)
    # second call: replayed from the captured CUDA graph (or the same launches), same values
    got2 = [cuda.to_numpy(o) for o in exe.run([cuda.from_numpy(x) for x in ins], dims)]
    for a, b in zip(got, got2):
        np.testing.assert_array_equal(a, b)


def test_symbolic_dims_one_plan_per_bucket(cuda):
    g, _, _ = C.symbolic_chain(3)
    exe = cuda.compile(g)
    for s in (5, 7, 8, 6, 3, 4):  # 5..8 share the bucket of max 8; 3..4 the bucket of max 4
        _, ins, dims = C.symbolic_chain(s)
        outs = [cuda.to_numpy(o) for o in exe.run([cuda.from_numpy(x) for x in ins], dims)]
        for o, w in zip(outs, _numpy_ref(g, ins, dims)):
            _assert_close(o, w, dt.float32)
    assert len(exe._buckets) == 2
    b8 = exe._buckets[(("s", 8),)]
    assert all("d_s" in k.text for k in b8.plan.kernels())  # s read from the table, not baked in


def test_declared_buckets_and_graph_replay(cuda):
    g, _, _ = C.symbolic_chain(2)
    exe = cuda.compile(g, {"buckets": {"s": [(1, 1), (2, 64)]}})
    for s in (2, 40, 64, 17):
        _, ins, dims = C.symbolic_chain(s)
        outs = [cuda.to_numpy(o) for o in exe.run([cuda.from_numpy(x) for x in ins], dims)]
        for o, w in zip(outs, _numpy_ref(g, ins, dims)):
            _assert_close(o, w, dt.float32)
    (bucket,) = exe._buckets.values()
    if exe.use_graphs:
        assert exe.capture_error is None
        assert list(bucket.graphs) == [()]  # one CUDA graph, captured once, served every s of the bucket
    with pytest.raises(ValueError, match="outside every bucket"):
        exe.run([np.zeros((65, 64), np.float32), np.zeros(64, np.float32)], {"s": 65})


def test_numpy_inputs_are_moved_and_int64_narrowed(cuda):
    g, ins, dims = C.CASES["primitives_mix"]()
    exe = cuda.compile(g)
    host = [ins[0].astype(np.float64), ins[1], ins[2].astype(np.int64)]
    outs = exe.run(host, dims)
    for o, w, nid in zip(outs, _numpy_ref(g, ins, dims), g.outputs):
        _assert_close(cuda.to_numpy(o), w, g.nodes[nid].dtype)


@pytest.mark.parametrize("d", [dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.bool_])
def test_roundtrip_dtypes(cuda, d):
    x = C.rand((3, 5), d)
    buf = cuda.from_numpy(x)
    assert cuda.is_buffer(buf)
    assert cuda.buffer_shape_dtype(buf) == ((3, 5), d)
    back = cuda.to_numpy(buf)
    assert back.dtype == x.dtype
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))


def test_profile_events_and_nan_check(cuda):
    g, ins, dims = C.CASES["fused_f32_vec"]()
    exe = cuda.compile(g)
    t = exe.profile([cuda.from_numpy(x) for x in ins], dims, trials=3, timeout_s=5.0)
    assert 0 < t < 1.0
    bad = [np.full_like(ins[0], np.nan), ins[1]]
    with pytest.raises(FloatingPointError, match="NaN or Inf"):
        exe.profile(bad, dims, trials=1, timeout_s=5.0, check_finite=True)
    assert exe.profile(bad, dims, trials=1, timeout_s=5.0) > 0  # the search checks values itself


def test_results_stay_correct_without_sync_between_calls(cuda):
    g, ins, dims = C.CASES["reduce_sum_rows"]()
    exe = cuda.compile(g)
    bufs = [cuda.from_numpy(x) for x in ins]
    outs = [exe.run(bufs, dims)[0] for _ in range(20)]  # 20 calls queued, P table rewritten each
    want = _numpy_ref(g, ins, dims)[0]
    for o in outs:
        _assert_close(cuda.to_numpy(o), want, dt.float32)


def test_large_host_inputs_are_sent_asynchronously_and_keep_their_values(cuda):
    """Host arrays over the small-copy ring's slots (a long prompt's mask) go through pinned
    buffers per size, reused after their copy: each call's values arrive, also when the host array
    is changed at once and when more uploads of a size are in flight than it keeps buffers."""
    from luminal_fn.backends.cuda import staging

    host = np.zeros((1000, 1000), np.float32)  # 4 MB, over STAGE_BYTES
    sent = []
    for k in range(3 * staging.LARGE_PER_SIZE):
        host[...] = k
        sent.append(cuda.from_numpy(host))
        host[...] = -1.0  # changed right after: the upload already holds its own copy
    for k, d in enumerate(sent):
        np.testing.assert_array_equal(cuda.to_numpy(d), np.full((1000, 1000), k, np.float32))
    g, ins, dims = C.CASES["reduce_sum_rows"]()  # a graph's 192 KB NumPy input takes the same path
    assert ins[0].nbytes > staging.STAGE_BYTES
    _assert_close(cuda.to_numpy(cuda.compile(g).run(ins, dims)[0]), _numpy_ref(g, ins, dims)[0], dt.float32)


# ---- the traced equivalence cases: the traced HLIR (primitives) run by both backends ------------
def _check_jit(fn, *args, rtol=1e-5, atol=1e-6):
    """The traced graph of ``fn`` run by the CUDA and the NumPy backend (HLIR primitives, no
    optimizer in between, so these cases test the backend whatever the rules do)."""
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.numpy import NumpyBackend

    g = lf.jit(fn).trace(*args).hlir
    ins = [dt.narrow_array(np.asarray(a)) for a in args]
    got = [np.asarray(o.get() if hasattr(o, "get") else o) for o in get_backend("cuda").compile(g).run(ins, {})]
    want = NumpyBackend().compile(g).run(ins, {})
    for a, b, nid in zip(got, want, g.outputs):
        b = np.asarray(b)
        assert a.shape == b.shape
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", EQ.UNARY + EQ.POSITIVE)
def test_jit_unary(name):
    lo, hi = (1.1, 4.0) if name in EQ.POSITIVE else (-2.0, 2.0)
    x = EQ.f32(3, 4, lo=lo, hi=hi)
    _check_jit(lambda x: getattr(lnp, name)(x), x, rtol=2e-5, atol=5e-6)


@pytest.mark.parametrize("name", EQ.BINARY)
def test_jit_binary_broadcast(name):
    a, b = EQ.f32(3, 1), EQ.f32(2, 1, 4, lo=0.5, hi=3.0)
    _check_jit(lambda a, b: getattr(lnp, name)(a, b), a, b, rtol=2e-5, atol=5e-6)


@pytest.mark.parametrize("name", ["add", "multiply", "mod", "floor_divide", "maximum"])
def test_jit_binary_int(name):
    a = EQ.R.integers(-20, 20, (4, 5)).astype(np.int32)
    b = EQ.R.integers(1, 7, (4, 5)).astype(np.int32)
    _check_jit(lambda a, b: getattr(lnp, name)(a, b), a, b)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "argmax", "any",
                                  "cumsum", "logsumexp"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_jit_reductions(name, axis):
    x = EQ.f32(3, 5, lo=0.5, hi=1.5)
    if name == "any":
        x = x > 1.0
    _check_jit(lambda x: getattr(lnp, name)(x, axis=axis), x, rtol=2e-5)


@pytest.mark.parametrize("k", range(len(EQ.SHAPE_CASES)))
def test_jit_shape_and_index(k):
    fn, shape = EQ.SHAPE_CASES[k]
    _check_jit(fn, EQ.f32(*shape))


@pytest.mark.parametrize("ashape,bshape", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((5,), (5,))])
def test_jit_matmul(ashape, bshape):
    _check_jit(lambda a, b: a @ b, EQ.f32(*ashape), EQ.f32(*bshape), rtol=2e-5, atol=2e-5)


def test_jit_at_updates_and_creation():
    x = EQ.f32(5, 3)
    idx = np.array([0, 2, 0], np.int32)
    _check_jit(lambda x: x.at[idx].add(1.0), x)
    _check_jit(lambda: lnp.eye(3, 4, k=1) + lnp.arange(4))


def test_modules_cached_in_memory_and_on_disk(cuda):
    import os

    import cupy

    from luminal_fn.backends.cuda.device import get_module
    from luminal_fn.backends.cuda.source import module_source
    from luminal_fn.backends.cuda.executable import plan_graph

    g, _, _ = C.fused_chain(dt.float32, (3, 1 + int.from_bytes(os.urandom(2), "little")))
    text = module_source(plan_graph(g, {}).kernels())  # a source no earlier run compiled
    get_dir = getattr(cupy.cuda.compiler, "get_cache_dir", None)
    cache = get_dir() if get_dir else os.environ.get(
        "CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
    before = sum(len(f) for _, _, f in os.walk(cache)) if os.path.isdir(cache) else 0
    m = get_module(text)
    assert get_module(text) is m
    after = sum(len(f) for _, _, f in os.walk(cache))
    assert after > before


def test_float32_subnormals_survive_a_kernel(cuda, monkeypatch):
    """Modules are compiled by NVRTC without CuPy's -ftz=true: a subnormal times 2^64 is exact,
    as in NumPy (run DI: flushed to 0 through CuPy's compile). LUMINAL_CUDA_FTZ=1 takes CuPy's
    compile back, and with it the flush."""
    x = np.array([1e-40, -3e-42, 1.4e-45, 1.0, 0.0], np.float32)
    want = x * np.float32(2.0 ** 64)
    got = lf.jit(lambda a: a * 2.0 ** 64, backend="cuda")(x)
    np.testing.assert_array_equal(np.asarray(got), want)
    monkeypatch.setenv("LUMINAL_CUDA_FTZ", "1")
    flushed = np.asarray(lf.jit(lambda a: a * 2.0 ** 64 + 0.0, backend="cuda")(x))
    np.testing.assert_array_equal(flushed, np.where(np.abs(x) < 1.17e-38, 0, want))


def test_jit_end_to_end_dynamic_axis_and_device_arrays(cuda):
    f = lf.jit(lambda x: lnp.exp(x) * 2.0 + lnp.sum(x, axis=-1, keepdims=True),
               backend="cuda", dynamic_axes={"x": {0: "s"}})
    g = lf.jit(lambda x: lnp.exp(x) * 2.0 + lnp.sum(x, axis=-1, keepdims=True), backend="numpy")
    for s in (1, 3, 9):
        x = EQ.f32(s, 16)
        out = f(lf.device_put(x, "cuda"))
        assert out.backend == "cuda"
        np.testing.assert_allclose(np.asarray(out), np.asarray(g(x)), rtol=1e-5, atol=1e-6)


def test_a_plan_with_cublas_is_captured_once_its_pointers_repeat(cuda):
    """cuBLAS steps bake pointers into a captured graph: the first call runs step by step, the
    second with the same arrays captures, a replay sees new values written into the same arrays,
    and other arrays run step by step (correctly) until they too repeat."""
    import cupy as cp

    b = C.B()
    a, w = b.input((64, 96)), b.input((96, 80))
    y = b.custom("matmul", [b.c(a), b.c(w)], (64, 80), dt.float32, m=64, n=80, k=96, strategy="cublas")
    z = b.custom("fused", [b.c(y)], (64, 80), dt.float32,
                 expr=("Mul", "float32", ("in", 0), ("const", 2.0, "float32")))
    b.output(z)
    exe = cuda.compile(b.g)
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((64, 96), np.float32), rng.standard_normal((96, 80), np.float32)
    da, dw = cp.asarray(x0), cp.asarray(w0)

    def check(arrs, want_a, want_w):
        (out,) = exe.run(arrs, {})
        np.testing.assert_allclose(cp.asnumpy(out), 2 * want_a @ want_w, rtol=1e-4, atol=1e-4)

    check([da, dw], x0, w0)
    (bucket,) = exe._buckets.values()
    assert bucket.has_host and not bucket.graphs
    check([da, dw], x0, w0)
    if exe.use_graphs:
        assert exe.capture_error is None and len(bucket.graphs) == 1
    x1 = rng.standard_normal((64, 96), np.float32)
    da[...] = cp.asarray(x1)  # same pointer, new values: the replay must read them
    check([da, dw], x1, w0)
    other = cp.asarray(x0)
    check([other, dw], x0, w0)
    check([da, dw], x1, w0)
    check([other, dw], x0, w0)


def test_a_cublas_graph_is_keyed_by_the_dims_and_pointers_its_calls_read(cuda):
    """The graph's key is the slice of the parameter table the cuBLAS step reads (its rows s,
    its operands' pointers): another dim (c, read only by a kernel) reuses the captured graph,
    another s captures a second one, and every call's results are right."""
    import cupy as cp

    from luminal_fn.ir.expr import var

    s_, c_ = var("s"), var("c")
    b = C.B()
    a, w, v = b.input((s_, 96)), b.input((96, 80)), b.input((c_,))
    y = b.custom("matmul", [b.c(a), b.c(w)], (s_, 80), dt.float32, m=s_, n=80, k=96, strategy="cublas")
    b.output(b.custom("fused", [b.c(y)], (s_, 80), dt.float32,
                      expr=("Mul", "float32", ("in", 0), ("const", 2.0, "float32"))))
    b.output(b.custom("fused", [b.c(v)], (c_,), dt.float32,
                      expr=("Mul", "float32", ("in", 0), ("const", 3.0, "float32"))))
    exe = cuda.compile(b.g, {"buckets": {"s": [(1, 64)], "c": [(1, 64)]}})
    rng = np.random.default_rng(3)
    x0, w0 = rng.standard_normal((16, 96), np.float32), rng.standard_normal((96, 80), np.float32)
    da, dw = cp.asarray(x0), cp.asarray(w0)
    for s, c in ((16, 5), (16, 5), (16, 9), (16, 33), (8, 33), (8, 33), (8, 2), (16, 7)):
        vc = rng.standard_normal(c).astype(np.float32)
        y_out, v_out = exe.run([da[:s], dw, cp.asarray(vc)], {"s": s, "c": c})
        np.testing.assert_allclose(cp.asnumpy(y_out), 2 * x0[:s] @ w0, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(cp.asnumpy(v_out), 3 * vc, rtol=1e-6)
    (bucket,) = exe._buckets.values()
    assert [bucket.symbols[i] for i in bucket.host_key_slots if i < bucket.nsym] == ["s"]
    if exe.use_graphs:
        assert exe.capture_error is None and len(bucket.graphs) == 2  # s = 16 and s = 8


def test_repeated_calls_reuse_the_table_and_graph_only_while_that_is_right(cuda):
    """A call with the same arrays and dims as the last one skips rewriting the parameter table
    (the output pointer repeats once the last result is dropped) or rewrites only the outputs
    (results kept alive): every result stays its own, correct array, new values in the same input
    arrays are read, and a cuBLAS step writing the output itself (its pointer in the graph's
    key) still gives right results."""
    import cupy as cp

    rng = np.random.default_rng(1)
    x0, w0 = rng.standard_normal((32, 48), np.float32), rng.standard_normal((48, 40), np.float32)
    for scale_after in (True, False):  # the product feeds a kernel / the product is the output
        b = C.B()
        a, w = b.input((32, 48)), b.input((48, 40))
        y = b.custom("matmul", [b.c(a), b.c(w)], (32, 40), dt.float32, m=32, n=40, k=48, strategy="cublas")
        if scale_after:
            y = b.custom("fused", [b.c(y)], (32, 40), dt.float32,
                         expr=("Mul", "float32", ("in", 0), ("const", 2.0, "float32")))
        b.output(y)
        exe = cuda.compile(b.g)
        k = 2.0 if scale_after else 1.0
        da, dw = cp.asarray(x0), cp.asarray(w0)
        for _ in range(3):  # results dropped: the same output pointer comes back
            (out,) = exe.run([da, dw], {})
            np.testing.assert_allclose(cp.asnumpy(out), k * x0 @ w0, rtol=1e-4, atol=1e-4)
            del out
        kept = [exe.run([da, dw], {})[0] for _ in range(4)]  # results kept: new output pointers
        assert len({o.data.ptr for o in kept}) == 4
        x1 = rng.standard_normal((32, 48), np.float32)
        da[...] = cp.asarray(x1)
        kept.append(exe.run([da, dw], {})[0])
        for o, xs in zip(kept, [x0] * 4 + [x1]):
            np.testing.assert_allclose(cp.asnumpy(o), k * xs @ w0, rtol=1e-4, atol=1e-4)


def test_calls_changing_some_inputs_rewrite_only_those_and_stay_right(cuda):
    """A call whose arrays are partly the last call's (a model's weights) and partly new (its
    step inputs: new device arrays, host arrays, a misaligned view) rewrites only the new ones'
    pointers: every result matches NumPy, whichever input changed, including the inputs a
    cuBLAS step reads (its pointers key the captured graph)."""
    import cupy as cp

    rng = np.random.default_rng(2)
    b = C.B()
    a, w, s = b.input((32, 48)), b.input((48, 40)), b.input((40,))
    y = b.custom("matmul", [b.c(a), b.c(w)], (32, 40), dt.float32, m=32, n=40, k=48, strategy="cublas")
    b.output(b.custom("fused", [b.c(y), (s, C._bcast_row(32, 40))], (32, 40), dt.float32,
                      expr=("Add", "float32", ("in", 0), ("in", 1))))
    exe = cuda.compile(b.g)
    xs = [rng.standard_normal((32, 48), np.float32) for _ in range(4)]
    w0, w1 = (rng.standard_normal((48, 40), np.float32) for _ in range(2))
    s0 = rng.standard_normal(40).astype(np.float32)
    dw, ds = cp.asarray(w0), cp.asarray(s0)
    padded = cp.zeros(32 * 48 + 1, np.float32)
    padded[1:] = cp.asarray(xs[3]).reshape(-1)
    calls = [(cp.asarray(xs[0]), dw, ds, xs[0], w0), (cp.asarray(xs[1]), dw, ds, xs[1], w0),
             (xs[2], dw, ds, xs[2], w0),  # a host array
             (padded[1:].reshape(32, 48), dw, ds, xs[3], w0),  # starts inside a 16-byte word: copied
             (None, cp.asarray(w1), ds, xs[3], w1),  # the same x as the call before, a new w
             (None, None, cp.asarray(s0 * 2), xs[3], w1)]
    kept, want, last = [], [], None
    for x_in, w_in, s_in, x_ref, w_ref in calls:
        args = [x_in if x_in is not None else last[0], w_in if w_in is not None else last[1], s_in]
        kept.append(exe.run(args, {})[0])
        want.append(x_ref @ w_ref + (s0 * 2 if s_in is not ds else s0))
        last = args
    for got, ref in zip(kept, want):
        np.testing.assert_allclose(cp.asnumpy(got), ref, rtol=1e-4, atol=1e-4)


def test_copy_to_host_async_waits_only_for_work_queued_before_it(cuda):
    """A host copy started right after a result is made holds that result's values even when
    the same buffer's producer queues more work afterwards, and bfloat16 reads as bfloat16."""
    import cupy as cp

    f = lf.jit(lambda a: a + 1.0, backend="cuda")
    x = lf.device_put(np.arange(8, dtype=np.float32), "cuda")
    y = f(x).copy_to_host_async()
    z = y
    for _ in range(20):  # later work on the stream, some of it reading y
        z = f(z)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8) + 1.0)
    np.testing.assert_array_equal(np.asarray(z), np.arange(8) + 21.0)
    # the copy runs on a stream of its own: the memory of an array whose read is pending is not
    # handed to the arrays made after it, even with every reference but the read's dropped
    g = lf.jit(lambda a, s: a * s + 1.0, backend="cuda")
    pending = [g(x, float(k)).copy_to_host_async()._host for k in range(6)]  # the Arrays dropped
    for _ in range(40):
        f(x)
    for k, p in enumerate(pending):
        np.testing.assert_array_equal(p.result(), np.arange(8) * k + 1.0, err_msg=f"read {k}")
    b = lf.jit(lambda a: (a * 2.0).astype(lf.bfloat16), backend="cuda")(x).copy_to_host_async()
    got = np.asarray(b)
    assert got.dtype == lf.bfloat16.np
    np.testing.assert_array_equal(got.astype(np.float32), np.arange(8) * 2.0)
    cp.cuda.get_current_stream().synchronize()


def test_is_ready_follows_the_work_still_queued(cuda):
    """is_ready() never blocks: False while the chain that makes an array still runs (about 25 ms
    of 4096^3 float32 products, queued in well under a millisecond), True once it is done, for a
    pending host copy as for a plain array."""
    import cupy as cp

    f = lf.jit(lambda a, b: (a @ b) * (1.0 / 64.0), backend="cuda")
    rng = np.random.default_rng(0)
    a = lf.device_put(rng.standard_normal((4096, 4096)).astype(np.float32), "cuda")
    b = lf.device_put(rng.standard_normal((4096, 4096)).astype(np.float32), "cuda")
    f(a, b).block_until_ready()  # compiled and searched before the chain is timed
    total = lf.jit(lambda a: lnp.sum(a, axis=0)[:4], backend="cuda")
    total(a).block_until_ready()
    y = a
    for _ in range(10):
        y = f(y, b)
    small = total(y).copy_to_host_async()  # read through a pinned slot and its event
    assert small._host is not None and not small.is_ready()
    assert not y.is_ready()  # 64 MiB: no pending copy, the stream answers
    cp.cuda.get_current_stream().synchronize()
    assert y.is_ready()
    got = np.asarray(small)  # the copy's own stream may still be finishing until this read
    assert small.is_ready() and np.isfinite(got).all()


def test_a_donated_cache_is_written_in_place_and_returned(cuda):
    """A KV-cache style update with the cache donated: the result is the caller's buffer itself,
    each call writes only its rows, and chained calls (replayed from the CUDA graph) agree with
    NumPy."""
    def step(cache, idx, rows):
        new = lf.nn.scatter_rows(cache, idx, rows)
        return new, lnp.sum(lf.nn.gather_rows(new, idx), axis=0)

    f = lf.jit(step, backend="cuda", donate_argnums=0)
    rng = np.random.default_rng(1)
    want = np.zeros((16, 8), np.float32)
    cache = lf.device_put(want.copy(), cuda)
    for t in range(5):
        idx = np.array([t, (t + 7) % 16], np.int32)
        rows = rng.standard_normal((2, 8)).astype(np.float32)
        ptr = cache._buf.data.ptr
        cache, total = f(cache, idx, rows)
        want[idx] = rows
        np.testing.assert_allclose(np.asarray(cache), want, rtol=0, atol=0)
        np.testing.assert_allclose(np.asarray(total), want[idx].sum(0), rtol=1e-6, atol=1e-6)
        if t:  # after the first call (which may convert the input), the same buffer comes back
            assert cache._buf.data.ptr == ptr


@pytest.mark.parametrize("shape", [(1, 128256), (3, 40000), (64, 1000), (5, 20)])
def test_argmax_over_rows_of_every_length_matches_numpy(cuda, shape):
    """argmax (a max, then a max over -(index + n * miss)) through every reduction strategy,
    the chosen genome of a search, against NumPy: random rows, a row of ties (the first index
    wins) and a NaN (the first NaN wins). A 128256-float row (Llama's vocabulary) takes the split
    reduction that NVRTC 13.0 miscompiled when its loop was unrolled (H200 runs CK-CL)."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    x[-1, :] = 0.5  # ties everywhere: index 0
    if shape[0] > 2:
        x[1, shape[1] // 3] = np.nan
        x[1, 2 * shape[1] // 3] = np.nan
    f = lf.jit(lambda a: lnp.argmax(a, axis=-1), backend="cuda", search=lf.SearchOptions(limit=3))
    for trial in range(3):  # the same compiled plan with new values
        got = np.asarray(f(x))
        np.testing.assert_array_equal(got, np.argmax(x, axis=-1), err_msg=f"trial {trial}")
        x[:-1] = rng.standard_normal((shape[0] - 1, shape[1])).astype(np.float32)


def test_llama_greedy_pick_over_a_full_vocabulary_matches_numpy(cuda):
    """examples/llama's device greedy pick (the last logits row's argmax, s dynamic) over
    Llama-3's 128256-token vocabulary, in the decode bucket and in a prompt's, against NumPy:
    what NVRTC 13.0's miscompiled argmax got wrong in every row (H200 run CL)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    from llama import model

    pick = model.make_greedy(backend="cuda", search=lf.SearchOptions(limit=3),
                             buckets={"s": [(1, 1), (2, 8, 4)]})
    rng = np.random.default_rng(7)
    for s in (1, 1, 5, 8):
        logits = rng.standard_normal((s, 128256)).astype(np.float32)
        want = int(np.argmax(logits[-1]))
        got = np.asarray(pick(lf.device_put(logits, "cuda")))
        assert got.dtype == np.int32 and got.tolist() == [want], (s, got, want)


def test_int_max_and_min_of_negated_values_and_bool_argmax_match_numpy(cuda):
    """ptxas 12.9 and 13.0 fuse three signed int max (or min) into one sm_90 VIMNMX3 and drop a
    negation when two or more operands are negated: argmax along the rows of a (3, 3) bool array
    came back -1 in every row (run DB, the int fuzz's first program). The prelude's int max and
    min compare biased, as unsigned; these are the shapes the bug took."""
    x = np.array([[0, 0, 0], [1, 0, 1], [0, 1, 1]], bool)
    f = lf.jit(lambda a: lnp.argmax(a, axis=1), backend="cuda", search=lf.SearchOptions(limit=3))
    np.testing.assert_array_equal(np.asarray(f(x)), np.argmax(x, axis=1))
    v = np.array([[3, -7, 5], [-2147483648, 5, 2147483647], [0, -1, 1], [7, 7, -7]], np.int32)
    sign = np.array([-1, -1, 1], np.int32)
    cases = {"max": lambda m, a: m.max(-a, axis=1), "min": lambda m, a: m.min(-a, axis=1),
             "max of two negated, one not": lambda m, a: m.max(a * sign, axis=1)}
    for name, fn in cases.items():
        jitted = lf.jit(lambda a: fn(lnp, a), backend="cuda", search=lf.SearchOptions(limit=3))
        np.testing.assert_array_equal(np.asarray(jitted(v)), fn(np, v), err_msg=name)

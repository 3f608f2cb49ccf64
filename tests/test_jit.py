"""lf.jit: static and donated arguments, dynamic dims, kwargs and defaults, the trace cache,
weak-typed scalars, the stages and their printouts, lf.Array and lf.device_put."""
import functools
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp


@pytest.fixture
def x4():
    return np.array([0.5, -1.0, 2.0, 3.5], np.float32)


# ---- static arguments ---------------------------------------------------------------------------
def test_static_argnums_retrace_only_on_new_value(x4):
    @lf.jit(static_argnums=1)
    def power(x, n):
        out = x
        for _ in range(n - 1):  # Python control flow on a static value is fine
            out = out * x
        return out

    np.testing.assert_allclose(np.asarray(power(x4, 3)), x4 ** 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(power(x4 + 1, 3)), (x4 + 1) ** 3, rtol=1e-6)
    assert power.trace_count == 1
    np.testing.assert_allclose(np.asarray(power(x4, 2)), x4 ** 2, rtol=1e-6)
    assert power.trace_count == 2 and power.compile_count == 2
    power(x4, 3)
    assert power.trace_count == 2


def test_static_argnames_by_keyword_and_position(x4):
    @lf.jit(static_argnames="mode")
    def act(x, mode="relu"):
        return lnp.maximum(x, 0.0) if mode == "relu" else -x

    np.testing.assert_array_equal(np.asarray(act(x4)), np.maximum(x4, 0))
    np.testing.assert_array_equal(np.asarray(act(x4, mode="neg")), -x4)
    np.testing.assert_array_equal(np.asarray(act(x4, "neg")), -x4)
    assert act.trace_count == 2  # the default, then "neg" (by keyword and by position alike)


def test_negative_static_argnums_and_static_tuple(x4):
    @lf.jit(static_argnums=-1)
    def pick(x, idx):
        return lnp.stack([x[i] for i in idx])

    np.testing.assert_array_equal(np.asarray(pick(x4, (3, 0))), x4[[3, 0]])
    np.testing.assert_array_equal(np.asarray(pick(x4, (1,))), x4[[1]])
    assert pick.trace_count == 2


# ---- kwargs, defaults, varargs --------------------------------------------------------------------
def test_kwargs_and_defaults(x4):
    @lf.jit
    def affine(x, w=2.0, b=None):
        y = x * w
        return y if b is None else y + b

    b = np.ones(4, np.float32)
    np.testing.assert_allclose(np.asarray(affine(x4)), x4 * 2)
    np.testing.assert_allclose(np.asarray(affine(x4, 3.0)), x4 * 3)
    np.testing.assert_allclose(np.asarray(affine(x4, w=3.0)), x4 * 3)
    np.testing.assert_allclose(np.asarray(affine(x4, b=b)), x4 * 2 + 1)
    np.testing.assert_allclose(np.asarray(affine(b=b, w=0.5, x=x4)), x4 * 0.5 + 1)
    # omitted arguments keep their Python defaults (as in JAX), so (x), (x, w), (x; b), (x, w; b)
    # are four signatures; keyword order does not matter
    assert affine.trace_count == 4


def test_keyword_only_and_varargs(x4):
    @lf.jit
    def total(*xs, scale=1.0):
        return sum(xs[1:], xs[0]) * scale

    np.testing.assert_allclose(np.asarray(total(x4, x4, x4)), 3 * x4)
    np.testing.assert_allclose(np.asarray(total(x4, x4, scale=0.5)), x4)
    np.testing.assert_allclose(np.asarray(total(x4)), x4)
    assert total.trace_count == 3


def test_jit_of_a_method_with_static_self():
    class Model:
        def __init__(self, k):
            self.w = np.full(3, k, np.float32)

        @lf.jit(static_argnums=0)  # self is hashed by identity, as in JAX
        def forward(self, x):
            return x * self.w

    m2, m3 = Model(2.0), Model(3.0)
    ones = np.ones(3, np.float32)
    np.testing.assert_array_equal(np.asarray(m2.forward(ones)), [2, 2, 2])
    np.testing.assert_array_equal(np.asarray(m3.forward(ones)), [3, 3, 3])
    np.testing.assert_array_equal(np.asarray(m2.forward(ones * 2)), [4, 4, 4])
    assert Model.forward.trace_count == 2


# ---- the trace cache ----------------------------------------------------------------------------
def test_retrace_on_new_dtype_and_shape_not_on_new_values(x4):
    @lf.jit
    def f(x):
        return x * 2

    f(x4)
    f(x4 + 1)
    f(lf.device_put(x4))
    assert f.trace_count == 1
    assert f(x4.astype(np.int32)).dtype == lf.int32
    assert f(x4.astype(np.float16)).dtype == lf.float16
    assert f(np.ones(5, np.float32)).shape == (5,)
    assert f.trace_count == 4 and f.compile_count == 4
    f(x4.astype(np.float16))
    assert f.trace_count == 4


def test_python_scalars_are_weak_and_never_retrace_on_value(x4):
    @lf.jit
    def f(x, s):
        return x * s

    h = x4.astype(np.float16)
    for v in (2.0, -3.5, 1e-3):
        out = f(h, v)
        assert out.dtype == lf.float16  # weak: the scalar adopts the array's dtype
        np.testing.assert_allclose(np.asarray(out), (h.astype(np.float32) * v).astype(np.float16), rtol=1e-3)
    assert f.trace_count == 1
    out = f(np.arange(3, dtype=np.int32), 2)
    assert out.dtype == lf.int32 and f.trace_count == 2
    assert f(np.arange(3, dtype=np.int32), 0.5).dtype == lf.float32  # int array * float -> float32
    f(np.arange(3, dtype=np.int32), 7)
    assert f.trace_count == 3
    # a NumPy scalar is strongly typed, like a 0-d array
    assert f(h, np.float32(2.0)).dtype == lf.float32
    assert f(h, np.float64(2.0)).dtype == lf.float32  # np.float64 is a float subclass, still strong


def test_nested_jit_is_inlined(x4):
    @lf.jit
    def inner(x):
        return x * 3

    @lf.jit
    def outer(x):
        return inner(x) + inner(x + 1)

    np.testing.assert_allclose(np.asarray(outer(x4)), x4 * 3 + (x4 + 1) * 3)
    assert inner.trace_count == 0 and "Mul" in lf.make_hlir(outer)(x4).as_text()


def test_call_path_mixes_arrays_numpy_and_scalars(x4):
    @lf.jit
    def f(a, b, c):
        return a + b * c

    ref = x4 + x4 * 2.0
    a = lf.device_put(x4)
    for args in ((x4, x4, 2.0), (a, x4, 2.0), (a, a, 2.0), (x4, a, 2.0), (x4.astype(np.float64), a, 2.0)):
        for _ in range(2):  # the second call of each takes the dispatch cache
            np.testing.assert_allclose(np.asarray(f(*args)), ref)
    assert f.trace_count == 1 and f.compile_count == 1


# ---- donation and input immutability ------------------------------------------------------------
def test_donated_arrays_are_deleted_others_kept(x4):
    @lf.jit(donate_argnums=(0,))
    def update(state, delta):
        return {"w": state["w"] - delta, "n": state["n"] + 1}

    state = lf.device_put({"w": x4, "n": np.zeros((), np.int32)})
    delta = lf.device_put(np.full(4, 0.5, np.float32))
    new = update(state, delta)
    assert state["w"].is_deleted() and state["n"].is_deleted()
    assert not delta.is_deleted()
    np.testing.assert_array_equal(np.asarray(delta), np.full(4, 0.5, np.float32))
    np.testing.assert_array_equal(np.asarray(new["w"]), x4 - 0.5)
    with pytest.raises(lf.DonationError):
        np.asarray(state["w"])
    assert "donated" in repr(state["w"])
    newer = update(new, delta)  # the result can be donated in turn
    np.testing.assert_array_equal(np.asarray(newer["w"]), x4 - 1.0)
    assert int(newer["n"]) == 2
    # NumPy arguments cannot be deleted: donation leaves them untouched
    raw = {"w": x4.copy(), "n": np.zeros((), np.int32)}
    update(raw, delta)
    np.testing.assert_array_equal(raw["w"], x4)


def test_donate_argnames_donates_by_name_positional_or_keyword(x4):
    def step(weights, cache, *, scale):
        return cache + weights * scale

    f = lf.jit(step, donate_argnames="cache")
    g = lf.jit(step, donate_argnums=1)
    assert f.donate_argnums == g.donate_argnums == {1}
    w = lf.device_put(x4)
    for call in (lambda c: f(w, c, scale=2.0), lambda c: f(weights=w, cache=c, scale=2.0)):
        cache = lf.device_put(np.ones(4, np.float32))
        out = call(cache)
        assert cache.is_deleted() and not w.is_deleted()
        np.testing.assert_array_equal(np.asarray(out), 1.0 + 2.0 * x4)
        with pytest.raises(lf.DonationError, match="step"):
            np.asarray(cache)
    # a keyword-only argument can be donated by name too
    h = lf.jit(lambda w, *, c: c - w, donate_argnames=("c",))
    c = lf.device_put(np.full(4, 3.0, np.float32))
    np.testing.assert_array_equal(np.asarray(h(w, c=c)), 3.0 - x4)
    assert c.is_deleted() and not w.is_deleted()


def test_donate_argnames_errors_name_the_function_and_argument():
    def step(weights, cache, n):
        return cache + weights * n

    with pytest.raises(lf.ArgumentError, match=r"jit\(step\): donate_argnames names 'cach'"):
        lf.jit(step, donate_argnames="cach")
    with pytest.raises(lf.ArgumentError, match=r"'n' is both static and donated"):
        lf.jit(step, static_argnums=2, donate_argnames="n")
    with pytest.raises(lf.ArgumentError, match=r"'n' is both static and donated"):
        lf.jit(step, static_argnames="n", donate_argnums=2)
    with pytest.raises(lf.ArgumentError, match="must be parameter names"):
        lf.jit(step, donate_argnames=[1])


def test_inputs_are_never_mutated(x4):
    @functools.partial(lf.jit, backend="numpy")  # (read-only result views are the NumPy backend's)
    def scatter(x, v):
        y = x.at[1].set(100.0)
        y = y.at[0].add(v[0])
        return y, x, v.at[2:].multiply(0.0)

    x_copy = x4.copy()
    v = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    va = lf.device_put(v, "numpy")
    y, same_x, vz = scatter(x4, va)
    np.testing.assert_array_equal(x4, x_copy)
    np.testing.assert_array_equal(np.asarray(va), v)
    np.testing.assert_array_equal(np.asarray(y), [1.5, 100.0, 2.0, 3.5])
    np.testing.assert_array_equal(np.asarray(vz), [1.0, 2.0, 0.0, 0.0])
    # a result never aliases an argument, and a result cannot be written through np.asarray
    assert not np.shares_memory(np.asarray(same_x), x4)
    view = np.asarray(y)
    with pytest.raises(ValueError):
        view[0] = 7.0
    copy = np.array(y)
    copy[0] = 7.0
    assert float(np.asarray(y)[0]) == 1.5
    scatter(x4, va)
    np.testing.assert_array_equal(x4, x_copy)


# ---- dynamic dims -------------------------------------------------------------------------------
def test_dynamic_axes_reuse_one_trace_and_one_compile(rng):
    @lf.jit(dynamic_axes={"x": {0: "s"}})
    def norm_rows(x, w):
        return (x - x.mean(axis=0)) @ w

    w = rng.standard_normal((3, 2)).astype(np.float32)
    for s in (5, 1, 17, 5, 64):
        x = rng.standard_normal((s, 3)).astype(np.float32)
        ref = (x - x.mean(axis=0)) @ w
        out = norm_rows(x, w)
        assert out.shape == (s, 2)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)
    assert norm_rows.trace_count == 1 and norm_rows.compile_count == 1
    assert "s" in norm_rows.trace(x, w).symbols


def test_reshape_arange_mean_over_a_symbolic_dim():
    @lf.jit(dynamic_axes={"x": {0: "s"}})
    def f(x):
        n = x.shape[0]
        flat = x.reshape(-1)             # (4s,)
        pairs = x.reshape(-1, 2)         # (2s, 2)
        rows = x.reshape(n, 2, 2).sum((1, 2)) + lnp.arange(n)
        return flat.mean(), pairs.sum(0), rows, lnp.arange(n * 2).sum()

    for s in (1, 3, 8):
        x = np.arange(4 * s, dtype=np.float32).reshape(s, 4)
        m, p, r, a = f(x)
        np.testing.assert_allclose(np.asarray(m), x.mean(), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(p), x.reshape(-1, 2).sum(0))
        np.testing.assert_array_equal(np.asarray(r), x.reshape(s, 2, 2).sum((1, 2)) + np.arange(s))
        assert int(a) == np.arange(2 * s).sum()
    assert f.trace_count == 1 and f.compile_count == 1


def test_dynamic_axes_on_pytree_paths_and_shared_symbols(rng):
    @lf.jit(dynamic_axes={"batch": {0: "b"}, "mask": {0: "b", 1: "t"}, "batch/tokens": {0: "b", 1: "t"}})
    def f(batch, mask):
        return lnp.where(mask, batch["tokens"], 0.0).sum(axis=1) + batch["bias"]

    for b, t in ((2, 3), (4, 1), (1, 7)):
        tok = rng.standard_normal((b, t)).astype(np.float32)
        mask = rng.random((b, t)) > 0.5
        bias = rng.standard_normal(b).astype(np.float32)
        out = f({"tokens": tok, "bias": bias}, mask)
        np.testing.assert_allclose(np.asarray(out), np.where(mask, tok, 0).sum(1) + bias, rtol=1e-5, atol=1e-6)
    assert f.trace_count == 1


def test_dynamic_axes_by_position_and_as_list(x4):
    @lf.jit(dynamic_axes={0: ["n"]})
    def double(x):
        return x * 2

    double(x4)
    double(np.ones(9, np.float32))
    assert double.trace_count == 1 and str(double.trace(x4)).startswith("double(x: f32[n])")


# ---- stages and printouts -----------------------------------------------------------------------
def test_stages_trace_lower_compile(x4):
    def mlp(p, x):
        return lnp.maximum(x @ p["w"] + p["b"], 0.0)

    p = {"w": np.eye(4, dtype=np.float32), "b": np.full(4, 0.25, np.float32)}
    jf = lf.jit(mlp)
    traced = jf.trace(p, x4)
    assert isinstance(traced, lf.Traced) and traced.hlir is not None
    text = traced.as_text()
    assert text.splitlines()[0] == "mlp(p/b: f32[4], p/w: f32[4,4], x: f32[4])"
    assert "Input" in text and "Output" in text and "SumReduce" in text
    lowered = traced.lower()
    assert isinstance(lowered, lf.Lowered) and isinstance(lowered.as_text(), str)
    assert isinstance(lowered.stats(), dict)
    compiled = lowered.compile()
    assert isinstance(compiled, lf.Compiled) and jf.compile_count == 1
    assert isinstance(compiled.as_text(), str) and isinstance(compiled.cost(), dict)
    np.testing.assert_allclose(np.asarray(compiled(p, x4)), np.maximum(x4 + 0.25, 0))
    with pytest.raises(lf.LuminalError, match=r"built for \(p/b: f32\[4\].*x: f32\[5\]"):
        compiled(p, np.ones(5, np.float32))
    assert jf.trace_count == 1  # stages do not fill the call cache
    assert isinstance(jf.lower(p, x4), lf.Lowered) and jf.trace_count == 2


def test_make_hlir_prints_the_graph(x4):
    def f(x, y):
        return lnp.exp(x) * y + 1.0

    text = str(lf.make_hlir(f)(x4, 2.0))
    lines = text.splitlines()
    assert lines[0] == "f(x: f32[4], y: f32[]{weak})"
    assert lines[1].startswith("hlir f (")
    for op in ("Input", "Exp2", "Mul", "Add", "Output"):
        assert op in text
    static_text = str(lf.make_hlir(lambda x, k: x * k, static_argnums=1)(x4, 3))
    assert "Constant" in static_text or "value=3" in static_text


def test_clear_cache_retraces(x4):
    @lf.jit
    def f(x):
        return x + 1

    f(x4)
    f.clear_cache()
    f(x4)
    assert f.trace_count == 2


# ---- lf.Array and device_put --------------------------------------------------------------------
def test_device_put_round_trip_and_copy_semantics(x4):
    src = x4.copy()
    a = lf.device_put(src, "numpy")  # (the default backend is CUDA on a GPU machine)
    assert isinstance(a, lf.Array) and a.backend == "numpy"
    src[0] = 99.0  # changing the source later does not change the Array
    np.testing.assert_array_equal(np.asarray(a), x4)
    assert lf.device_put(a, "numpy") is a
    d = lf.device_put(np.arange(3, dtype=np.float64), "numpy")
    assert d.dtype == lf.float32 and np.asarray(d).dtype == np.float32
    with pytest.raises(OverflowError, match="device_put"):
        lf.device_put(np.array([2**40]), "numpy")
    scalar = lf.device_put(3.5, "numpy")
    assert scalar.shape == () and scalar.item() == 3.5


def test_array_surface(x4):
    a = lf.device_put(x4.reshape(2, 2), "numpy")
    assert a.shape == (2, 2) and a.ndim == 2 and a.size == 4 and a.nbytes == 16
    assert a.dtype == lf.float32 and len(a) == 2
    assert repr(a) == "Array([[ 0.5, -1. ],\n       [ 2. ,  3.5]], dtype=float32, backend=numpy)"
    assert a[1, 1].item() == 3.5 and float(a[0, 0]) == 0.5
    assert a.tolist() == [[0.5, -1.0], [2.0, 3.5]]
    np.testing.assert_array_equal(np.asarray(a, dtype=np.float64), x4.reshape(2, 2).astype(np.float64))
    with pytest.raises(TypeError, match="len"):
        len(lf.device_put(np.float32(1)))
    with pytest.raises(TypeError, match="immutable"):
        a[0, 0] = 1.0


def test_eager_namespace_calls_on_arrays(x4):
    a = lf.device_put(x4)
    out = lnp.tanh(a) * 2 + lnp.sum(a)
    assert isinstance(out, lf.Array)
    np.testing.assert_allclose(np.asarray(out), np.tanh(x4) * 2 + x4.sum(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a.mean()), x4.mean(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a.reshape(2, 2).T), x4.reshape(2, 2).T)
    np.testing.assert_array_equal(np.asarray(a > 1.0), x4 > 1.0)
    # eager results feed jitted functions without conversion
    np.testing.assert_allclose(np.asarray(lf.jit(lambda v: v - 1)(out)), np.asarray(out) - 1)


def test_results_of_one_call_feed_the_next_and_int64_at_dispatch():
    @lf.jit
    def inc(i):
        return i + 1

    i = inc(np.zeros(3, np.int64))
    for _ in range(3):
        i = inc(i)
    np.testing.assert_array_equal(np.asarray(i), [4, 4, 4])
    assert inc.trace_count == 1
    inc(np.zeros(3, np.int64))  # dispatch cache hit with a raw int64 dtype
    with pytest.raises(OverflowError, match=r"inc: argument 'i'"):
        inc(np.full(3, 2**35, np.int64))


def test_is_ready_on_the_numpy_backend_and_after_donation():
    """A NumPy-backend call returns computed arrays: is_ready() is True at once, before and after
    a pending copy; a donated Array names the call it was donated to, as any read does."""
    x = np.arange(6, dtype=np.float32)
    y = lf.jit(lambda a: a * 2.0, backend="numpy")(x)
    assert y.is_ready() is True
    assert y.copy_to_host_async().is_ready() is True
    cache = lf.device_put(np.zeros(6, np.float32), "numpy")
    bump = lf.jit(lambda c: c + 1.0, backend="numpy", donate_argnums=0)
    out = bump(cache)
    assert out.is_ready()
    with pytest.raises(lf.DonationError, match="donated"):
        cache.is_ready()


def test_copy_to_host_async_gives_the_same_values_on_every_backend():
    """copy_to_host_async returns the Array itself and np.asarray reads the same values after it
    (on the NumPy backend nothing is pending; the GPU test covers the pinned copy)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = lf.jit(lambda a: a * 2.0 + 1.0, backend="numpy")(x)
    assert y.copy_to_host_async() is y
    np.testing.assert_array_equal(np.asarray(y), x * 2 + 1)
    assert y.copy_to_host_async() is y  # a second call keeps the first copy
    np.testing.assert_array_equal(np.asarray(y), x * 2 + 1)

"""Host cost of calling an already-compiled tiny function with 10 array arguments.

    PYTHONPATH=. python3 benchmarks/dispatch.py

The function sums ten 4-element float32 arrays, so execution is tiny and the call is mostly
dispatch (flattening, cache lookup, dims, buffer conversion, wrapping the result). Printed, per
argument kind (lf.Array, NumPy): the median microseconds per call of the jitted function; the
floor, the same compiled plan run directly through its runner (``runner.run(bufs, dims)``); and
dispatch = total - floor. jax.jit on the same function is measured in the same run when JAX is
importable (``pip install jax``). Not a test: figures vary from run to run.

A second table does the same for a call shaped like a Llama decode step: a weights pytree of 16
layers of 11 arrays (plus the embedding and the final norm: 178 leaves), a step input, and a
donated cache of 16 {"k", "v"} pairs, returning a value and the 32 updated cache arrays. The
arrays hold 4 elements, so the matching of 211 leaves and the wrapping of 33 results is what the
dispatch column shows (the plan alone runs the ~100 tiny kernels).
"""
from __future__ import annotations

import gc
import platform
import time

import numpy as np

import luminal_fn as lf

N_ARGS = 10


def tiny(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9


def median_us(fn, calls: int = 5000, warmup: int = 200) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    gc.disable()
    try:
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    ts.sort()
    return ts[len(ts) // 2] * 1e6


def measure() -> list:
    args_np = [np.full(4, i, np.float32) for i in range(N_ARGS)]
    args_lf = [lf.device_put(a) for a in args_np]
    f = lf.jit(tiny)
    expect = np.sum(args_np, axis=0)
    np.testing.assert_array_equal(np.asarray(f(*args_np)), expect)
    np.testing.assert_array_equal(np.asarray(f(*args_lf)), expect)
    assert f.trace_count == 1 and f.compile_count == 1
    (compiled,) = f.compiled()  # the plan the calls above run
    run = compiled.runner.run
    bufs_lf = [a.buffer for a in args_lf]
    rows = []
    floor_lf = median_us(lambda: run(bufs_lf, {}))
    rows.append(("lf.jit, lf.Array args", median_us(lambda: f(*args_lf)), floor_lf))
    floor_np = median_us(lambda: run(args_np, {}))
    rows.append(("lf.jit, NumPy args", median_us(lambda: f(*args_np)), floor_np))
    try:
        import jax
    except ImportError:
        rows.append(("jax.jit", None, None))
        return rows
    jf = jax.jit(tiny)
    args_jx = [jax.device_put(a) for a in args_np]
    np.testing.assert_array_equal(np.asarray(jf(*args_jx)), expect)
    rows.append(("jax.jit, jax.Array args", median_us(lambda: jf(*args_jx).block_until_ready()), None))
    rows.append(("jax.jit, NumPy args", median_us(lambda: jf(*args_np).block_until_ready()), None))
    return rows


LAYER_KEYS = ("attn_norm", "q", "k", "v", "o", "mlp_norm", "gate", "up", "down", "b0", "b1")
LAYERS = 16


def step_shaped(weights, x, cache):
    """A Llama-step-shaped function of tiny arrays: every weight read once, the cache updated."""
    h = x * weights["embed"]
    new = []
    for layer, c in zip(weights["layers"], cache):
        for k in LAYER_KEYS:
            h = h + layer[k]
        new.append({"k": c["k"] + h, "v": c["v"] - h})
    return h * weights["norm"], new


def measure_step_shaped() -> list:
    rng = np.random.default_rng(0)
    vec = lambda: rng.standard_normal(4).astype(np.float32)  # noqa: E731
    w_np = {"embed": vec(), "norm": vec(),
            "layers": [{k: vec() for k in LAYER_KEYS} for _ in range(LAYERS)]}
    x_np = vec()
    cache_np = [{"k": vec(), "v": vec()} for _ in range(LAYERS)]
    expect, expect_cache = step_shaped(w_np, x_np, cache_np)
    f = lf.jit(step_shaped, donate_argnums=(2,))
    w = lf.device_put(w_np)
    x = lf.device_put(x_np)
    state = {"cache": lf.device_put(cache_np)}
    out, state["cache"] = f(w, x, state["cache"])
    np.testing.assert_allclose(np.asarray(out), expect, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(state["cache"][3]["v"]), expect_cache[3]["v"], rtol=1e-6)

    def call():
        _, state["cache"] = f(w, x, state["cache"])

    (compiled,) = f.compiled()
    run = compiled.runner.run
    bufs = [a.buffer for a in lf.tree_leaves((w, x, state["cache"]))]
    rows = [("lf.jit, lf.Array args", median_us(call, calls=2000), median_us(lambda: run(bufs, {}), calls=2000))]
    try:
        import jax
    except ImportError:
        rows.append(("jax.jit", None, None))
        return rows
    jf = jax.jit(step_shaped, donate_argnums=(2,))
    wj, xj = jax.device_put(w_np), jax.device_put(x_np)
    state["jcache"] = jax.device_put(cache_np)

    def jcall():
        out, state["jcache"] = jf(wj, xj, state["jcache"])
        out.block_until_ready()

    jcall()
    rows.append(("jax.jit, jax.Array args", median_us(jcall, calls=2000), None))
    return rows


def print_rows(rows):
    print("| call | median us per call | plan alone (floor) us | dispatch us |")
    print("| --- | --- | --- | --- |")
    for name, total, floor in rows:
        if total is None:
            print(f"| {name} | not installed | | |")
        elif floor is None:
            print(f"| {name} | {total:.1f} | | |")
        else:
            print(f"| {name} | {total:.1f} | {floor:.1f} | {total - floor:.1f} |")


def main():
    versions = f"python {platform.python_version()}, numpy {np.__version__}"
    try:
        import jax

        versions += f", jax {jax.__version__}"
    except ImportError:
        versions += ", jax not installed"
    print(f"{platform.machine()}, {versions}")
    print(f"tiny(a0, ..., a{N_ARGS - 1}): {N_ARGS} arrays in, one out")
    print_rows(measure())
    leaves = 2 + len(LAYER_KEYS) * LAYERS + 1 + 2 * LAYERS
    print(f"step_shaped(weights, x, cache): {leaves} leaves in, cache donated, {2 * LAYERS + 1} out")
    print_rows(measure_step_shaped())


if __name__ == "__main__":
    main()

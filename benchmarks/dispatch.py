"""Host cost of calling an already-compiled tiny function with 10 array arguments.

    PYTHONPATH=. python3 benchmarks/dispatch.py

The function sums ten 4-element float32 arrays, so execution is tiny and the call is mostly
dispatch (flattening, cache lookup, dims, buffer conversion, wrapping the result). Printed, per
argument kind (lf.Array, NumPy): the median microseconds per call of the jitted function; the
floor, the same compiled plan run directly through its runner (``runner.run(bufs, dims)``); and
dispatch = total - floor. jax.jit on the same function is measured in the same run when JAX is
importable (``pip install jax``). Not a test: figures vary from run to run.
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


def main():
    versions = f"python {platform.python_version()}, numpy {np.__version__}"
    try:
        import jax

        versions += f", jax {jax.__version__}"
    except ImportError:
        versions += ", jax not installed"
    print(f"{platform.machine()}, {versions}")
    print("| call | median us per call | plan alone (floor) us | dispatch us |")
    print("| --- | --- | --- | --- |")
    for name, total, floor in measure():
        if total is None:
            print(f"| {name} | not installed | | |")
        elif floor is None:
            print(f"| {name} | {total:.1f} | | |")
        else:
            print(f"| {name} | {total:.1f} | {floor:.1f} | {total - floor:.1f} |")


if __name__ == "__main__":
    main()

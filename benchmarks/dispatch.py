"""Host cost of calling an already-compiled tiny function with 10 array arguments.

    python benchmarks/dispatch.py

Prints, per argument kind (lf.Array, NumPy), the median microseconds per call of the jitted
function, of the NumPy backend executing the same compiled plan directly (so the difference is
dispatch: flattening, cache lookup, dims, wrapping), and of jax.jit when JAX is importable.
"""
from __future__ import annotations

import platform
import time

import numpy as np

import luminal_fn as lf


def tiny(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def median_us(fn, n=2000):
    for _ in range(50):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e6


def main():
    args_np = [np.full(4, i, np.float32) for i in range(10)]
    args_lf = [lf.device_put(a) for a in args_np]
    f = lf.jit(tiny)
    f(*args_np)
    entry = next(iter(f._entries.values()))
    runner = entry.runner
    rows = [("lf.jit, lf.Array args", median_us(lambda: f(*args_lf))),
            ("lf.jit, NumPy args", median_us(lambda: f(*args_np))),
            ("NumPy plan alone (execution floor)", median_us(lambda: runner.run(args_np, {})))]
    try:
        import jax

        jf = jax.jit(tiny)
        args_jx = [jax.device_put(a) for a in args_np]
        jf(*args_jx).block_until_ready()
        rows.append(("jax.jit, jax.Array args", median_us(lambda: jf(*args_jx).block_until_ready())))
        rows.append(("jax.jit, NumPy args", median_us(lambda: jf(*args_np).block_until_ready())))
    except ImportError:
        rows.append(("jax.jit", float("nan")))
    print(f"python {platform.python_version()}, {platform.machine()}, numpy {np.__version__}")
    print("| call | median us |\n| --- | --- |")
    for name, us in rows:
        print(f"| {name} | {us:.1f} |" if us == us else f"| {name} | not installed |")


if __name__ == "__main__":
    main()

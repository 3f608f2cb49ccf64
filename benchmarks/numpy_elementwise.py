"""Elementwise functions of luminal_fn.numpy on the NumPy backend beside NumPy's own.

Each function is jitted alone on one float32 array (a search with a fresh cache, so the figure is
the kernel the search keeps), then timed: the best of ``--repeats`` means of ``--calls`` calls,
beside the same NumPy function timed the same way in the same process.

    python benchmarks/numpy_elementwise.py [--shape 512 1024] [--search 100] [names...]

Names in TWO (arctan2, fmax, fmin) take a second array of the shape, drawn the same way; arcsin
and arccos read sin(x), inside their domain (outside it both are NaN, and NumPy's arcsin and
arctan2 take a slow path at NaN).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

DEFAULT = ["abs", "floor", "ceil", "trunc", "round", "fmod2", "modf", "sign", "maximum0",
           "where", "isfinite", "isnan", "signbit", "sinh", "cosh", "tanh", "cos", "tan", "arctan",
           "arcsinh", "cbrt", "log1p", "exp", "expm1", "arctan2", "arcsin", "arccos", "fmax", "fmin"]
# functions that are not one-argument NumPy calls: (luminal_fn form, NumPy form)
SPECIAL = {
    "fmod2": (lambda m, x: m.fmod(x, 2.0), lambda x: np.fmod(x, np.float32(2.0))),
    "modf": (lambda m, x: m.modf(x)[0], lambda x: np.modf(x)[0]),
    "maximum0": (lambda m, x: m.maximum(x, 0.0), lambda x: np.maximum(x, np.float32(0.0))),
    "where": (lambda m, x: m.where(x > 0, x, x * 0.5), lambda x: np.where(x > 0, x, x * np.float32(0.5))),
}
TWO = ("arctan2", "fmax", "fmin")  # two-argument functions, called on (x, y)
INSIDE_ONE = ("arcsin", "arccos")


def best_mean(fn, args, calls, repeats):
    fn(*args)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--shape", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--search", type=int, default=100, help="candidates timed per function")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("LUMINAL_CACHE_DIR", tempfile.mkdtemp(prefix="lf_bench_cache_"))
    import luminal_fn as lf
    import luminal_fn.numpy as lnp

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(tuple(args.shape)) * 3).astype(np.float32)
    y = (rng.standard_normal(tuple(args.shape)) * 3).astype(np.float32)
    search = lf.SearchOptions(limit=args.search, progress=False)
    print("| function | luminal_fn ms | NumPy ms | ratio |\n| --- | --- | --- | --- |")
    for name in args.names:
        if name in TWO:
            jf = lf.jit(lambda a, b, n=name: getattr(lnp, n)(a, b), backend="numpy", search=search)
            theirs, xs = getattr(np, name), (x, y)
        else:
            ours, theirs = SPECIAL.get(name, (lambda m, x, n=name: getattr(m, n)(x), getattr(np, name, None)))
            jf = lf.jit(lambda a, f=ours: f(lnp, a), backend="numpy", search=search)
            xs = (np.sin(x),) if name in INSIDE_ONE else (x,)
        with np.errstate(all="ignore"):
            got, want = np.asarray(jf(*xs)), theirs(*xs)
            if not np.allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True):
                raise SystemExit(f"{name}: luminal_fn's result differs from NumPy's")
            a = best_mean(jf, xs, args.calls, args.repeats)
            b = best_mean(theirs, xs, args.calls, args.repeats)
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""Joins (concatenate, stack, roll) on a CPU backend beside NumPy's own, with and without the
extraction's exact joins (optimize/exact_joins.py: an Add of two padded pieces that tile an axis
becomes a select on the position, which keeps -0.0).

Each case is jitted alone (a search with a fresh cache) and timed: the best of ``--repeats`` means
of ``--calls`` calls, beside the NumPy function timed the same way in the same process.
``--without-exact-joins`` replaces the extraction's join rewrite by the identity, the form before
it, for an A/B in separate processes (run the two forms one after the other, interleaved).

    python benchmarks/joins.py [--backend numpy|mlx] [--without-exact-joins] [--search 20]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--without-exact-joins", action="store_true")
    ap.add_argument("--search", type=int, default=20, help="candidates the search times")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("LUMINAL_CACHE_DIR", tempfile.mkdtemp(prefix="lf_joins_"))
    if args.without_exact_joins:
        import luminal_fn.optimize.extract as extract
        extract.join_tree = lambda tree, views, producers=None: (tree, None)
    import luminal_fn as lf
    import luminal_fn.numpy as lnp

    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 1024)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    cases = {
        "concatenate axis 1 (512x1024, 512x512)": (lambda a, b: lnp.concatenate([a, b], axis=1),
                                                   lambda a, b: np.concatenate([a, b], axis=1)),
        "concatenate axis 0 (512x512 twice)": (lambda a, b: lnp.concatenate([a[:, :512], b]),
                                               lambda a, b: np.concatenate([a[:, :512], b])),
        "stack (512x512 twice)": (lambda a, b: lnp.stack([a[:, :512], b]), lambda a, b: np.stack([a[:, :512], b])),
        "roll 512x1024 by 3 along axis 1": (lambda a, b: lnp.roll(a, 3, axis=1), lambda a, b: np.roll(a, 3, axis=1)),
    }
    form = "without" if args.without_exact_joins else "with"
    print(f"backend {args.backend}, {form} exact joins, search {args.search}, python {sys.version.split()[0]}")
    print("| case | luminal_fn ms | NumPy ms | ratio |")
    print("| --- | --- | --- | --- |")
    for name, (fn, ref) in cases.items():
        jf = lf.jit(fn, backend=args.backend, search=lf.SearchOptions(limit=args.search, cache=False))
        got = np.asarray(jf(a, b))
        assert np.array_equal(got, ref(a, b)), name
        t_lf = best_mean(lambda x, y: np.asarray(jf(x, y)), (a, b), args.calls, args.repeats)
        t_np = best_mean(ref, (a, b), args.calls, args.repeats)
        print(f"| {name} | {t_lf:.3f} | {t_np:.3f} | {t_lf / t_np:.1f}x |")


if __name__ == "__main__":
    main()

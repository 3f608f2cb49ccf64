"""A two-layer MLP with a softmax head, jitted and checked against plain NumPy.

    python examples/mlp.py            # NumPy backend (the default on any machine)
    python examples/mlp.py --backend cuda
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp


@lf.jit
def mlp(params, x):
    h = lnp.maximum(x @ params["w1"] + params["b1"], 0.0)
    return lf.nn.softmax(h @ params["w2"], axis=-1)


def reference(params, x):
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    z = h @ params["w2"]
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default=None)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    params = {
        "w1": (rng.standard_normal((128, 256)) / np.sqrt(128)).astype(np.float32),
        "b1": rng.standard_normal(256).astype(np.float32) * 0.1,
        "w2": (rng.standard_normal((256, 10)) / np.sqrt(256)).astype(np.float32),
    }
    x = rng.standard_normal((args.batch, 128)).astype(np.float32)
    f = lf.jit(mlp.fn, backend=args.backend)
    t0 = time.perf_counter()
    y = f(params, x)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(10):
        y = f(params, x)
    np.asarray(y)
    t_call = (time.perf_counter() - t0) / 10
    err = np.abs(np.asarray(y) - reference(params, x)).max()
    print(lf.make_hlir(mlp)(params, x))
    print(f"\nbackend: {y.backend}   output: {y.shape} {y.dtype}")
    print(f"max |luminal_fn - numpy| = {err:.3g}")
    print(f"first call (trace + compile + run): {t_first * 1e3:.1f} ms; later calls: {t_call * 1e3:.3f} ms")
    if not err < 1e-5:
        raise SystemExit("mismatch against the NumPy reference")


if __name__ == "__main__":
    main()

"""Vanilla DLRMv1 written with luminal_fn, checked against a float64 NumPy reference and timed.

    python examples/dlrm.py                         # num_cat sweep 1,2,3,4,8,16,32, batch 2048, NumPy
    python examples/dlrm.py --num-cat 4 --batch 256 --backend cuda

The model (as the seed's vanilla-PyTorch DLRM): a bottom MLP 13-512-256-64 (ReLU) on the dense
features; ``num_cat`` embedding-bag tables (sum pooling, bag size 4, dim 64), one per categorical
feature; the pairwise dot interaction of the F = 1 + num_cat vectors (strict lower triangle,
tril_indices order) concatenated to the bottom output; a top MLP 512-256-1 (ReLU) with a sigmoid.
Everything is plain luminal_fn code (lf.nn.linear, lf.nn.embedding_bag, lf.nn.dlrm_interaction);
the optimizer's rules recognise the embedding-bag, interaction and linear+bias patterns.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp

DENSE, EMB_DIM, BAG = 13, 64, 4
BOTTOM = (DENSE, 512, 256, EMB_DIM)
TOP_HIDDEN = (512, 256, 1)
SWEEP = (1, 2, 3, 4, 8, 16, 32)


def init_params(num_cat: int, rows: int = 1000, seed: int = 0) -> dict:
    """Random float32 weights: linear layers as (in, out) with 1/sqrt(in) scaling; tables N(0, 1/D)."""
    rng = np.random.default_rng(seed)

    def mlp(sizes):
        return [{"w": (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
                 "b": (rng.standard_normal(b) * 0.1).astype(np.float32)}
                for a, b in zip(sizes[:-1], sizes[1:])]

    f = 1 + num_cat
    top_in = EMB_DIM + f * (f - 1) // 2
    return {
        "bottom": mlp(BOTTOM),
        "tables": [(rng.standard_normal((rows, EMB_DIM)) / np.sqrt(EMB_DIM)).astype(np.float32)
                   for _ in range(num_cat)],
        "top": mlp((top_in,) + TOP_HIDDEN),
    }


def make_batch(num_cat: int, batch: int, rows: int = 1000, seed: int = 1):
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal((batch, DENSE)).astype(np.float32)
    idx = [rng.integers(0, rows, (batch, BAG)).astype(np.int32) for _ in range(num_cat)]
    return dense, idx


def forward(params, dense, idx):
    """The DLRMv1 forward pass in luminal_fn: (B, 13) dense and num_cat (B, 4) bags -> (B, 1)."""
    x = dense
    for layer in params["bottom"]:
        x = lf.nn.relu(lf.nn.linear(x, layer["w"], layer["b"]))
    sparse = [lf.nn.embedding_bag(t, i) for t, i in zip(params["tables"], idx)]
    z = lf.nn.dlrm_interaction(x, sparse)
    top = params["top"]
    for k, layer in enumerate(top):
        z = lf.nn.linear(z, layer["w"], layer["b"])
        z = lf.nn.relu(z) if k < len(top) - 1 else lf.nn.sigmoid(z)
    return z


def reference(params, dense, idx) -> np.ndarray:
    """The same model in float64 NumPy."""
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    x = f64(dense)
    for layer in params["bottom"]:
        x = np.maximum(x @ f64(layer["w"]) + f64(layer["b"]), 0.0)
    feats = [x] + [f64(t)[i].sum(axis=1) for t, i in zip(params["tables"], idx)]
    t = np.stack(feats, axis=1)
    zz = t @ t.transpose(0, 2, 1)
    li, lj = np.tril_indices(len(feats), -1)
    z = np.concatenate([x, zz[:, li, lj]], axis=1)
    top = params["top"]
    for k, layer in enumerate(top):
        z = z @ f64(layer["w"]) + f64(layer["b"])
        z = np.maximum(z, 0.0) if k < len(top) - 1 else 1.0 / (1.0 + np.exp(-z))
    return z


def run(num_cat: int, batch: int, backend=None, iters: int = 50, rows: int = 1000, seed: int = 0,
        search_limit: int | None = None, profile_timeout: float | None = None) -> dict:
    """Build, check and time one configuration: max abs diff vs float64 and ms per forward
    (the first call traces, searches implementations and compiles; ``search_limit`` caps the
    candidates the search times)."""
    params = init_params(num_cat, rows, seed)
    dense, idx = make_batch(num_cat, batch, rows, seed + 1)
    opts = {}
    if search_limit is not None:
        opts["limit"] = search_limit
    if profile_timeout is not None:
        opts["profile_timeout"] = profile_timeout
    search = lf.SearchOptions(**opts) if opts else None
    f = lf.jit(forward, backend=backend, search=search)
    t0 = time.perf_counter()
    out = np.asarray(f(params, dense, idx))
    first = time.perf_counter() - t0
    # timed as the peers are: weights and the batch already on the device, one forward per call
    be = lf.get_backend(backend)
    on_dev = lf.tree_map(lambda a: lf.device_put(a, be), (params, dense, idx))
    np.asarray(f(*on_dev))
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        y = f(*on_dev)
        be.synchronize()  # waits for the device, without copying the result to the host
        times.append(time.perf_counter() - t0)
    times.sort()
    diff = float(np.abs(out.astype(np.float64) - reference(params, dense, idx)).max())
    return {"num_cat": num_cat, "batch": batch, "max_abs_diff": diff, "first_s": first,
            "ms": times[len(times) // 2] * 1e3 if times else float("nan"), "shape": out.shape}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-cat", default=",".join(map(str, SWEEP)),
                    help="comma-separated numbers of categorical features (default: the sweep)")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--rows", type=int, default=1000, help="rows per embedding table")
    ap.add_argument("--iters", type=int, default=50, help="timed forwards per configuration")
    ap.add_argument("--backend", default=None, help="numpy, cuda or mlx (default: the library's)")
    ap.add_argument("--search-limit", type=int, default=None,
                    help="candidates the implementation search times per compile (default: the library's)")
    ap.add_argument("--profile-timeout", type=float, default=None,
                    help="seconds one search candidate may take (default: the library's)")
    ap.add_argument("--tol", type=float, default=1e-5, help="max abs diff allowed vs float64")
    args = ap.parse_args()
    print(f"{'num_cat':>7} {'batch':>6} {'max|diff|':>10} {'ms/forward':>11} {'first call s':>12}")
    worst = 0.0
    for nc in (int(v) for v in args.num_cat.split(",")):
        r = run(nc, args.batch, args.backend, args.iters, args.rows, search_limit=args.search_limit,
                profile_timeout=args.profile_timeout)
        worst = max(worst, r["max_abs_diff"])
        print(f"{nc:>7} {args.batch:>6} {r['max_abs_diff']:>10.3g} {r['ms']:>11.3f} {r['first_s']:>12.2f}")
    if not worst <= args.tol:
        raise SystemExit(f"max abs diff {worst:.3g} exceeds {args.tol:g}")


if __name__ == "__main__":
    main()

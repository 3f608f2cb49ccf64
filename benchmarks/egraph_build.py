"""Compile-time figures of the optimizer on a 16-layer Llama-3.2-1B-shaped graph (issue 3, item 10).

Times, on this machine: tracing the decode step, building the e-graph (load + each rule set),
reading it back, and extracting the cheapest genome plus a few random ones. The weights are
np.zeros (untouched pages), so nothing 1B-sized is computed or allocated for real.

    python benchmarks/egraph_build.py [--layers 16]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

from llama.config import llama_3_2_1b_config  # noqa: E402
from llama.checkpoint import empty_tree, expected_tensors, _set_path  # noqa: E402
from llama.model import make_step, step_inputs  # noqa: E402

from luminal_fn.optimize.egraph import build_egraph  # noqa: E402
from luminal_fn.optimize.extract import Extractor  # noqa: E402


def zero_weights(config):
    tree = empty_tree(config)
    for name, (path, shape) in expected_tensors(config).items():
        _set_path(tree, path, np.zeros(shape, np.float32))
    return tree


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--random-genomes", type=int, default=5)
    args = ap.parse_args()
    config = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=args.layers)
    weights = zero_weights(config)
    cache = [{"k": np.zeros((512, config.kv_dim), np.float32),
              "v": np.zeros((512, config.kv_dim), np.float32)} for _ in range(args.layers)]
    step = make_step(config, buckets={"s": [(1, 1), (2, 64, 16)], "c": [(1, 1), (2, 512, 16)]})
    t0 = time.perf_counter()
    traced = step.trace(weights, *step_inputs([1, 2, 3], 0), cache)
    t_trace = time.perf_counter() - t0
    eg = build_egraph(traced.hlir)
    t1 = time.perf_counter()
    ex = Extractor(eg, traced.hlir)
    t_index = time.perf_counter() - t1
    t2 = time.perf_counter()
    llir = ex.extract()
    t_extract = time.perf_counter() - t2
    rng = random.Random(0)
    t3 = time.perf_counter()
    for _ in range(args.random_genomes):
        ex.extract(tuple(rng.randrange(g.n_options) for g in ex.genes))
    t_random = (time.perf_counter() - t3) / max(1, args.random_genomes)
    s = eg.stats
    rows = [
        ("HLIR nodes", f"{len(traced.hlir)}"),
        ("e-classes / e-nodes", f"{s['classes']} / {s['nodes']}"),
        ("genes (choices)", f"{len(ex.genes)}"),
        ("trace", f"{t_trace:.2f} s"),
        ("e-graph load", f"{s['load_s']:.2f} s"),
        ("rules " + ", ".join(s["stages"]), " + ".join(f"{v:.2f}" for v in s["stages"].values()) + " s"),
        ("read-back (serialize + parse)", f"{s['readback_s']:.2f} s"),
        ("e-graph build + read-back", f"{s['total_s']:.2f} s"),
        ("extractor index", f"{t_index:.2f} s"),
        ("extract cheapest genome", f"{t_extract:.2f} s ({len(llir)} LLIR nodes)"),
        ("extract a random genome (mean)", f"{t_random:.2f} s"),
    ]
    print(f"# e-graph build, {args.layers}-layer Llama-3.2-1B shape, decode-step graph; "
          f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, python {platform.python_version()}")
    w = max(len(r[0]) for r in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")


if __name__ == "__main__":
    main()

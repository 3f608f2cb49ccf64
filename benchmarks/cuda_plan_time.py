"""Seconds a CUDA search spends on the host for each candidate, on any machine (no GPU, CuPy or
NVRTC needed): the genetic search runs over the CUDA backend's extraction of a Llama-1B-width
bf16 step, and each candidate is extracted and planned (``plan_graph``) as the search's prepare
does; the candidates' "time" is a stand-in, so the search explores as a real one does.

    python benchmarks/cuda_plan_time.py [--layers 16] [--candidates 30] [--tokens 1 32] [--default-gc]
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--candidates", type=int, default=30)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 32], help="the step's s (one search each)")
    ap.add_argument("--default-gc", action="store_true",
                    help="keep the collector's thresholds (a program raises them while it plans)")
    args = ap.parse_args()

    from llama import model
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config

    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor
    from luminal_fn.optimize.options import SearchOptions
    from luminal_fn.optimize.program import fewer_collections
    from luminal_fn.optimize.search import genetic_search

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=args.layers)
    step = model.make_step(cfg, backend="numpy", output="greedy")
    traced = step.trace(random_weights(cfg, "bfloat16", backend="numpy"),
                        *model.step_inputs(np.arange(32, dtype=np.int32), 0), model.new_cache(cfg, 512, backend="numpy"))
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS)
    print("| s | candidates | extract ms a candidate | plan ms a candidate |")
    print("| --- | --- | --- | --- |")
    for s in args.tokens:
        spent = {"extract": 0.0, "plan": 0.0, "n": 0}

        def evaluate(genome):
            t0 = time.perf_counter()
            graph = ex.extract_keyed(genome)[0]  # (as the search extracts: kept across buckets)
            t1 = time.perf_counter()
            plan = plan_graph(graph, {"s": s, "c": 512}, arch=90)
            spent["extract"] += t1 - t0
            spent["plan"] += time.perf_counter() - t1
            spent["n"] += 1
            return 1e-6 * (1 + len(plan.steps) / 1e4)

        with (contextlib.nullcontext() if args.default_gc else fewer_collections()):
            genetic_search(ex.space(), evaluate, SearchOptions(limit=args.candidates, seed=0),
                           initial=[ex.generic_genome(), (0,) * len(ex.genes), *ex.kernel_genomes()])
        n = spent["n"]
        print(f"| {s} | {n} | {1e3 * spent['extract'] / n:.1f} | {1e3 * spent['plan'] / n:.1f} |", flush=True)


if __name__ == "__main__":
    main()

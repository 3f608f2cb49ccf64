"""How many kernels the CUDA backend would launch, counted on the CPU: the planned steps of a
Llama decode step (16 layers, small dims, bfloat16 weights) and of the DLRM forward, for the
cheapest genome without backend kernels (the search's reference), the all-cheapest genome and
those that read a backend kernel the cheapest inlines (the genomes the search times first).
No GPU needed: plans are pure Python. Launch counts are what the decode step's time tracks
when its kernels are tiny (each costs ~1.3-2 us inside a CUDA graph on an H200).

    python benchmarks/plan_counts.py [--layers 16] [--num-cat 8,32]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import luminal_fn as lf  # noqa: E402
from luminal_fn.backends.cuda import KERNEL_KINDS  # noqa: E402
from luminal_fn.backends.cuda.executable import plan_graph  # noqa: E402
from luminal_fn.optimize.egraph import build_egraph  # noqa: E402
from luminal_fn.optimize.extract import Extractor  # noqa: E402


def counts(traced, dims, donated=()):
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS)
    out = {}
    kernels = [(f"kernels {k + 1}", g) for k, g in enumerate(ex.kernel_genomes())]
    for name, genome in (("reference", ex.generic_genome()), ("cheapest", None), *kernels):
        plan = plan_graph(ex.extract(genome), dims, donated=donated)
        out[name] = (len(plan.steps), Counter(s.label for s in plan.steps).most_common(6))
    return out


def llama(layers: int):
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.model import make_step, new_cache, step_inputs

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=layers, hidden_size=64,
                              intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, vocab_size=256)
    step = make_step(cfg)
    args = (random_weights(cfg, "bfloat16"), *step_inputs([5], 39), new_cache(cfg, 64))
    traced = step.trace(*args)
    cache_leaves = tuple(range(len(lf.tree_leaves(args)) - 2 * layers, len(lf.tree_leaves(args))))
    return counts(traced, {"s": 1, "c": 64}, donated=cache_leaves)


def dlrm(num_cat: int):
    import dlrm as model

    params = model.init_params(num_cat)
    dense, idx = model.make_batch(num_cat, 2048)
    return counts(lf.jit(model.forward).trace(params, dense, idx), {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--num-cat", default="8,32")
    args = ap.parse_args()
    rows = [(f"Llama decode step, {args.layers} layers (s=1, c=64)", llama(args.layers))]
    rows += [(f"DLRM forward, num_cat {n}, batch 2048", dlrm(int(n))) for n in args.num_cat.split(",")]
    for what, res in rows:
        for genome, (n, top) in res.items():
            print(f"{what:48s} {genome:9s} {n:5d} steps  {', '.join(f'{k} {v}' for k, v in top)}")


if __name__ == "__main__":
    main()

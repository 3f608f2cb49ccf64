"""What a second start costs: the Llama step's warm-up (trace, e-graph, search, compile of every
bucket it runs) in a fresh process with an empty search cache, then in fresh processes reading
that cache. Each run is its own Python process, so nothing but the cache folder (and the backend's
own on-disk caches, such as CuPy's kernel cache) carries over.

    python benchmarks/warm_start.py                          # 16 layers at small dims, NumPy
    python benchmarks/warm_start.py --backend cuda --full    # the real 1B shape, bf16 weights

Prints, per run: the warm-up's seconds, whether the e-graph was built, the search's seconds and
how many buckets the cache answered; the process's whole wall time (imports included) beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_start(args) -> dict:
    """The measured part, in the child process."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    sys.path.insert(0, ROOT)
    import dataclasses

    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config
    from llama.generation import LlamaSession, compile_report
    from llama.model import dim_buckets

    import luminal_fn as lf

    cfg = llama_3_2_1b_config()
    if not args.full:
        cfg = dataclasses.replace(cfg, num_hidden_layers=args.layers, hidden_size=256,
                                  intermediate_size=512, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=64, vocab_size=1024)
    backend = lf.backends.get_backend(args.backend)
    weights = random_weights(cfg, args.dtype, backend=backend)
    session = LlamaSession(cfg, weights, max_seq_len=args.max_seq_len,
                           buckets=dim_buckets(args.max_prefill, args.max_seq_len),
                           search={"limit": args.search_graphs, "progress": False},
                           backend=backend, steps=("greedy",))
    warm_up_s = session.warm_up()
    report = compile_report(session.warmed[0])
    return {"warm_up_s": warm_up_s, "egraph_built": report.get("egraph_built"),
            "search_s": report.get("search_s"), "buckets": report.get("buckets"),
            "cached": report.get("cached")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="numpy")
    p.add_argument("--full", action="store_true", help="the real Llama-3.2-1B shape")
    p.add_argument("--layers", type=int, default=16, help="layers at the small dims (without --full)")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--search-graphs", type=int, default=4)
    p.add_argument("--max-prefill", type=int, default=128)
    p.add_argument("--max-seq-len", type=int, default=512)
    p.add_argument("--warm-runs", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(one_start(args)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="warm_start_cache_") as cache:
        env = dict(os.environ, LUMINAL_CACHE_DIR=cache)
        child = [sys.executable, os.path.abspath(__file__), "--child"] + (argv if argv is not None else sys.argv[1:])
        for k in range(1 + args.warm_runs):
            t0 = time.perf_counter()
            out = subprocess.run(child, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if out.returncode != 0:
                print(out.stdout + out.stderr, file=sys.stderr)
                return out.returncode
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row.update(start="cold" if k == 0 else f"warm {k}", process_s=wall)
            rows.append(row)
    shape = "Llama-3.2-1B" if args.full else f"Llama, {args.layers} layers at small dims"
    print(f"{shape}, backend {args.backend}, {args.dtype} weights, search limit {args.search_graphs}")
    print("| start | warm-up s | e-graph built | search s | buckets from the cache | process wall s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['start']} | {r['warm_up_s']:.2f} | {r['egraph_built']} | {r['search_s']:.2f} | "
              f"{r['cached']} of {r['buckets']} | {r['process_s']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

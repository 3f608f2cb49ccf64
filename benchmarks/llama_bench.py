"""Llama-3.2-1B generation speed with random weights (no download): TTFT and TPOT per dtype.

    python benchmarks/llama_bench.py --backend cuda                    # float32 and bfloat16
    python benchmarks/llama_bench.py --backend cuda --dtype bfloat16 --json out.json
    python benchmarks/llama_bench.py --tiny --backend numpy            # the tiny shape, a smoke run

Runs examples/llama_1b.py's ``generate(..., random_weights=True, ignore_eos=True)``: the real
1B shape from the built-in config (or --model-dir's config.json), a synthetic prompt of
--prompt-tokens ids, always --max-new-tokens decode steps. TTFT is the prefill step, TPOT the mean
decode step, both after the search/compile warm-up (as the seed reports them) and after two
rehearsals of the same prompt and three decode steps (the peers' anchor scripts warm up once with
the same prompt; the CUDA backend captures a new prompt length's graph on its second call). Compare with the
peers in ../shared/anchors/llama_anchor.py measured in the same session.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)

import llama_1b  # noqa: E402
from llama.tiny import build_tiny_random  # noqa: E402


def run_one(model_dir, dtype: str, args) -> dict:
    rng_prompt = None
    if args.prompt_tokens:
        import numpy as np

        from llama.config import llama_3_2_1b_config, load_config

        vocab = (load_config(model_dir) if model_dir else llama_3_2_1b_config()).vocab_size
        rng_prompt = np.random.default_rng(args.seed).integers(0, vocab, args.prompt_tokens).tolist()
    t0 = time.perf_counter()
    res = llama_1b.generate(
        model_dir, max_new_tokens=args.max_new_tokens, backend=args.backend, dtype=dtype,
        repetition_penalty=1.0, search_graphs=args.search_graphs,
        max_memory_mib=args.max_memory_mib, max_seq_len=args.max_seq_len, seed=args.seed,
        random_weights=True, prompt_ids=rng_prompt, ignore_eos=True, rehearse=True,
        search=None if args.patience == "default" else llama_1b.search_options(
            args.search_graphs, args.max_memory_mib, args.seed,
            patience=None if args.patience == "none" else int(args.patience)),
        out=sys.stdout if args.verbose else None)
    wall = time.perf_counter() - t0
    decode = res.profiles[1:]
    n = max(1, len(decode))
    return {
        "dtype": dtype, "backend": args.backend or "default", "prompt_tokens": len(res.prompt_ids),
        "new_tokens": len(res.ids), "ttft_ms": res.ttft_ms, "tpot_ms": res.tpot_ms,
        "tpot_exec_ms": 1e3 * sum(p.execute for p in decode) / n,
        "tpot_logits_ms": 1e3 * sum(p.logits for p in decode) / n,
        "weight_load_s": res.timings.get("weight_load_s"), "compile_s": res.timings.get("compile_s"),
        "egraph_built": res.timings.get("egraph_built"),
        "traces": res.trace_count, "compiles": res.compile_count, "wall_s": wall,
        "search_s": res.timings.get("search_s"), "search_stage_s": res.timings.get("search_stage_s"),
        "search_timed": res.timings.get("search_timed"),
        "search_rechecked": res.timings.get("search_rechecked"),
        "cuda_compiles": cuda_compile_counts(args.backend),
    }


def cuda_compile_counts(backend) -> dict | None:
    """What the CUDA backend compiled in this process so far (NVRTC modules, kernels, seconds)."""
    if backend != "cuda":
        return None
    from luminal_fn.backends.cuda import device

    counts = getattr(device, "compile_counts", None)  # (an older library, in an A/B, has none)
    return counts() if counts else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default=None, help="numpy, cuda, mlx (default: the library's choice)")
    p.add_argument("--dtype", default="float32,bfloat16", help="comma-separated: float32, bfloat16")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--prompt-tokens", type=int, default=0,
                   help="synthetic prompt length (0: the example's default for random weights)")
    p.add_argument("--search-graphs", type=int, default=100)
    p.add_argument("--max-memory-mib", type=float, default=1536)
    p.add_argument("--patience", default="default",
                   help="the search's patience: candidates without a gain before a bucket's search stops "
                        "(a number, 'none': always --search-graphs, default: the library's)")
    p.add_argument("--max-seq-len", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", default=None, help="take config.json from here (weights stay random)")
    p.add_argument("--tiny", action="store_true", help="the tiny random shape instead of 1B (smoke run)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--verbose", action="store_true", help="the example's full printout")
    args = p.parse_args(argv)
    if args.patience not in ("default", "none") and not args.patience.isdigit():
        p.error(f"--patience {args.patience!r}: give a number of candidates, 'none' or 'default'")

    tmp = None
    model_dir = args.model_dir
    if args.tiny:
        tmp = tempfile.TemporaryDirectory(prefix="llama_bench_tiny_")
        model_dir = build_tiny_random(tmp.name, seed=args.seed)
    rows = []
    try:
        for dtype in [d.strip() for d in args.dtype.split(",") if d.strip()]:
            print(f"== {dtype} ==", flush=True)
            row = run_one(model_dir, dtype, args)
            rows.append(row)
            print(f"  TTFT: {row['ttft_ms']:.2f} ms", flush=True)
            print(f"  TPOT: {row['tpot_ms']:.2f} ms (exec {row['tpot_exec_ms']:.2f} ms, logits read "
                  f"{row['tpot_logits_ms']:.2f} ms); weight build {row['weight_load_s']:.1f} s, "
                  f"compile/search {row['compile_s']:.1f} s"
                  f"{'' if row['egraph_built'] is not False else ' (every bucket from the search cache)'}",
                  flush=True)
            if row["search_stage_s"]:
                print(f"  search {row['search_s']:.1f} s by stage: " + ", ".join(
                    f"{k} {v:.1f}" for k, v in row["search_stage_s"].items()), flush=True)
                dropped = sum(isinstance(t, str) for ts in (row["search_timed"] or {}).values() for t in ts)
                print(f"  candidates dropped {dropped}, kept on a second sample of inputs "
                      f"{row['search_rechecked'] or 0}", flush=True)
            if row["cuda_compiles"]:
                print("  CUDA compiles so far: " + ", ".join(
                    f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in row["cuda_compiles"].items()), flush=True)
            gc.collect()  # free this dtype's weights before the next
    except llama_1b.ModelInputError as e:
        print(f"llama_bench: error: {e}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()
    print("\n| dtype | backend | prompt | new tokens | TTFT ms | TPOT ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['dtype']} | {r['backend']} | {r['prompt_tokens']} | {r['new_tokens']} | "
              f"{r['ttft_ms']:.2f} | {r['tpot_ms']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": "tiny" if args.tiny else (args.model_dir or "llama-3.2-1b"),
                       "host": platform.node(), "results": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A Llama-3.2-1B prompt step on the CUDA backend at several (prompt, context) pairs, its attention
planned as tiles (lf_attn_tiles, a block of 64 rows) and as one row a block (lf_attn_rows), one
after the other in the same process: where each wins, so the plan can choose between them.

Both run in the bucket a 1000-token prompt gets (prompts of 2..1024 tokens, contexts up to the
cache), so a short prompt after a long context (a chat's next turn) is timed in the bucket it
would really run in.

    python benchmarks/prompt_attention_sweep.py [--dtype bfloat16] [--cases 16@0,16@1000,256@0]

A case ``S@P`` is a prompt of S tokens at positions P..P+S-1 (the context before it: P tokens).
Prints one JSON line a case and mode: the step's median ms over --calls calls (CUDA events
around each call, the host's part included).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import luminal_fn as lf  # noqa: E402
from llama.checkpoint import random_weights  # noqa: E402
from llama.config import llama_3_2_1b_config  # noqa: E402
from llama.model import bucket_limits, dim_buckets, make_step, new_cache, step_inputs  # noqa: E402

# (LUMINAL_CUDA_ATTN_TILES, LUMINAL_CUDA_ATTN_TILES_FROM), read when a bucket is planned: tiles
# whatever the bucket's largest prompt, one row a block, or the default (attentionkernels.TILES_MIN_S)
MODES = {"tiles": ("1", "1"), "rows": ("0", ""), "default": ("1", "")}


def _cases(text: str) -> list:
    out = []
    for item in text.split(","):
        s, _, p = item.partition("@")
        out.append((int(s), int(p or 0)))
    return out


def _attention_kernels(step) -> list:
    """Each prompt-bucket plan's attention: how many steps run lf_attn_tiles, lf_attn_rows, or
    neither (the search may pick the generic products and softmax)."""
    (compiled,) = step.compiled()
    out = []
    for p in compiled.runner.plans.values():
        bucket = getattr(p.executable, "_last_bucket", None)
        if p.dims.get("s") == 1 or bucket is None:
            continue
        texts = [st.source.text for st in bucket.plan.steps if st.label == "attention_rows"]
        out.append({"dims": p.dims, "tiles": sum("lf_attn_tiles<" in t for t in texts),
                    "rows": sum("lf_attn_rows<" in t for t in texts)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-seq-len", type=int, default=2048)
    ap.add_argument("--bucket-prompt", type=int, default=1000, help="the prompt whose buckets are used")
    ap.add_argument("--cases", default="16@0,16@1000,64@0,64@1000,128@0,128@1000,256@0,512@0,1000@0")
    ap.add_argument("--modes", default="tiles,rows")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--search", type=int, default=3, help="candidates timed (llama_bench's default)")
    args = ap.parse_args()
    import cupy as cp

    cfg = llama_3_2_1b_config()
    w = random_weights(cfg, args.dtype, backend="cuda")
    buckets = dim_buckets(*bucket_limits(args.bucket_prompt, 64, args.max_seq_len))
    cases = _cases(args.cases)
    for s, p in cases:
        if s + p > args.max_seq_len or s > buckets["s"][-1][1]:
            raise SystemExit(f"case {s}@{p}: outside the buckets (prompts up to {buckets['s'][-1][1]}, "
                             f"contexts up to {args.max_seq_len})")
    rng = np.random.default_rng(0)
    for mode in args.modes.split(","):
        os.environ["LUMINAL_CUDA_ATTN_TILES"], os.environ["LUMINAL_CUDA_ATTN_TILES_FROM"] = MODES[mode]
        step = make_step(cfg, backend="cuda", buckets=buckets, search=lf.SearchOptions(limit=args.search))
        cache = new_cache(cfg, args.max_seq_len, backend="cuda")
        for s, p in cases:
            inputs = step_inputs(rng.integers(0, cfg.vocab_size, s).tolist(), p)
            for _ in range(2):  # (the first call of the bucket plans, compiles and captures)
                _, cache = step(w, *inputs, cache)
            if (s, p) == cases[0]:
                print(json.dumps({"mode": mode, "attention": _attention_kernels(step)}), flush=True)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            ts = []
            for _ in range(args.calls):
                e0.record()
                _, cache = step(w, *inputs, cache)
                e1.record()
                e1.synchronize()
                ts.append(cp.cuda.get_elapsed_time(e0, e1))
            print(json.dumps({"mode": mode, "prompt": s, "at": p, "ms": round(float(np.median(ts)), 3),
                              "dtype": args.dtype}), flush=True)


if __name__ == "__main__":
    main()

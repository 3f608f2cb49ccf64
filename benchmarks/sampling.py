"""The Llama example's sampler (examples/llama/model.py sample_token: the repetition penalty,
temperature, top-k, top-p, the draw) on one vocabulary row, a token read back to the host per
call, beside Hugging Face's warpers (TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper, torch.multinomial) on the same device. Medians of --reps calls, in ms.

    python benchmarks/sampling.py [--reps 30]             # NumPy backend, torch on the CPU beside
    python3 benchmarks/sampling.py --backend cuda         # CUDA, torch on the GPU beside

Without transformers (or torch) the peer column is empty."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from llama import model  # noqa: E402
from sort import median_ms  # noqa: E402  (benchmarks/sort.py: this folder is the script's path; a
#                                          token read back to the host is the sync)

VOCAB = 128256
# (top_k, top_p): 0 is the whole vocabulary
CASES = [(50, 1.0), (50, 0.9), (0, 0.9), (1, 1.0)]
TEMPERATURE, PENALTY = 0.8, 1.1


def hf_sampler(top_k: int, top_p: float, device: str):
    """Hugging Face's sampling path of generate(do_sample=True) with the same settings, or None."""
    try:
        import torch
        from transformers.generation.logits_process import (RepetitionPenaltyLogitsProcessor,
                                                            TemperatureLogitsWarper, TopKLogitsWarper,
                                                            TopPLogitsWarper)
    except ImportError:
        return None
    steps = [RepetitionPenaltyLogitsProcessor(PENALTY), TemperatureLogitsWarper(TEMPERATURE)]
    steps += [TopKLogitsWarper(top_k)] if top_k else []
    steps += [TopPLogitsWarper(top_p)] if top_p < 1 else []
    gen = torch.Generator(device=device).manual_seed(0)

    def sample(logits, seen_ids):
        scores = logits[-1:]
        for step in steps:
            scores = step(seen_ids, scores)
        probs = torch.softmax(scores, dim=-1)
        return int(torch.multinomial(probs, 1, generator=gen).item())

    return sample


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--backend", default="numpy", choices=["numpy", "cuda"])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    logits = (2 * rng.standard_normal((1, VOCAB))).astype(np.float32)
    seen = np.zeros(VOCAB, bool)
    seen_ids = rng.integers(0, VOCAB, 64)
    seen[seen_ids] = True
    device = "cuda" if args.backend == "cuda" else "cpu"
    if args.backend == "cuda":
        import cupy as cp

        dev_logits = cp.asarray(logits)
    else:
        dev_logits = logits
    try:
        import torch

        t_logits = torch.from_numpy(logits).to(device)
        t_seen = torch.from_numpy(seen_ids[None]).to(device)
    except ImportError:
        torch = None
    print(f"| {args.backend}: top_k, top_p (vocab {VOCAB}, temperature {TEMPERATURE}, penalty {PENALTY}) "
          f"| compile s | luminal_fn ms a token | HF warpers + multinomial ({device}) ms |")
    print("| --- | --- | --- | --- |")
    for top_k, top_p in CASES:
        fn = model.make_sampler(top_k or VOCAB, TEMPERATURE, top_p, PENALTY, backend=args.backend)
        draws = rng.random((args.reps + 2, 1), dtype=np.float32)
        it = iter(draws)
        t0 = time.perf_counter()
        int(np.asarray(fn(dev_logits, next(it), seen))[0])
        compile_s = time.perf_counter() - t0
        ours = median_ms(lambda: int(np.asarray(fn(dev_logits, next(it), seen))[0]), args.reps)
        hf = hf_sampler(top_k, top_p, device) if torch is not None else None
        peer = f"{median_ms(lambda: hf(t_logits, t_seen), args.reps):.3f}" if hf else "-"
        print(f"| {top_k or 'all'}, {top_p} | {compile_s:.1f} | {ours:.3f} | {peer} |", flush=True)


if __name__ == "__main__":
    main()

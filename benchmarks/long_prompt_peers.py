"""A peer's time to first token for a long prompt, beside llama_bench.py's (the anchors in
../shared/anchors stop at 512 cached tokens): Hugging Face transformers' LlamaForCausalLM in
the Llama-3.2-1B shape with random weights, eager, its default attention (PyTorch SDPA),
``generate(max_new_tokens=1)`` on one prompt of N random tokens, the median of 5 timed calls
after 2 warm-up ones, each synchronised.

    python benchmarks/long_prompt_peers.py [--prompt-tokens 1000] [--dtype bfloat16]

Prints one JSON line. Needs torch with CUDA and transformers (the GPU machine has both).
"""
from __future__ import annotations

import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    args = ap.parse_args()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5,
                      rope_theta=500000.0, max_position_embeddings=max(2048, args.prompt_tokens + 16),
                      tie_word_embeddings=True)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(getattr(torch, args.dtype)).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, args.prompt_tokens), device="cuda")

    def ttft() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    with torch.no_grad():
        for _ in range(2):
            ttft()
        times = sorted(ttft() for _ in range(5))
    print(json.dumps({"system": "HF transformers eager (SDPA)", "dtype": args.dtype,
                      "prompt": args.prompt_tokens, "ttft_ms": round(1e3 * times[2], 3),
                      "ttft_ms_all": [round(1e3 * t, 3) for t in times],
                      "attn_implementation": getattr(model.config, "_attn_implementation", "?"),
                      "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()

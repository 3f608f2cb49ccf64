"""Llama-3.2-1B-Instruct text generation with luminal_fn: the counterpart of the seed's
``crates/luminal_metal/examples/llama_1b.rs``.

The model is one pure function (examples/llama/model.py) jitted once with dynamic dims ``s`` (new
tokens) and ``c`` (context) and the seed's dim buckets; the KV cache lives on the device, is
written with ``lf.nn.scatter_rows`` and read with ``lf.nn.gather_rows``, and is donated and returned
every step. Prefill and every decode step reuse the one compiled graph.

    python examples/llama_1b.py --tiny-random                    # a tiny random model, seconds
    python examples/llama_1b.py                                  # unsloth/Llama-3.2-1B-Instruct
    python examples/llama_1b.py --model-dir DIR --dtype bfloat16
    python examples/llama_1b.py --random-weights --backend cuda  # the 1B shape, no download

From Python: ``ids, text, ttft_ms, tpot_ms = generate(model_dir, prompt)``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the llama/ helpers beside this file

from llama import checkpoint, model  # noqa: E402
from llama.config import LlamaConfig, ModelInputError, llama_3_2_1b_config, load_config  # noqa: E402
from llama.generation import (GenerationResult, LlamaSession, Sampler, check_sampling, compile_report,  # noqa: E402
                              generate_ids, ttft_tpot_ms)
from llama.hub import DEFAULT_REPO, resolve_repo  # noqa: E402
from llama.tiny import build_tiny_random  # noqa: E402
from llama.tokenizer import (DEFAULT_PROMPT, StreamDecoder, encode_chat, load_tokenizer,  # noqa: E402
                             stop_token_ids)

__all__ = ["generate", "GenerationResult", "ModelInputError", "main"]

SEARCH_GRAPHS = 100  # the seed's search size per bucket
TINY_SEARCH_GRAPHS = 4  # --tiny-random's default: seconds, not minutes, on a CPU
RANDOM_PROMPT_TOKENS = 32  # prompt length for --random-weights without a tokenizer (about the seed's)


def search_options(limit: int, max_memory_mib: float | None, seed: int, **more):
    """lf.SearchOptions(limit=..., max_memory=... bytes, seed=..., **more)."""
    import luminal_fn as lf

    mem = None if max_memory_mib is None else int(max_memory_mib * 2**20)
    return lf.SearchOptions(limit=limit, max_memory=mem, seed=seed, **more)


def _check_args(dtype, max_new_tokens, max_seq_len, repetition_penalty, search_graphs, max_memory_mib,
                top_k=0, temperature=1.0, top_p=1.0):
    if dtype not in checkpoint.LOAD_DTYPES:
        raise ModelInputError(f"dtype {dtype!r} is not supported; use one of "
                              f"{', '.join(checkpoint.LOAD_DTYPES)}")
    if dtype == "bfloat16" and checkpoint.BF16 is None:
        raise ModelInputError("dtype bfloat16 needs the ml_dtypes package (pip install ml_dtypes)")
    for name, v, lo in (("max_new_tokens", max_new_tokens, 0), ("max_seq_len", max_seq_len, 1),
                        ("search_graphs", search_graphs, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ModelInputError(f"{name} must be an int >= {lo}, got {v!r}")
    if not repetition_penalty > 0:
        raise ModelInputError(f"repetition_penalty must be > 0 (1.0 is plain greedy), got {repetition_penalty!r}")
    if max_memory_mib is not None and not max_memory_mib > 0:
        raise ModelInputError(f"max_memory_mib must be > 0, got {max_memory_mib!r}")
    check_sampling(top_k, top_p, temperature)


def _backend(backend):
    import luminal_fn as lf

    try:
        return lf.get_backend(backend)
    except Exception as e:  # unknown name, or the library of a known one is missing
        raise ModelInputError(f"backend {backend!r} cannot be used: {e}; available: "
                              f"{', '.join(lf.available_backends())}") from None


def generate(model_dir: str | None, prompt: str = DEFAULT_PROMPT, max_new_tokens: int = 96,
             backend=None, *, dtype: str = "float32", repetition_penalty: float = 1.05,
             search_graphs: int = SEARCH_GRAPHS, max_memory_mib: float | None = 1536,
             max_seq_len: int = 2048, seed: int = 0, chat: bool = True,
             random_weights: bool = False, prompt_ids: list | None = None,
             ignore_eos: bool = False, search=None, out=None, rehearse: bool = False,
             top_k: int = 0, temperature: float = 1.0, top_p: float = 1.0) -> GenerationResult:
    """Generate from the Llama checkpoint in ``model_dir`` (Hugging Face layout): greedily, or,
    with ``top_k`` > 0 or ``top_p`` < 1, by sampling on the backend's device as Hugging Face's
    generate(do_sample=True) does: the repetition penalty, ``temperature``, the ``top_k`` most
    likely tokens (0: all), then the nucleus of probability ``top_p`` (seeded by ``seed``).
    A ``temperature`` other than 1 alone samples from the whole vocabulary.

    Returns a :class:`GenerationResult`; ``ids, text, ttft_ms, tpot_ms = generate(...)``.
    ``random_weights``: random weights of the config's shape instead of the checkpoint (with
    ``model_dir=None`` the built-in Llama-3.2-1B config, and token ids instead of text).
    ``prompt_ids`` replaces the encoded prompt; ``ignore_eos`` always runs ``max_new_tokens``
    steps (for speed runs); ``search`` overrides the SearchOptions built from ``search_graphs``,
    ``max_memory_mib`` and ``seed``; ``out`` (a text stream, e.g. sys.stdout) receives the seed's
    printout and the streamed text; ``rehearse`` runs the prompt and three decode steps twice
    before the timed generation (the peers' anchor scripts warm up once with the same prompt;
    here the first call at a new prompt length picks cuBLAS algorithms, the second captures its
    CUDA graph). Bad input raises ModelInputError before any long work."""
    say = (lambda *a, **k: print(*a, **k, file=out, flush=True)) if out is not None else (lambda *a, **k: None)
    _check_args(dtype, max_new_tokens, max_seq_len, repetition_penalty, search_graphs, max_memory_mib,
                top_k, temperature, top_p)
    be = _backend(backend)
    timings: dict = {}

    # ---- everything that can be wrong is checked here, reading only small files and headers ----
    tokenizer, ckpt = None, None
    if model_dir is not None:
        if not os.path.isdir(model_dir):
            raise ModelInputError(f"model directory {model_dir!r} does not exist; pass a folder "
                                  "with config.json, model.safetensors and tokenizer.json, or use "
                                  "--repo, --tiny-random or --random-weights")
        config: LlamaConfig = load_config(model_dir)
        if not random_weights or os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
            tokenizer = load_tokenizer(model_dir)
        if not random_weights:
            ckpt = checkpoint.Checkpoint(model_dir)
            ckpt.check(config, dtype)
    elif random_weights:
        config = llama_3_2_1b_config()
    else:
        raise ModelInputError("generate needs a model_dir (or random_weights=True)")
    stop = set() if ignore_eos else stop_token_ids(config, tokenizer, model_dir)
    if prompt_ids is None:
        if tokenizer is not None:
            prompt_ids = (encode_chat(tokenizer, prompt) if chat else
                          list(tokenizer.encode(prompt, add_special_tokens=False).ids))
        else:
            rng = np.random.default_rng(seed)
            first = [config.bos_token_id] if config.bos_token_id is not None else []
            prompt_ids = first + rng.integers(0, config.vocab_size, RANDOM_PROMPT_TOKENS - len(first)).tolist()
    prompt_ids = [int(t) for t in prompt_ids]
    if not prompt_ids:
        raise ModelInputError("the prompt is empty after tokenization; give some text")
    bad = [t for t in prompt_ids if not 0 <= t < config.vocab_size]
    if bad:
        raise ModelInputError(f"prompt token ids {bad[:4]} are outside the vocabulary (size {config.vocab_size})")
    check_sampling(top_k, top_p, temperature, config.vocab_size)
    if len(prompt_ids) > max_seq_len:
        raise ModelInputError(
            f"the prompt is {len(prompt_ids)} tokens, longer than max_seq_len {max_seq_len}; "
            f"shorten the prompt or raise --max-seq-len")
    max_prefill, max_context = model.bucket_limits(len(prompt_ids), max_new_tokens, max_seq_len)
    buckets = model.dim_buckets(max_prefill, max_context)
    if search is None:
        # --max-memory-mib is the seed's budget for the buffers a candidate allocates (the
        # library's max_memory counts intermediates and outputs, not the weights or the cache)
        search = search_options(search_graphs, max_memory_mib, seed)

    # ---- the long work: weights, compile (search), generation ------------------------------------
    say(f"Using model directory: {model_dir}" if model_dir else
        "Using the built-in Llama-3.2-1B config with random weights")
    say(f"Backend: {be.name} ({be.device_name()}), dtype {dtype}, {config.num_hidden_layers} layers, "
        f"hidden {config.hidden_size}, vocab {config.vocab_size}")
    say("Loading weights..." if not random_weights else "Building random weights...")
    t0 = time.perf_counter()
    if random_weights:
        weights = checkpoint.random_weights(config, dtype, seed=seed, backend=be)
    else:
        weights = checkpoint.load_weights(model_dir, config, dtype, backend=be, checkpoint=ckpt)
    timings["weight_load_s"] = time.perf_counter() - t0
    say(f"  Weight load: {timings['weight_load_s']:.2f} s")

    # plain greedy decoding picks its tokens inside the step (on the device); a penalty needs
    # the logits on the host, sampling a second jitted call on the device
    sampling = top_k > 0 or top_p < 1.0 or temperature != 1.0
    greedy_on_device = repetition_penalty == 1.0 and not sampling
    session = LlamaSession(config, weights, max_seq_len=max_seq_len, buckets=buckets,
                           search=search, backend=be, steps=("greedy",) if greedy_on_device else ("logits",))
    sampler = (Sampler(config.vocab_size, top_k, top_p, temperature, repetition_penalty, seed, backend=be,
                       search=search, buckets=buckets) if sampling else None)
    step = session.warmed[0]
    say(f"Compiling (buckets s {buckets['s']}, c {buckets['c']})...")
    timings["compile_s"] = session.warm_up() + (sampler.warm_up() if sampler is not None else 0.0)
    report = compile_report(step)
    timings.update(report)
    if "egraph_build_s" in report:
        say(f"  E-graph build: {report['egraph_build_s']:.2f} s ({report['eclasses']} e-classes, "
            f"{report['enodes']} e-nodes)")
    elif report.get("egraph_built") is False:
        say("  E-graph: not built (every bucket's kernels from the search cache)")
    if "search_s" in report:
        say(f"  Search: {report['search_s']:.2f} s ({report['buckets']} bucket combinations, "
            f"{report['candidates']} candidates timed, {report['cached']} from the search cache)")
        if report.get("search_stage_s"):
            say("    by stage: " + ", ".join(f"{name} {s:.2f} s" for name, s in report["search_stage_s"].items()))
    stages = "Trace + e-graph build + search + compile" if report.get("egraph_built", True) else "Trace + compile"
    say(f"  {stages}: {timings['compile_s']:.2f} s "
        f"(traces {step.trace_count}, compiles {step.compile_count})")

    if rehearse:
        for _ in range(2):
            generate_ids(session, prompt_ids, min(3, max_new_tokens), stop, repetition_penalty, sampler=sampler)
    say(f"Prompt: {len(prompt_ids)} tokens, generating up to {max_new_tokens} tokens")
    decoder = StreamDecoder(tokenizer)
    on_token = (lambda t: say(decoder.push(t), end="")) if out is not None else decoder.push
    ids, reason, profiles = generate_ids(session, prompt_ids, max_new_tokens, stop,
                                         repetition_penalty, on_token=on_token, sampler=sampler)
    say(decoder.finish())
    ttft, tpot = ttft_tpot_ms(profiles)
    result = GenerationResult(ids=ids, text=decoder.text, ttft_ms=ttft, tpot_ms=tpot,
                              prompt_ids=prompt_ids, stop_reason=reason, profiles=profiles,
                              timings=timings, trace_count=step.trace_count,
                              compile_count=step.compile_count)
    say(f"  TTFT: {ttft:.2f} ms")
    say(f"  TPOT: {tpot:.2f} ms")
    say(f"  {result.profile_line()}")
    say(f"  Generated {len(ids)} tokens (stopped: {reason}); traces {result.trace_count}, "
        f"compiles {result.compile_count}")
    return result


# ---- command line ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    src = p.add_argument_group("model")
    src.add_argument("--model-dir", help="a Hugging Face Llama folder (config.json, model.safetensors "
                     "or its sharded index, tokenizer.json)")
    src.add_argument("--repo", default=DEFAULT_REPO, help="Hugging Face repo id, used when --model-dir "
                     "is not given (from the local cache, else downloaded)")
    src.add_argument("--tiny-random", action="store_true", help="build a tiny random Llama in a temp "
                     "dir and generate from it (seconds, no download)")
    src.add_argument("--random-weights", action="store_true", help="random weights of the real shape "
                     "(the built-in Llama-3.2-1B config, or --model-dir's config.json)")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--backend", default=None, help="numpy, cuda, mlx (default: $LUMINAL_BACKEND, "
                   "else CUDA when a GPU is visible, else numpy)")
    p.add_argument("--dtype", default="float32", choices=checkpoint.LOAD_DTYPES,
                   help="storage of the weight matrices (activations and the cache are float32)")
    p.add_argument("--repetition-penalty", type=float, default=1.05, help="1.0 is plain greedy")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens on the "
                   "device (0: no cut; greedy decoding unless --top-p or --temperature is given)")
    p.add_argument("--top-p", type=float, default=1.0, help="sample from the most likely tokens whose "
                   "probability reaches p (nucleus sampling; after --top-k when both are given)")
    p.add_argument("--temperature", type=float, default=1.0, help="the sampling's temperature (alone: "
                   "sampling from the whole vocabulary)")
    p.add_argument("--search-graphs", type=int, default=None, help="candidates timed per bucket "
                   f"(default {SEARCH_GRAPHS}, as the seed; {TINY_SEARCH_GRAPHS} with --tiny-random)")
    p.add_argument("--max-memory-mib", type=float, default=1536, help="memory budget of a candidate")
    p.add_argument("--max-seq-len", type=int, default=2048, help="KV cache rows")
    p.add_argument("--seed", type=int, default=0, help="random weights and search seed")
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-new-tokens")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    out = sys.stdout
    if args.search_graphs is None:  # the tiny model is a seconds-long demo: a short search
        args.search_graphs = TINY_SEARCH_GRAPHS if args.tiny_random else SEARCH_GRAPHS
    kw = dict(prompt=args.prompt, max_new_tokens=args.max_new_tokens, backend=args.backend,
              dtype=args.dtype, repetition_penalty=args.repetition_penalty,
              search_graphs=args.search_graphs, max_memory_mib=args.max_memory_mib,
              max_seq_len=args.max_seq_len, seed=args.seed, ignore_eos=args.ignore_eos, out=out,
              top_k=args.top_k, temperature=args.temperature, top_p=args.top_p)
    try:
        if args.tiny_random:
            with tempfile.TemporaryDirectory(prefix="llama_tiny_random_") as tmp:
                t0 = time.perf_counter()
                build_tiny_random(tmp, seed=args.seed)
                print(f"Built a tiny random Llama in {time.perf_counter() - t0:.2f} s (random "
                      "weights: expect gibberish text)", file=out)
                generate(tmp, random_weights=args.random_weights, **kw)
        elif args.random_weights:
            generate(args.model_dir, random_weights=True, **kw)
        else:
            _check_args(args.dtype, args.max_new_tokens, args.max_seq_len, args.repetition_penalty,
                        args.search_graphs, args.max_memory_mib, args.top_k, args.temperature, args.top_p)
            model_dir = args.model_dir or resolve_repo(args.repo)
            generate(model_dir, **kw)
    except ModelInputError as e:
        print(f"llama_1b: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

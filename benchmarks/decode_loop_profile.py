"""Where the time between two generated tokens goes (Llama-1B, random weights, CUDA): the decode
step alone, with and without the greedy pick in its graph, the pipelined loop's host time per
token (queueing the step that picks) and its device time per token (CUDA events around queued tokens), against
the wall time per token that TPOT reports, and the step with its inputs on the device already
(what the host arrays' uploads add). A wall time above the device time means the host
serialises something.

    python benchmarks/decode_loop_profile.py [--dtype bfloat16] [--tokens 48] [--max-context 512]
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import luminal_fn as lf  # noqa: E402
from llama import model  # noqa: E402
from llama.checkpoint import random_weights  # noqa: E402
from llama.config import llama_3_2_1b_config  # noqa: E402
from llama.generation import LlamaSession, generate_ids_pipelined  # noqa: E402


def add_loop_args(ap, tokens: int) -> None:
    """The options of a decode loop's session (shared with decode_timeline.py)."""
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tokens", type=int, default=tokens)
    ap.add_argument("--search", type=int, default=3)
    ap.add_argument("--max-context", type=int, default=512,
                    help="the decode bucket's largest context (llama_bench's prompt 32 + 64 tokens: 128)")


def warm_session(args, steps=model.STEP_OUTPUTS, config=None, backend="cuda") -> LlamaSession:
    """Llama-3.2-1B (or ``config``) with random ``args.dtype`` weights on ``backend``, ``steps``
    searched and compiled for a prompt bucket up to 64 tokens and a decode bucket up to
    ``args.max_context``."""
    cfg = config or llama_3_2_1b_config()
    session = LlamaSession(cfg, random_weights(cfg, args.dtype, backend=backend), max_seq_len=512,
                           buckets=model.dim_buckets(64, args.max_context), search=lf.SearchOptions(limit=args.search),
                           backend=backend, steps=steps)
    session.warm_up()
    return session


def main():
    ap = argparse.ArgumentParser()
    add_loop_args(ap, tokens=48)
    args = ap.parse_args()
    import cupy as cp

    session = warm_session(args)
    prompt = list(range(1, 33))
    collections = []  # (generation, ms) of the collector's passes, to tell its pauses from ours
    started = [0.0]

    def on_gc(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collections.append((info["generation"], 1e3 * (time.perf_counter() - started[0])))

    gc.callbacks.append(on_gc)
    for k in range(8):  # the prefill alone (TTFT without the first decode step queued behind it)
        session.reset()
        collections.clear()
        t0 = time.perf_counter()
        row = np.asarray(session._logits(prompt))[-1]
        full = [f"{ms:.1f}" for g, ms in collections if g == 2]
        print(f"prefill of {len(prompt)} tokens, call {k + 1}: {1e3 * (time.perf_counter() - t0):.2f} ms "
              f"(logits row {row.shape}; {len(collections)} collections"
              + (f", full ones {', '.join(full)} ms)" if full else ")"))
    gc.callbacks.remove(on_gc)
    t0 = time.perf_counter()
    gc.collect()
    print(f"a full collection now: {1e3 * (time.perf_counter() - t0):.1f} ms over {len(gc.get_objects())} objects")
    ids, _, profiles = generate_ids_pipelined(session, prompt, args.tokens)
    print(f"TTFT of the pipelined loop: {1e3 * profiles[0].total:.2f} ms")
    dec = profiles[1:]
    wall = 1e3 * np.mean([p.total for p in dec])
    print(f"pipelined loop: {wall:.3f} ms/token wall (queue {1e3 * np.mean([p.execute for p in dec]):.3f} ms, "
          f"wait {1e3 * np.mean([p.logits for p in dec]):.3f} ms)")

    # device time per token: the same chain of greedy steps, events around it
    stream = cp.cuda.get_current_stream()
    session.reset()
    token = session.launch(prompt)
    cp.cuda.runtime.deviceSynchronize()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    n = args.tokens
    t0 = time.perf_counter()
    e0.record(stream)
    for _ in range(n):
        token = session.launch(token)
    e1.record(stream)
    t1 = time.perf_counter()
    e1.synchronize()
    t2 = time.perf_counter()
    print(f"{n} tokens queued back to back: host {1e3 * (t1 - t0) / n:.3f} ms/token, device "
          f"{cp.cuda.get_elapsed_time(e0, e1) / n:.3f} ms/token, wall {1e3 * (t2 - t0) / n:.3f} ms/token")

    # the parts alone, each queued n times between events
    step_args = model.step_inputs([0], 40)
    dev_args = tuple(cp.asarray(a) for a in step_args)  # uploaded once: what a step costs without its uploads

    def step(inputs, jitted=session.step):
        _, session.cache = jitted(session.weights, *inputs, session.cache)

    for what, call in (("step inputs (host arrays)", lambda: model.step_inputs([0], 40)),
                       ("decode step, the same inputs", lambda: step(step_args)),
                       ("decode step with its greedy pick, the same inputs",
                        lambda: step(step_args, session.greedy_step)),
                       ("decode step, the same inputs already on the device", lambda: step(dev_args))):
        cp.cuda.runtime.deviceSynchronize()
        e0.record(stream)
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        t1 = time.perf_counter()
        e1.record(stream)
        e1.synchronize()
        print(f"{what}: host {1e3 * (t1 - t0) / n:.3f} ms, device {cp.cuda.get_elapsed_time(e0, e1) / n:.3f} ms")

if __name__ == "__main__":
    main()

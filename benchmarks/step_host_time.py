"""A Llama decode step's host time a call, by the kind of its step inputs, and where it goes.

The decode step (Llama-3.2-1B shape, random weights, its weights and cache lf.Arrays on the
backend) is called with the same step inputs (token, position, cache row, mask at c = 40) as
NumPy arrays, as lf.Arrays already on the backend, and on CUDA as CuPy arrays; ``--calls`` calls
of each kind are queued back to back, twice, the kinds interleaved (so every kind's dispatch
must keep its own matcher). Printed: the host time a call (the time to queue it) and, on CUDA,
the device time a call between events around the queue; then a cProfile of the calls with host
and with lf.Array inputs, sorted by own time, so the frontend (matcher, result builder), the
executable (parameter table, graph launch) and CuPy's own calls can be told apart.

    python benchmarks/step_host_time.py                        # CUDA, Llama-3.2-1B bf16
    python benchmarks/step_host_time.py --backend numpy --tiny-layers 16   # anywhere (tiny widths)

On the NumPy backend a call runs the step before it returns, so its "host time" is the step.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import luminal_fn as lf  # noqa: E402
from decode_loop_profile import warm_session  # noqa: E402
from llama import model  # noqa: E402
from llama.config import config_from_dict  # noqa: E402
from llama.tiny import TINY_VOCAB, tiny_config_dict  # noqa: E402

CONTEXT = 40  # the cached tokens before the step


def session_for(args):
    """The greedy step's session: decode_loop_profile's, with the tiny widths if asked."""
    config = None
    if args.tiny_layers:
        raw = tiny_config_dict(TINY_VOCAB, 1, [2])
        raw["num_hidden_layers"] = args.tiny_layers
        config, args.dtype = config_from_dict(raw, source="the tiny config"), "float32"
    return warm_session(args, steps=("greedy",), config=config, backend=args.backend)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", help="the 1B weights' dtype")
    ap.add_argument("--search", type=int, default=3)
    ap.add_argument("--max-context", type=int, default=512, help="the decode bucket's largest context")
    ap.add_argument("--tiny-layers", type=int, default=0,
                    help="the tiny model's widths with this many layers (float32) instead of the 1B model")
    ap.add_argument("--calls", type=int, default=32)
    ap.add_argument("--top", type=int, default=22, help="rows of each cProfile listing")
    args = ap.parse_args()
    session = session_for(args)
    step_args = model.step_inputs([0], CONTEXT)
    kinds = {"host arrays": step_args,
             "lf Arrays": tuple(lf.device_put(a, args.backend) for a in step_args)}
    cp = None
    if args.backend == "cuda":
        import cupy as cp

        kinds["CuPy arrays"] = tuple(cp.asarray(a) for a in step_args)

    def step(inputs, jitted=session.greedy_step):
        _, session.cache = jitted(session.weights, *inputs, session.cache)

    def settle():
        if cp is not None:
            cp.cuda.runtime.deviceSynchronize()

    n = args.calls
    print(f"backend {args.backend}, {'tiny widths, %d layers' % args.tiny_layers if args.tiny_layers else 'Llama-3.2-1B ' + args.dtype}, "
          f"{n} calls queued a row, c = {CONTEXT}")
    for _ in range(2):
        for what, ins in kinds.items():
            step(ins)
            settle()
            if cp is not None:
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record()
            t0 = time.perf_counter()
            for _ in range(n):
                step(ins)
            host = (time.perf_counter() - t0) / n
            line = f"{what}: host {1e3 * host:.3f} ms a call"
            if cp is not None:
                e1.record()
                e1.synchronize()
                line += f", device {cp.cuda.get_elapsed_time(e0, e1) / n:.3f} ms"
            print(line)
    for what in ("host arrays", "lf Arrays"):
        settle()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n):
            step(kinds[what])
        pr.disable()
        settle()
        print(f"---- cProfile, {what}, {n} calls (own time first)")
        pstats.Stats(pr).sort_stats("tottime").print_stats(args.top)
    token = np.asarray(session.greedy_step(session.weights, *kinds["lf Arrays"], session.cache)[0])
    print(f"(a last step's token: {token.tolist()})")


if __name__ == "__main__":
    main()

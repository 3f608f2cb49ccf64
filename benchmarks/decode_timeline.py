"""The device timeline of the pipelined decode loop (Llama-1B, random weights, CUDA): every kernel,
copy and idle gap between two generated tokens, recorded by CUPTI through torch.profiler (which
sees CuPy's kernels and graph replays as well as its own). It answers what the wall time per
token spends beyond the step's kernels: the uploads, the greedy pick (in the step's graph), the
gaps at graph and copy boundaries.

    python benchmarks/decode_timeline.py [--dtype bfloat16] [--tokens 24] [--max-context 512]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from decode_loop_profile import add_loop_args, warm_session  # noqa: E402
from llama.generation import generate_ids_pipelined  # noqa: E402  (decode_loop_profile adds examples/)

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def short_name(name: str) -> str:
    """A kernel's name without template arguments or parameters; copies keep their direction."""
    name = re.sub(r"^void ", "", re.sub(r"<.*", "", name.split("(")[0]).strip())
    return name[:60]


def device_events(trace_path: str) -> list:
    """(start us, duration us, short name, category) of every device activity, by start."""
    with open(trace_path) as f:
        trace = json.load(f)
    rows = [(float(e["ts"]), float(e.get("dur", 0.0)),
             short_name(e["name"]) if e["cat"] == "kernel" else e["name"][:60], e["cat"])
            for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES]
    return sorted(rows)


def report(events: list, tokens: int, top: int) -> None:
    """What one token's window holds: busy and idle time, the gaps by their neighbours, the copies
    and the kernels by name (each summed over the window, then divided by the tokens)."""
    span = events[-1][0] + events[-1][1] - events[0][0]
    busy = sum(d for _, d, _, _ in events)
    gaps = collections.defaultdict(lambda: [0, 0.0])
    for (t0, d0, n0, _), (t1, _, n1, _) in zip(events, events[1:]):
        gap = t1 - (t0 + d0)
        if gap > 0.3:
            g = gaps[(n0, n1)]
            g[0] += 1
            g[1] += gap
    by_name = collections.defaultdict(lambda: [0, 0.0, ""])
    for _, d, n, cat in events:
        r = by_name[n]
        r[0] += 1
        r[1] += d
        r[2] = cat
    print(f"{len(events)} device activities over {tokens} tokens: {span / tokens:.1f} us a token, "
          f"busy {busy / tokens:.1f} us (activities may overlap), idle gaps "
          f"{sum(g[1] for g in gaps.values()) / tokens:.1f} us")
    print(f"idle gaps over 0.3 us, by the activities around them (us a token; count a token):")
    for (n0, n1), (c, total) in sorted(gaps.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {total / tokens:7.2f} us  x{c / tokens:5.1f}  {n0} -> {n1}")
    print("activities by name (us a token; count a token):")
    for n, (c, total, cat) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {total / tokens:7.2f} us  x{c / tokens:5.1f}  [{cat}] {n}")


def main():
    ap = argparse.ArgumentParser()
    add_loop_args(ap, tokens=24)
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    session = warm_session(args, steps=("greedy",))  # the pipelined loop's step only
    prompt = list(range(1, 33))
    generate_ids_pipelined(session, prompt, args.tokens)  # warm: every graph captured
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _, _, profiles = generate_ids_pipelined(session, prompt, args.tokens + 1)
        torch.cuda.synchronize()
    wall = 1e3 * np.mean([p.total for p in profiles[1:]])
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    events = device_events(path)
    # the decode tokens only: after the prefill's greedy pick copied its token to the host
    first_dtoh = next(i for i, e in enumerate(events) if "DtoH" in e[2])
    print(f"max context {args.max_context}: the pipelined loop's wall time {wall:.3f} ms a token "
          f"(timed under the profiler)")
    report(events[first_dtoh + 1:], args.tokens, args.top)


if __name__ == "__main__":
    main()

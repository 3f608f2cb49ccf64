"""Where a Llama-1B decode step (or a DLRM forward) spends its GPU time on the CUDA backend: the step's median wall
time, whether it replays as one CUDA graph, and every step timed alone inside a CUDA graph (host cuBLAS steps included).

    python benchmarks/cuda_step_profile.py [--dtype bfloat16] [--context 40] [--context-bucket 2048] [--top 12]
    python benchmarks/cuda_step_profile.py --prefill 32      # the prompt's step instead (s = 32)
    python benchmarks/cuda_step_profile.py --prefill 32 --host-profile 20   # and the host's share
    python benchmarks/cuda_step_profile.py --model dlrm --num-cat 8
    python benchmarks/cuda_step_profile.py --trace   # and one replay timed block by block
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kernel_trace  # noqa: E402
import luminal_fn as lf  # noqa: E402
from llama.checkpoint import random_weights  # noqa: E402
from llama.config import llama_3_2_1b_config  # noqa: E402
from llama.model import bucket_limits, dim_buckets, make_step, new_cache, step_inputs  # noqa: E402
from luminal_fn.backends.cuda.plan import KernelStep  # noqa: E402


def _median_ms(call, cp, n=20) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        cp.cuda.runtime.deviceSynchronize()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[n // 2] * 1e3


def llama_bucket(args, cp):
    """The decode bucket's executable after a prefill and a few decode steps (with --prefill N,
    the prefill bucket's after a few prompts of N tokens)."""
    cfg = llama_3_2_1b_config()
    w = random_weights(cfg, args.dtype, backend="cuda")
    # llama_bench's buckets for its default run (prompt 32, 64 new tokens, cache 512): with the
    # same search cache this profiles the genome the benchmark's search chose
    buckets = dim_buckets(*bucket_limits(max(32, args.prefill), 64, args.max_seq_len))
    if args.context_bucket:  # a longer decode bucket (where the attention's keys may be split)
        buckets["c"] = [(1, 1), (2, args.context_bucket, 16)]
    top = buckets["c"][-1][1]
    if not 2 <= args.context <= top:
        raise SystemExit(f"--context {args.context}: the decode bucket covers contexts 2..{top}")
    step = make_step(cfg, backend="cuda", buckets=buckets, search=lf.SearchOptions(limit=args.search))
    state = {"cache": new_cache(cfg, max(512, top), backend="cuda")}
    _, state["cache"] = step(w, *step_inputs(list(range(32)), 0), state["cache"])
    if args.prefill:
        decode, what = step_inputs(list(range(args.prefill)), 0), f"prefill step (s={args.prefill})"
    else:
        decode, what = step_inputs([5], args.context - 1), f"decode step (s=1, c={args.context})"

    def one():
        _, state["cache"] = step(w, *decode, state["cache"])

    for _ in range(3):
        one()
    print(f"{what} median {_median_ms(one, cp):.3f} ms over 20")
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        one()
    t1 = time.perf_counter()
    cp.cuda.runtime.deviceSynchronize()
    t2 = time.perf_counter()
    print(f"20 steps back to back: host {1e3 * (t1 - t0) / 20:.3f} ms/step, "
          f"with the device {1e3 * (t2 - t0) / 20:.3f} ms/step")
    if args.host_profile:  # where the host's part of a call goes (20 calls, by own time)
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(lambda: [one() for _ in range(20)])
        cp.cuda.runtime.deviceSynchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.host_profile)
    logits, state["cache"] = step(w, *decode, state["cache"])
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        np.asarray(logits)[-1]
    print(f"reading the logits row to the host: {1e3 * (time.perf_counter() - t0) / 20:.3f} ms")
    (compiled,) = step.compiled()
    plan = next(p for p in compiled.runner.plans.values()
                if (p.dims.get("s") == 1) != bool(args.prefill) and p.dims.get("c") != 1)
    for bucket, cost in compiled.cost().items():  # which candidates ran, and why others were dropped
        timed = [f"{t * 1e3:.3f} ms" if isinstance(t, float) else str(t)[:600] for t in cost["timed"]]
        print(f"search [{bucket}]: {cost['kernels']} kernels kept; candidates: {timed}")
    return plan.executable


def dlrm_bucket(args, cp):
    """The DLRM forward's executable (weights and batch on the device, as examples/dlrm.py times it)."""
    import dlrm

    params = dlrm.init_params(args.num_cat, args.rows)
    dense, idx = dlrm.make_batch(args.num_cat, 2048, args.rows)
    f = lf.jit(dlrm.forward, backend="cuda", search=lf.SearchOptions(limit=args.search))
    be = lf.get_backend("cuda")
    on_dev = lf.tree_map(lambda a: lf.device_put(a, be), (params, dense, idx))
    for _ in range(3):
        f(*on_dev)
    print(f"DLRM forward (num_cat {args.num_cat}, batch 2048) median "
          f"{_median_ms(lambda: f(*on_dev), cp):.3f} ms over 20")
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        f(*on_dev)
    t1 = time.perf_counter()
    cp.cuda.runtime.deviceSynchronize()
    print(f"50 calls back to back: host {1e3 * (t1 - t0) / 50:.3f} ms/call, with the device "
          f"{1e3 * (time.perf_counter() - t0) / 50:.3f} ms/call")
    (compiled,) = f.compiled()
    (plan,) = compiled.runner.plans.values()
    return plan.executable


def _replay_ms(g, cp, stream, n=10) -> float:
    g.launch(stream)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record(stream)
    for _ in range(n):
        g.launch(stream)
    e1.record(stream)
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) / n


def _launch(it, cp):
    """Queue one kernel launch item of a bucket (plain or programmatic) on the current stream."""
    it[1](cp.cuda.get_current_stream().ptr)


def _step_in_graph(b, st, it, cp, stream, host, dims) -> tuple:
    """(ms, note) of one planned step captured alone as a CUDA graph and replayed (a launch
    gap included, as inside the real step); a step that cannot be captured alone (a host step
    allocating on first use) is timed once with events instead, noted " (events)"."""
    def run():
        if it[0] in ("k", "p"):
            _launch(it, cp)
        else:
            st.run(lambda buf: int(host[b.nsym + buf]), dims)

    run()  # first use (workspaces, module loads) outside the capture
    stream.synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    try:
        with s:
            s.begin_capture()
            try:
                run()
            finally:
                g = s.end_capture()
        return _replay_ms(g, cp, stream), ""
    except Exception:
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        run()
        e1.record(stream)
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1), " (events)"


def _in_graph_by_kind(b, cp, stream, top):
    """Each kind's kernels captured alone as a CUDA graph and replayed: the time they take
    inside a graph (launch gaps included, as in the real step), which one-by-one timing hides."""
    groups: dict = {}
    for st, it in zip(b.plan.steps, b.launches):
        if it[0] in ("k", "p"):
            groups.setdefault(st.label, []).append(it)
    whole = [it for it in b.launches if it[0] in ("k", "p")]
    rows = []
    for label, items in list(groups.items()) + [("(all kernels)", whole)]:
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            s.begin_capture()
            for it in items:
                _launch(it, cp)
            g = s.end_capture()
        rows.append((_replay_ms(g, cp, stream), len(items), label))
    print("inside a CUDA graph, each kind alone (us per step):")
    for ms, n, label in sorted(rows, key=lambda r: -r[0])[:top + 1]:
        print(f"  {n:4d}  {ms * 1e3:9.1f} us  ({ms * 1e3 / n:6.2f} us each)  {label}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama", choices=("llama", "dlrm"))
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--context", type=int, default=40)
    ap.add_argument("--prefill", type=int, default=0, help="profile the step of a prompt of this many tokens")
    ap.add_argument("--max-seq-len", type=int, default=512,
                    help="llama_bench's --max-seq-len: with the prompt, it sets the buckets' tops")
    ap.add_argument("--context-bucket", type=int, default=0,
                    help="top of the decode bucket's contexts (default: llama_bench's, 128)")
    ap.add_argument("--num-cat", type=int, default=8)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per DLRM table (the anchor's)")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--search", type=int, default=3)
    ap.add_argument("--sources", default="", help="file for the slowest kernels' sources")
    ap.add_argument("--host-profile", type=int, default=0, metavar="N",
                    help="cProfile 20 calls of the Llama step and print its N costliest functions")
    ap.add_argument("--trace", action="store_true",
                    help="time every block of one replay of the step (kernel_trace.py): what each kind adds")
    args = ap.parse_args()
    if args.trace:  # (before the kernels are compiled: they record their blocks' times)
        os.environ["LUMINAL_CUDA_TRACE"] = str(kernel_trace.RECORDS)
    import cupy as cp

    exe = (llama_bucket if args.model == "llama" else dlrm_bucket)(args, cp)
    b = exe._last_bucket
    hosts = [it[1] for it in b.launches if it[0] == "h"]
    print(f"programmatic dependent launch: {b.pdl} ({exe.pdl_error or 'LUMINAL_CUDA_PDL=0 turns it off'})")
    print(f"CUDA graphs: {len(b.graphs)} (capture error {exe.capture_error}); {len(b.launches)} launches, "
          f"{len(hosts)} host steps {[getattr(h, 'label', '?') for h in hosts[:4]]}")
    stream = cp.cuda.get_current_stream()
    host = b.pinned[(b.slot - 1) % len(b.pinned)]  # the last call's parameter table
    dims = {sym: int(host[i]) for i, sym in b.sym_slots}
    for key, g in list(b.graphs.items())[-1:]:
        print(f"the captured step replayed alone: {_replay_ms(g, cp, stream) * 1e3:.1f} us")
        if args.trace:
            stream.synchronize()
            kernel_trace.clear_trace(b.module)
            g.launch(stream)
            stream.synchronize()
            print("one replay, block by block (traced kernels run a little slower):")
            kernel_trace.report(kernel_trace.launches(kernel_trace.read_trace(b.module), b.plan), args.top)
    rows = []
    for st, it in zip(b.plan.steps, b.launches):
        ms, how = _step_in_graph(b, st, it, cp, stream, host, dims)
        name, grid, block = ("host", "-", "-") if it[0] == "h" else (it[1].name, it[1].grid, it[1].block)
        rows.append((ms, name, st.label + how, grid, block))
    total = sum(r[0] for r in rows)
    print(f"steps each alone in a CUDA graph: {total * 1e3:.1f} us in {len(rows)} steps")
    by_label: dict = {}
    for ms, _, label, _, _ in rows:
        n, t = by_label.get(label, (0, 0.0))
        by_label[label] = (n + 1, t + ms)
    print("by step kind (count, total us, share):")
    for label, (n, t) in sorted(by_label.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {n:4d}  {t * 1e3:9.1f} us  {t / total:5.1%}  {label}")
    _in_graph_by_kind(b, cp, stream, args.top)
    rows.sort(key=lambda r: -r[0])
    print("slowest steps:")
    for ms, name, label, grid, block in rows[:args.top]:
        print(f"  {ms * 1e3:9.1f} us  {name} ({label})  grid {grid} block {block}")
    if args.sources:  # one file (the device machine returns few files per call)
        seen = set()
        with open(args.sources, "w") as f:
            for ms, name, label, grid, block in rows[:args.top]:
                src = next((s.source.text for s in b.plan.steps
                            if isinstance(s, KernelStep) and s.source.name == name), "")
                if src and name not in seen:
                    seen.add(name)
                    f.write(f"// ==== {name} ({label}): {ms * 1e3:.1f} us, grid {grid} block {block}\n{src}\n")


if __name__ == "__main__":
    main()

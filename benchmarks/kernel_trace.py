"""Where a replayed step's time goes, block by block: each kernel's blocks timed on the device.

The plan is compiled with LUMINAL_CUDA_TRACE set, so thread 0 of every block records the
globaltimer at its kernel's entry and at its end (lang.py's LF_TRACE). One call is replayed,
the records are read back and grouped into launches, and the script prints, per kind of kernel,
the median launch span (first block in to last block out), how long blocks wait to enter, how
ragged their ends are, and the gap from the launch before (negative: they overlapped).

    python3 benchmarks/kernel_trace.py gemv:2048,8192,bfloat16,kn gemv:2048,8192,bfloat16,nk

A case ``gemv:K,N,dtype,layout`` is x (1, K) times R different weights in turn (as
cuda_kernels.py times them, > L2 in total), layout kn (W stored (K, N), x @ W) or nk (W stored
(N, K), the Linear layout), whose GEMVs read the same x and so share launches four at a time,
or kn1 / nk1, a launch each. Thread 0 of each block adds one to a single counter, so a launch
of thousands of blocks is slowed a little by the tracing itself. Needs a GPU and CuPy; the tracing changes the kernels' code a little
(a register or two), so compare traced figures with traced figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RECORDS = 1 << 17


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def read_trace(module):
    """(kernel id, block, SM, t_in ns, t_out ns) rows of the records the module holds, sorted by t_in."""
    import cupy as cp

    n_ptr = module.get_global("lf_trace_n")
    n = int(cp.ndarray((1,), np.uint32, n_ptr).get()[0])
    rec_ptr = module.get_global("lf_trace_rec")
    rec = cp.ndarray((RECORDS, 4), np.uint64, rec_ptr)[:min(n, RECORDS)].get()
    if n > RECORDS:
        print(f"  ({n - RECORDS} block records past the {RECORDS} kept)")
    rows = [(int(r[0]), int(r[1]) >> 16, int(r[1]) & 0xFFFF, int(r[2]), int(r[3])) for r in rec]
    return sorted(rows, key=lambda r: r[3])


def clear_trace(module):
    import cupy as cp

    cp.ndarray((1,), np.uint32, module.get_global("lf_trace_n")).fill(0)


def launches(rows, plan):
    """Group block records into launches: each kernel's records, in order of entry, cut into
    as many launches as the plan has steps running that kernel."""
    names = {}
    for step in plan.steps:
        src = getattr(step, "source", None)
        if src is not None:
            names.setdefault(int(src.name.rsplit("_", 1)[1], 16), []).append(step.label)
    by_id: dict = {}
    for r in rows:
        by_id.setdefault(r[0], []).append(r)
    out = []
    for kid, recs in by_id.items():
        labels = names.get(kid, ["?"])
        per = max(1, len(recs) // len(labels))
        for i, label in enumerate(labels):
            part = recs[i * per:(i + 1) * per] if i < len(labels) - 1 else recs[i * per:]
            if part:
                out.append({"label": label, "kernel": kid, "blocks": len(part), "first_in": part[0][3],
                            "last_in": max(r[3] for r in part), "first_out": min(r[4] for r in part),
                            "last_out": max(r[4] for r in part), "durs": [r[4] - r[3] for r in part],
                            "sms": len({r[2] for r in part})})
    return sorted(out, key=lambda L: L["first_in"])


def report(ls, show=6):
    t0 = ls[0]["first_in"]
    us = lambda ns: ns / 1e3  # noqa: E731
    print(f"  first {show} launches (us from the first block in):")
    print("    kernel                        blocks  SMs  first in  last in  first out  last out  gap")
    prev = None
    for L in ls[:show]:
        gap = "" if prev is None else f"{us(L['first_in'] - prev['last_out']):7.2f}"
        print(f"    {L['label'][:28]:28s} {L['blocks']:7d} {L['sms']:4d} {us(L['first_in'] - t0):9.2f} "
              f"{us(L['last_in'] - t0):8.2f} {us(L['first_out'] - t0):10.2f} {us(L['last_out'] - t0):9.2f} {gap}")
        prev = L
    kernels_of: dict = {}
    for L in ls:
        kernels_of.setdefault(L["label"], set()).add(L.get("kernel"))
    kinds: dict = {}
    for i, L in enumerate(ls):
        # one label rendered as several kernels (the o and the down projection): a row each
        key = L["label"] if len(kernels_of[L["label"]]) == 1 else f"{L['label']} [{L['kernel'] & 0xffff:04x}]"
        k = kinds.setdefault(key, {"span": [], "enter": [], "ragged": [], "gap": [], "adds": [], "dur": [],
                                          "n": 0})
        k["n"] += 1
        k["span"].append(L["last_out"] - L["first_in"])
        k["enter"].append(L["last_in"] - L["first_in"])
        k["ragged"].append(L["last_out"] - L["first_out"])
        k["dur"] += L["durs"]
        if i:
            k["gap"].append(L["first_in"] - ls[i - 1]["last_out"])
            k["adds"].append(L["last_out"] - max(P["last_out"] for P in ls[:i]))
    print("  medians by kernel (us): span = first block in to last out; entry = first in to last in;")
    print("  ragged end = first block out to last out; gap = first in minus the launch before's last out;")
    print("  adds = its last block out minus the latest block out of the launches before (what it adds to the step)")
    for label, k in kinds.items():
        d = sorted(k["dur"])
        print(f"    {label[:34]:34s} x{k['n']:<3d} span {us(_median(k['span'])):6.2f}  entry {us(_median(k['enter'])):5.2f}  "
              f"ragged end {us(_median(k['ragged'])):5.2f}  gap {us(_median(k['gap'])):6.2f}  adds {us(_median(k['adds'])):6.2f}  block "
              f"median {us(d[len(d) // 2]):5.2f} p90 {us(d[int(len(d) * 0.9)]):5.2f} max {us(d[-1]):5.2f}")
    total = ls[-1]["last_out"] - ls[0]["first_in"]
    print(f"  the whole replay: {us(total):.2f} us for {len(ls)} launches; by what each kind adds in all:")
    for label, k in sorted(kinds.items(), key=lambda kv: -sum(kv[1]["adds"]))[:show]:
        print(f"    {us(sum(k['adds'])):9.2f} us  {sum(k['adds']) / total:5.1%}  x{k['n']:<4d} {label}")


def gemv_case(be, cp, spec):
    from cuda_kernels import C, _gemv_layers, compile_gemvs
    from luminal_fn.ir import dtypes as dt

    K, N, dname, layout = spec.split(",")
    if layout not in ("kn", "kn1", "nk", "nk1"):
        raise SystemExit(f"kernel_trace.py: layout {layout!r}: give kn, nk, or kn1 / nk1 (a launch each)")
    K, N, d = int(K), int(N), getattr(dt, dname)
    transposed = layout.startswith("nk")
    R = int(max(1, min(48, -(-(384 << 20) // (K * N * d.itemsize)))))
    g = _gemv_layers(K, N, d, R, transposed)
    shape = (N, K) if transposed else (K, N)
    bufs = [be.from_numpy(C.rand((1, K), d, -1, 1))] + [be.from_numpy(C.rand(shape, d, -1, 1)) for _ in range(R)]
    exe, _ = compile_gemvs(be, g, bufs, merged=not layout.endswith("1"))
    return f"x (1, {K}) @ {R} weights {shape} {dname} ({layout})", exe, bufs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="+", help="gemv:K,N,dtype,layout (layout kn or nk)")
    ap.add_argument("--show", type=int, default=6, help="launches printed one by one")
    args = ap.parse_args()
    os.environ["LUMINAL_CUDA_TRACE"] = str(RECORDS)
    import cupy as cp

    from luminal_fn.backends import get_backend

    be = get_backend("cuda")
    for spec in args.cases:
        kind, _, rest = spec.partition(":")
        if kind != "gemv":
            raise SystemExit(f"kernel_trace.py: unknown case {spec!r}; give gemv:K,N,dtype,layout")
        title, exe, bufs = gemv_case(be, cp, rest)
        for _ in range(3):
            exe.run(bufs, {})
        bucket = exe._bucket({})
        cp.cuda.get_current_stream().synchronize()
        clear_trace(bucket.module)
        s = cp.cuda.get_current_stream()
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s)
        exe.run(bufs, {})
        b.record(s)
        b.synchronize()
        rows = read_trace(bucket.module)
        ts = sorted({t for r in rows for t in (r[3], r[4])})
        step = min((y - x for x, y in zip(ts, ts[1:]) if y > x), default=0)
        print(f"{title}: {cp.cuda.get_elapsed_time(a, b) * 1e3:.1f} us between events, {len(rows)} block "
              f"records, timer steps of {step} ns at least")
        report(launches(rows, bucket.plan), args.show)


if __name__ == "__main__":
    main()

"""Each GEMV step asks L2 for the head of the next GEMV's weights (backends/cuda/l2_prefetch.py).

CPU: in the tiny Llama decode step (with and without the RMS-norm prologue) every GEMV step but
the last prefetches exactly the weights of the GEMV step after it, from each segment's offset, as
many bytes as it reads (the budget large enough) or all cut by one factor (a small budget); the
switch; a host step in between, symbolic offsets and computed weights stop it; the device
function's split into blocks, threads and 16 KiB chunks (its text run by g++); the module
compiled by nvcc for sm_90 and sm_80 where installed. On the CPU emulation of CUDA (g++): a GEMV
chain reading weights from an offset and the float32 tiny Llama step against NumPy and bit for
bit against the plan without prefetches, every block of every prefetching step asking for the
right pointer and byte count.
"""
from __future__ import annotations

import ctypes
import dataclasses
import re
import shutil
import subprocess
import types
from collections import Counter

import numpy as np
import pytest

import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda import KERNEL_KINDS
from luminal_fn.backends.cuda.l2_prefetch import DEFAULT_BUDGET, SWITCH, heads, prefetch_next_weights  # noqa: F401

BUDGET = 8 << 20  # the budget timed on the H200 (run S); the pass is off by default
from luminal_fn.backends.cuda.plan import HostStep
from luminal_fn.backends.cuda.source import module_source, nvcc_available
from luminal_fn.backends.numpy import NumpyBackend
from luminal_fn.backends.render import CUDA
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor
from test_cuda_gemv_merge import _extract
from test_cuda_gemv_prologue import _library, _plan, _tiny_llama

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
CALL = re.compile(r"lf_l2_prefetch_share\((pf\d+)(?: \+ (\d+))?, (\d+)\);")


def _llama_plan(fold=False, weights="bfloat16", kinds=KERNEL_KINDS, cache_rows=64):
    traced, flat = _tiny_llama(2, weights, cache_rows=cache_rows)
    g = traced.hlir
    ex = Extractor(build_egraph(g), g, kernel_kinds=kinds)
    ll = ex.extract(None)
    return _plan(ll, {"s": 1, "c": cache_rows}, fold=fold, donated=flat(39)[1].donated), ex, flat


def _gemvs(bp) -> list:
    return [s for s in bp.steps if getattr(s, "source", None) is not None and s.source.meta.get("_weights")]


def _calls(step) -> list:
    """[(buffer id, offset in elements, bytes)] that a step's text prefetches."""
    src = step.source
    return [(step.bufs[src.buffers.index(name)], int(off or 0), int(n)) for name, off, n in CALL.findall(src.text)]


def _spans(step) -> list:
    """[(buffer id, offset, bytes read)] of each weight segment of a GEMV step, from its meta."""
    return [(step.bufs[slot], int(s.w_offset), ((s.n - 1) * int(s.ldw) + s.k) * s.dtype.itemsize)
            for slot, s in step.source.meta["_weights"]]


# ---- plans -------------------------------------------------------------------------------------
@pytest.mark.parametrize("fold", [False, True], ids=["plain", "rms-prologue"])
def test_every_gemv_prefetches_the_next_gemvs_weights(fold, monkeypatch):
    monkeypatch.setenv(SWITCH, str(BUDGET))
    bp, _, _ = _llama_plan(fold)
    assert not any(isinstance(s, HostStep) for s in bp.steps)
    gemvs = _gemvs(bp)
    # q/k/v, o, gate/up, down per layer, then the LM head
    assert len(gemvs) == 9, [s.label for s in gemvs]
    for a, b in zip(gemvs, gemvs[1:]):
        want = _spans(b)
        assert _calls(a) == want, (a.label, b.label)
        for w, off, n in want:  # b's weights as its own kernel names them, whole rows inside them
            assert re.fullmatch(r"in[1-9]|w\d", b.source.buffers[b.bufs.index(w)]), b.source.buffers
            assert off * bp.bufs[w].dtype.itemsize + n <= bp.bufs[w].numel * bp.bufs[w].dtype.itemsize
        assert a.source.meta["prefetches_next"] == sum(n for _, _, n in want)
        # the prefetched weights are extra const buffers of the step, after its own
        k = len(a.source.buffers) - len({w for w, _, _ in want})
        assert a.source.buffers[k:] == [f"pf{j}" for j in range(len(a.source.buffers) - k)]
        assert all(const for *_, const in a.source.meta["_bufs"][k:])
        assert a.source.text.rstrip().endswith("}") and "lf_main();" in a.source.text
    last = gemvs[-1]
    assert "prefetches_next" not in last.source.meta and "lf_l2_prefetch_share" not in last.source.text
    # Llama's tiny shapes in bfloat16 (hidden 64, q 64 rows, k and v 32, MLP 128, vocab 256):
    # after q/k/v the o projection, then gate and up, down, the next layer's q/k/v, ..., the head
    heads_bytes = [a.source.meta["prefetches_next"] for a in gemvs[:-1]]
    assert heads_bytes == [8192, 32768, 16384, 16384, 8192, 32768, 16384, 32768]


def test_a_small_budget_cuts_every_head_by_one_factor(monkeypatch):
    monkeypatch.setenv(SWITCH, "6000")
    bp, _, _ = _llama_plan()
    gemvs = _gemvs(bp)
    down, qkv = gemvs[3], gemvs[4]  # the first layer's down projection, the second's q/k/v
    assert "(gemv nk x3)" in qkv.label  # (with RoPE and the cache stores: gemv_stores.py)
    # q 8192 B, k and v 4096 B each: f = 6000 / 16384, each rounded down to 16 bytes
    q, k, v = (w for w, _, _ in _spans(qkv))
    assert _calls(down) == [(q, 0, 2992), (k, 0, 1488), (v, 0, 1488)]
    for a, b in zip(gemvs, gemvs[1:]):
        spans = _spans(b)
        whole = sum(n for *_, n in spans)
        want = [(w, off, (n * 6000 // whole) // 16 * 16) for w, off, n in spans]
        assert _calls(a) == want
        assert a.source.meta["prefetches_next"] <= 6000


def test_the_switch_turns_it_off(monkeypatch):
    on, _, _ = _llama_plan()
    monkeypatch.setenv(SWITCH, "0")
    off, _, _ = _llama_plan()
    assert not any("lf_l2_prefetch_share" in s.source.text or "prefetches_next" in s.source.meta
                   for s in off.steps)
    assert [s.label for s in on.steps] == [s.label for s in off.steps]
    for a, b in zip(on.steps, off.steps):
        if "prefetches_next" in a.source.meta:  # the same step and buffers, the weights added
            assert a.bufs[:len(b.bufs)] == b.bufs and len(a.bufs) > len(b.bufs)
            assert a.source.kind == b.source.kind and a.source.meta["grid3"] == b.source.meta["grid3"]
        else:
            assert a.source.name == b.source.name and a.bufs == b.bufs
    monkeypatch.setenv(SWITCH, "lots")
    with pytest.raises(ValueError, match=SWITCH):
        _llama_plan()


def test_what_is_not_prefetched(monkeypatch):
    monkeypatch.setenv(SWITCH, "0")
    bp, _, _ = _llama_plan()
    monkeypatch.setenv(SWITCH, str(BUDGET))
    pl = types.SimpleNamespace(steps=list(bp.steps), bufs=bp.bufs, lang=CUDA)
    i, j = (bp.steps.index(s) for s in _gemvs(bp)[:2])
    # a host step (cuBLAS) between two GEMVs: that pair is left alone, the others not
    host = HostStep([], -1, "cublas", lambda *a: None)
    pl.steps.insert(j, host)
    assert prefetch_next_weights(pl) == 7
    assert "prefetches_next" not in pl.steps[i].source.meta
    # a symbolic weight offset, a weight computed by a kernel (an arena buffer)
    b = _gemvs(bp)[1]
    (slot, seg), = b.source.meta["_weights"]
    sym = dataclasses.replace(b, source=dataclasses.replace(b.source, meta={
        **b.source.meta, "_weights": ((slot, dataclasses.replace(seg, w_offset="d_c * 64")),)}))
    assert heads(pl, b, BUDGET) and not heads(pl, sym, BUDGET)
    bufs = list(bp.bufs)
    bufs[b.bufs[slot]] = dataclasses.replace(bufs[b.bufs[slot]], kind="arena")
    assert not heads(types.SimpleNamespace(bufs=bufs), b, BUDGET)


# ---- the device function ----------------------------------------------------------------------
_SHARE_SHIM = r"""
#include <algorithm>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __CUDA_ARCH__ 900
struct lf_dim3 { unsigned x, y, z; };
static lf_dim3 threadIdx, blockIdx, blockDim, gridDim;
static std::vector<unsigned long long> lf_log;
static void lf_bulk(unsigned long long p, unsigned n) { lf_log.push_back(p); lf_log.push_back(n); }
"""
_SHARE_RUN = r"""
extern "C" long long lf_run(unsigned long long p, long long bytes, unsigned grid, unsigned block,
                            unsigned long long* out, long long cap) {
  lf_log.clear();
  gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) {
      blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0};
      lf_l2_prefetch_share((const void*)p, bytes);
    }
  std::copy(lf_log.begin(), lf_log.begin() + std::min<long long>(cap, lf_log.size()), out);
  return (long long)lf_log.size() / 2;
}
"""


@needs_gxx
def test_the_device_function_covers_its_range_once_in_aligned_chunks(tmp_path):
    """lf_l2_prefetch_share's text from the CUDA prelude, its bulk prefetch replaced by a log,
    run by g++ over every thread of every block: the 16-byte units of [p, p + bytes) from p
    rounded up to 16 are each asked for exactly once, in aligned chunks of 16 B to 16 KiB."""
    pre = CUDA.prelude
    start = pre.index("__device__ __forceinline__ void lf_l2_prefetch_share(")
    fn = pre[start:pre.index("\n}\n", start) + 3]
    fn, n = re.subn(r'asm volatile\("cp\.async\.bulk\.prefetch\.L2\.global \[%0\], %1;" :: "l"\((.*)\), "r"\((\w+)\) : "memory"\);',
                    r"lf_bulk(\1, \2);", fn)
    assert n == 1, fn
    cpp, so = tmp_path / "share.cpp", tmp_path / "share.so"
    cpp.write_text(_SHARE_SHIM + fn + _SHARE_RUN)
    res = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-o", str(so), str(cpp)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[:4000]
    lib = ctypes.CDLL(str(so))
    lib.lf_run.restype = ctypes.c_longlong
    lib.lf_run.argtypes = [ctypes.c_ulonglong, ctypes.c_longlong, ctypes.c_uint, ctypes.c_uint,
                           ctypes.c_void_p, ctypes.c_longlong]
    base = 1 << 20
    out = np.zeros(1 << 16, np.uint64)
    for mis, nbytes, grid, block in [(0, 8 << 20, 132, 256), (4, 8192, 8, 256), (0, 16, 16, 256),
                                     (12, 20, 4, 32), (2, 14, 4, 32), (8, 0, 4, 32), (0, 40 << 20, 3, 64),
                                     (6, 1000003, 7, 128)]:
        p = base + mis
        count = lib.lf_run(p, nbytes, grid, block, out.ctypes.data, out.size)
        assert count <= out.size // 2
        calls = out[:2 * count].reshape(-1, 2).astype(np.int64)
        lo = -(-p // 16) * 16
        hi = lo + max(0, (p + nbytes - lo) // 16 * 16)
        assert all(a % 16 == 0 and 16 <= n <= 16384 and n % 16 == 0 for a, n in calls)
        calls = calls[np.argsort(calls[:, 0])] if count else calls
        covered = sum(int(n) for _, n in calls)
        assert covered == hi - lo, (mis, nbytes, grid, block)
        if count:  # contiguous, no overlaps: each chunk starts where the last one ended
            assert calls[0, 0] == lo and (calls[1:, 0] == calls[:-1, 0] + calls[:-1, 1]).all()


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed on this machine")
def test_the_module_compiles_for_sm_90_and_sm_80(tmp_path, monkeypatch):
    """ptxas takes the bulk prefetch on sm_90; below it the function is empty (else sm_80 would
    reject the instruction)."""
    monkeypatch.setenv(SWITCH, str(BUDGET))
    bp, _, _ = _llama_plan(fold=True)
    text = module_source(bp.kernels())
    assert "lf_l2_prefetch_share(pf0" in text
    src = tmp_path / "module.cu"
    src.write_text(text)
    for arch in ("sm_90", "sm_80"):
        res = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-std=c++17", "-o",
                              str(tmp_path / f"{arch}.cubin"), str(src)], capture_output=True, text=True)
        assert res.returncode == 0, (arch, res.stderr[-4000:])


# ---- the CPU emulation of CUDA -----------------------------------------------------------------
_LOG = r"""
static std::mutex lf_pf_mu;
static std::vector<long long> lf_pf_log;
inline void lf_l2_prefetch_share(const void* p, long long bytes) {
  std::lock_guard<std::mutex> g(lf_pf_mu);
  lf_pf_log.push_back((long long)(uintptr_t)p);
  lf_pf_log.push_back(bytes);
}
extern "C" long long lf_pf_count() { return (long long)lf_pf_log.size(); }
extern "C" void lf_pf_take(long long* out) {
  std::copy(lf_pf_log.begin(), lf_pf_log.end(), out);
  lf_pf_log.clear();
}
"""


def _recording(monkeypatch):
    """The emulation with every lf_l2_prefetch_share call logged; returns the emulation module
    and a dict id(caller's array) -> address of its emulated copy."""
    import cuda_model_emulation as emu

    stub = "inline void lf_l2_prefetch_share(const void*, long long) {}\n"
    assert stub in emu._SHIM
    monkeypatch.setattr(emu, "_SHIM", emu._SHIM.replace(stub, _LOG))
    placed, place = {}, emu._place

    def recording_place(arr, keep, fill=None):
        out = place(arr, keep, fill)
        placed[id(arr)] = out.ctypes.data
        return out

    monkeypatch.setattr(emu, "_place", recording_place)
    return emu, placed


def _logged(lib) -> Counter:
    lib.lf_pf_count.restype = ctypes.c_longlong
    n = lib.lf_pf_count()
    buf = np.zeros(max(n, 1), np.int64)
    lib.lf_pf_take(ctypes.c_void_p(buf.ctypes.data))
    return Counter(map(tuple, buf[:n].reshape(-1, 2).tolist()))


def _expected_log(emu, bp, inputs, placed) -> Counter:
    """Every thread of every block of each prefetching step asks once per weight."""
    want = Counter()
    for s in bp.steps:
        if "prefetches_next" not in s.source.meta:
            continue
        (gx, gy, gz), (block, _, _) = emu.launch_shape(s.source, bp.dims_max, emu.EMULATED_SM_COUNT)
        for buf, off, n in _calls(s):
            b = bp.bufs[buf]
            assert b.kind == "input"
            want[(placed[id(inputs[b.index])] + off * b.dtype.itemsize, n)] += gx * gy * gz * block
    return want


def chain(x, w1, w2):
    """Two GEMVs with a kernel between (the reversed row keeps tanh out of the first's epilogue),
    the second reading its weights from column 64 of a wider matrix."""
    h = lnp.tanh(lnp.matmul(x, lnp.transpose(w1))[:, ::-1])
    return lnp.matmul(h, lnp.transpose(w2[:, 64:]))


@needs_gxx
@pytest.mark.parametrize("limit,d", [(None, np.float32), ("1000", np.float32), (None, np.float16)],
                         ids=["whole-float32", "cut-float32", "whole-float16"])
def test_a_gemv_chain_on_the_cpu_emulation(tmp_path, monkeypatch, limit, d):
    if limit is None:
        monkeypatch.setenv(SWITCH, str(BUDGET))
    else:
        monkeypatch.setenv(SWITCH, limit)
    rng = np.random.default_rng(3)
    ins = [rng.uniform(-1, 1, s).astype(d) for s in ((1, 128), (64, 128), (32, 128))]
    bp = _plan(_extract(chain, tuple(ins)), {}, fold=False)
    first, mid, second = bp.steps
    size = np.dtype(d).itemsize
    span = (31 * 128 + 64) * size
    n = span if limit is None else 1000 // 16 * 16
    assert _calls(first) == [(second.bufs[1], 64, n)] and first.source.meta["prefetches_next"] == n
    assert "lf_l2_prefetch_share" not in mid.source.text + second.source.text
    emu, placed = _recording(monkeypatch)
    lib = emu.build_with_hand(bp, ("gemv.cu",), str(tmp_path))
    _logged(lib)
    (got,) = emu.run(lib, bp, ins, {})
    assert _logged(lib) == _expected_log(emu, bp, ins, placed)
    assert _expected_log(emu, bp, ins, placed) == Counter({(placed[id(ins[2])] + 64 * size, n): 8 * 256})
    x, w1, w2 = (a.astype(np.float64) for a in ins)
    h = np.tanh((x @ w1.T).astype(d).astype(np.float64))[:, ::-1].astype(d).astype(np.float64)
    tol = 2e-2 if d is np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), h @ w2[:, 64:].T, rtol=tol, atol=tol)


@needs_gxx
@pytest.mark.parametrize("fold", [False, True], ids=["plain", "rms-prologue"])
def test_tiny_llama_decode_step_on_the_cpu_emulation(tmp_path, monkeypatch, fold):
    """The float32 tiny Llama step (the norm kernel and the GEMVs chosen, the rest generic) with
    its prefetches computes what the plan without them computes, bit for bit, and the NumPy
    backend's generic step; every block of each GEMV but the last asks for the next one's weights."""
    monkeypatch.setenv(SWITCH, "0")
    off, _, _ = _llama_plan(fold, "float32", frozenset({"rms_norm_rows"}), cache_rows=48)
    monkeypatch.setenv(SWITCH, str(BUDGET))
    on, ex, flat = _llama_plan(fold, "float32", frozenset({"rms_norm_rows"}), cache_rows=48)
    assert sum("prefetches_next" in s.source.meta for s in on.steps) == len(_gemvs(on)) - 1 == 8
    emu, placed = _recording(monkeypatch)
    lib = _library([on, off], str(tmp_path))
    _logged(lib)
    want_plan = NumpyBackend().compile(ex.extract(ex.generic_genome()))
    for c in (1, 48):
        args, _ = flat(c - 1)
        dims = {"s": 1, "c": c}
        want = want_plan.run([a.copy() for a in args], dims)
        ref = emu.run(lib, off, [a.copy() for a in args], dims)
        assert not _logged(lib)
        inputs = [a.copy() for a in args]
        got = emu.run(lib, on, inputs, dims)
        assert _logged(lib) == _expected_log(emu, on, inputs, placed)
        for k, (a, b, w) in enumerate(zip(got, ref, want)):
            np.testing.assert_array_equal(a, b, err_msg=f"c={c} output {k}")
            np.testing.assert_allclose(a, np.asarray(w), rtol=1e-4, atol=1e-4, err_msg=f"c={c} output {k}")

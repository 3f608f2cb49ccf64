"""Running the CUDA backend's kernels on the CPU, for tests on machines without a GPU: the model
kernels (backends/cuda/modelkernels.py) and the rendered generic ones (render/*: elementwise
"fused" trees with their vector paths, "fused_reduce" in every strategy with split scratch,
output and materialize copies, Iota, Gather, Scatter with its copy or in place).

The planned kernel text is compiled by g++ as C++ against a small stand-in for CUDA: the
qualifiers vanish; ``threadIdx``/``blockIdx`` are thread-local; blocks run one after another.
A kernel that synchronises (``__syncthreads``, ``lf_shfl``) runs each block on ``blockDim.x``
real threads (kept for the whole grid, a barrier between blocks): ``__syncthreads`` is a ``std::barrier`` across the block, ``lf_shfl`` (the
prelude's warp shuffle) exchanges through a per-warp slot array between two per-warp barriers,
a block-scope ``__shared__`` array is a function-static one (one block runs at a time), dynamic
shared memory is one static array. Any other kernel runs its threads one after another on one
OS thread (same result: nothing in it depends on other threads). The parameter table P is built
as the backend builds it (dims of the call, then one pointer per buffer), and the grid is the
backend's ``launch_shape`` at the bucket's largest dims (a grid-stride kernel's cap may be
smaller here: it covers the same work).

The prelude's helpers are re-implemented here for float/int/bool, float16 as _Float16 and
bfloat16 as its 16 bits (conversions rounding to nearest even, as __float2bfloat16_rn):
``lf_vld``/``lf_vst`` check the alignment the real vector loads need (4 elements of the storage
type: 16 B for float; 16 B for 8 half-precision elements) and ``run`` raises when one was misaligned; every buffer is 256-byte
aligned as cudaMalloc's, and outputs carry a guard band after their end that ``run`` checks.

This checks indexing, strides, masks, params, the dims table, launch sizes, shared-memory
staging and the shuffle reductions against NumPy. It does not check what only the GPU decides
(NVRTC, the real memory model, the device's float rounding, its own prelude text). Not emulated:
host steps (cuBLAS); the hand kernels (rms_norm, softmax, rope, attention, GEMV) only where a
test compiles their files in (``build_with_hand``: the row-kernel, attention, RoPE and GEMV tests),
except the sort and scan kernels any sorting or cumsum program plans, whose files ``build`` adds.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess

import ml_dtypes
import numpy as np

from luminal_fn.backends.cuda.executable import launch_shape
from luminal_fn.backends.cuda.plan import KernelStep, evaluate
from luminal_fn.backends.cuda.source import HAND_ORDER, hand_macros

_SHIM = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __align__(n)
typedef long long lf_i64;
typedef _Float16 __half;
// bfloat16 as CUDA stores it: the high 16 bits of a float32, rounded to nearest even
struct __nv_bfloat16 { uint16_t bits; };
inline float __bfloat162float(__nv_bfloat16 x) {
  const uint32_t u = (uint32_t)x.bits << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40u)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {(uint16_t)(u >> 16)};
}
struct lf_dim3 { unsigned x, y, z; };
static thread_local lf_dim3 threadIdx, blockIdx;
static lf_dim3 blockDim, gridDim;
alignas(16) unsigned char lf_smem[1 << 17];
static std::barrier<>* lf_block_bar;
static std::barrier<>** lf_warp_bar;
static float lf_xf[1024];
static int lf_xi[1024];
static std::atomic<int> lf_misaligned{0};
static std::mutex lf_atomic_mu;
inline void __syncthreads() { lf_block_bar->arrive_and_wait(); }
template <typename T> static T lf_exchange(T* slots, T v, int o) {
  const unsigned t = threadIdx.x;
  slots[t] = v;
  lf_warp_bar[t / 32]->arrive_and_wait();
  T r = slots[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
  lf_warp_bar[t / 32]->arrive_and_wait();
  return r;
}
inline float lf_shfl(float v, int o) { return lf_exchange(lf_xf, v, o); }
inline int lf_shfl(int v, int o) { return lf_exchange(lf_xi, v, o); }
inline bool lf_shfl(bool v, int o) { return lf_exchange(lf_xi, (int)v, o) != 0; }
// a lane's value from d lanes below (its own below lane d), as __shfl_up_sync
template <typename T> static T lf_exchange_up(T* slots, T v, int d) {
  const unsigned t = threadIdx.x;
  slots[t] = v;
  lf_warp_bar[t / 32]->arrive_and_wait();
  T r = (t & 31u) >= (unsigned)d ? slots[t - d] : v;
  lf_warp_bar[t / 32]->arrive_and_wait();
  return r;
}
inline float __shfl_up_sync(unsigned, float v, int d) { return lf_exchange_up(lf_xf, v, d); }
inline int __shfl_up_sync(unsigned, int v, int d) { return lf_exchange_up(lf_xi, v, d); }

// ---- the CUDA prelude's helpers, for the types the emulation stores ----
using std::isnan;
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
#define LF_INF __int_as_float(0x7f800000)
#define LF_NAN __int_as_float(0x7fc00000)
inline void lf_pdl_launch() {}
inline void lf_pdl_wait() {}
#define LF_TRACE_IN()
#define LF_TRACE_OUT(id)
inline void lf_prefetch_l2(const void*) {}
inline void lf_l2_prefetch_share(const void*, long long) {}
inline float __half2float(__half x) { return (float)x; }
inline __half __float2half_rn(float x) { return (__half)x; }
inline float __expf(float x) { return expf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
template <typename T> inline T min(T a, T b) { return b < a ? b : a; }
template <typename T> inline T max(T a, T b) { return a < b ? b : a; }
inline float lf_ld(float x) { return x; }
inline float lf_ld(__half x) { return (float)x; }
inline float lf_ld(__nv_bfloat16 x) { return __bfloat162float(x); }
inline int lf_ld(int x) { return x; }
inline bool lf_ld(bool x) { return x; }
template <typename T> inline T lf_st(float x);
template <> inline float lf_st<float>(float x) { return x; }
template <> inline __half lf_st<__half>(float x) { return (__half)x; }
template <> inline __nv_bfloat16 lf_st<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <typename T> inline float lf_round(float x) { return lf_ld(lf_st<T>(x)); }
template <typename T> inline T lf_st_any(float x) { return lf_st<T>(x); }
template <> inline bool lf_st_any<bool>(float x) { return x != 0.f; }
inline int lf_f2i(float x) {  // __float2int_rz: truncate, saturate, NaN -> 0
  if (x != x) return 0;
  if (x >= 2147483647.0f) return 2147483647;
  if (x <= -2147483648.0f) return -2147483647 - 1;
  return (int)x;
}
inline float lf_max(float a, float b) { return (b > a || b != b) ? b : a; }
inline float lf_min(float a, float b) { return (b < a || b != b) ? b : a; }
inline int lf_max(int a, int b) { return b > a ? b : a; }
inline int lf_min(int a, int b) { return b < a ? b : a; }
inline bool lf_max(bool a, bool b) { return a || b; }
inline bool lf_min(bool a, bool b) { return a && b; }
inline int lf_imod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
// vector loads/stores: the device reads 4 elements at a time (float4, int4, uint2 of halves,
// uchar4), which must be aligned to 4 elements of the storage type
inline void lf_check_align(const void* p, unsigned bytes) {
  if ((uintptr_t)p % bytes) lf_misaligned.fetch_add(1);
}
inline float lf_cv(float x, float) { return x; }
inline int lf_cv(int x, int) { return x; }
inline bool lf_cv(bool x, bool) { return x; }
inline float lf_cv(__half x, float) { return (float)x; }
inline float lf_cv(__nv_bfloat16 x, float) { return __bfloat162float(x); }
template <typename S> inline S lf_sv(float x) { return lf_st<S>(x); }
template <int N, typename S, typename C> inline void lf_vld(const S* p, C (&v)[N]) {
  static_assert(N % 4 == 0, "lf_vld: N must be a multiple of 4");
  lf_check_align(p, (sizeof(S) == 2 && N % 8 == 0) ? 16 : 4 * sizeof(S));  // halves: 16 bytes at N % 8 == 0
  for (int j = 0; j < N; ++j) v[j] = lf_cv(p[j], C());
}
template <typename T> struct LfRaw { T v[16 / sizeof(T)]; };  // 16 bytes as loaded
template <typename T> inline LfRaw<T> lf_vraw(const T* p) {
  lf_check_align(p, 16); LfRaw<T> r; for (unsigned j = 0; j < 16 / sizeof(T); ++j) r.v[j] = p[j]; return r; }
template <int N, typename T> inline void lf_vcvt(const LfRaw<T>& r, float (&v)[N]) {
  static_assert(N * sizeof(T) == 16, "lf_vcvt: 16 bytes");
  for (int j = 0; j < N; ++j) v[j] = lf_cv(r.v[j], float()); }
template <int N> inline void lf_vst(float* p, const float (&v)[N]) {
  lf_check_align(p, 16); for (int j = 0; j < N; ++j) p[j] = v[j]; }
template <int N> inline void lf_vst(int* p, const int (&v)[N]) {
  lf_check_align(p, 16); for (int j = 0; j < N; ++j) p[j] = v[j]; }
template <int N> inline void lf_vst(bool* p, const bool (&v)[N]) {
  lf_check_align(p, 4); for (int j = 0; j < N; ++j) p[j] = v[j]; }
template <int N> inline void lf_vst(__half* p, const float (&v)[N]) {
  lf_check_align(p, N % 8 == 0 ? 16 : 8); for (int j = 0; j < N; ++j) p[j] = (__half)v[j]; }
template <int N> inline void lf_vst(__nv_bfloat16* p, const float (&v)[N]) {
  lf_check_align(p, N % 8 == 0 ? 16 : 8); for (int j = 0; j < N; ++j) p[j] = __float2bfloat16_rn(v[j]); }
// atomics: the kernels that use them run one thread at a time; the lock is for the others
inline float lf_asf(float x) { return x; }
inline float lf_asf(__half x) { return (float)x; }
inline float lf_asf(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float lf_asf(bool x) { return x ? 1.f : 0.f; }
inline float lf_combine(int mode, float old, float v) {
  return mode == 0 ? v : mode == 1 ? old + v : mode == 2 ? old * v : mode == 3 ? (old != old ? old : lf_max(old, v)) : (old != old ? old : lf_min(old, v));
}
inline int lf_combine(int mode, int old, int v) {
  return mode == 0 ? v : mode == 1 ? old + v : mode == 2 ? old * v : mode == 3 ? lf_max(old, v) : lf_min(old, v);
}
inline int atomicAdd(int* p, int v) { std::lock_guard<std::mutex> g(lf_atomic_mu); const int old = *p; *p += v; return old; }
inline void __threadfence() {}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> g(lf_atomic_mu); const unsigned long long old = *p; if (v > old) *p = v; return old;
}
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> g(lf_atomic_mu); const unsigned long long old = *p; *p = v; return old;
}
inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
inline void lf_atomic(int mode, float* p, float v) { std::lock_guard<std::mutex> g(lf_atomic_mu); *p = lf_combine(mode, *p, v); }
inline void lf_atomic(int mode, int* p, int v) { std::lock_guard<std::mutex> g(lf_atomic_mu); *p = lf_combine(mode, *p, v); }
template <typename T> inline void lf_atomic_narrow(int mode, T* p, float v) {
  std::lock_guard<std::mutex> g(lf_atomic_mu);
  *p = lf_st_any<T>(lf_combine(mode, lf_asf(*p), v));
}
extern "C" int lf_take_misaligned() { return lf_misaligned.exchange(0); }
"""

C_TYPES = {"float32": "float", "int32": "int", "bool": "bool", "float16": "__half", "bfloat16": "__nv_bfloat16"}
NP_TYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_, "float16": np.float16,
            "bfloat16": ml_dtypes.bfloat16}
MODEL_KINDS = ("embedding_bag", "embedding_bag_multi", "embedding_bag_multi_raw", "dlrm_interact", "conv2d_bias")
# render/kernels.py, render/reduce.py; "merged": independent ones in one launch (cuda/horizontal.py)
GENERIC_KINDS = ("ew", "red", "red2", "scatter", "merged")
ALIGN = 256  # cudaMalloc's alignment; the planner aligns arena offsets to the same
GUARD = 64  # bytes after each output that no kernel may write
EMULATED_SM_COUNT = 4  # caps grid-stride grids (the kernels cover the same work with fewer blocks)


def _synchronising(src) -> bool:
    return "__syncthreads" in src.text or "lf_shfl" in src.text


def _runner(src) -> str:
    n = len(src.buffers) + len(src.dims)
    args = ", ".join(f"a[{j}]" for j in range(n))
    if not _synchronising(src):
        return f"""
extern "C" void run_{src.name}(const long long* P, const int* a, unsigned gx, unsigned gy, unsigned gz,
                              unsigned block) {{
  blockDim = {{block, 1, 1}};
  gridDim = {{gx, gy, gz}};
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x)
        for (unsigned t = 0; t < block; ++t) {{
          threadIdx = {{t, 0, 0}}; blockIdx = {{x, y, z}}; {src.name}(P, {args});
        }}
}}
"""
    # one OS thread per thread of the block, kept for the whole grid: each runs its thread of
    # every block in turn, a block barrier between blocks (all of a block ends before the next)
    return f"""
extern "C" void run_{src.name}(const long long* P, const int* a, unsigned gx, unsigned gy, unsigned gz,
                              unsigned block) {{
  blockDim = {{block, 1, 1}};
  gridDim = {{gx, gy, gz}};
  const unsigned nwarps = (block + 31) / 32;
  std::barrier<> bar(block);
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<std::barrier<>*> wp;
  for (unsigned w = 0; w < nwarps; ++w) {{
    warps.emplace_back(new std::barrier<>(32));
    wp.push_back(warps.back().get());
  }}
  lf_block_bar = &bar;
  lf_warp_bar = wp.data();
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < block; ++t)
    ts.emplace_back([=, &bar] {{
      threadIdx = {{t, 0, 0}};
      for (unsigned z = 0; z < gz; ++z)
        for (unsigned y = 0; y < gy; ++y)
          for (unsigned x = 0; x < gx; ++x) {{
            blockIdx = {{x, y, z}};
            {src.name}(P, {args});
            bar.arrive_and_wait();
          }}
    }});
  for (auto& th : ts) th.join();
}}
"""


def why_not_emulable(bp) -> str | None:
    """None when every step runs here, else what does not (the first such step)."""
    for s in bp.steps:
        if not isinstance(s, KernelStep):
            return f"%{s.node} {s.label}: a host step (cuBLAS)"
        src = s.source
        if _hand_file(src.kind):
            pass  # (build adds its file)
        elif src.meta.get("hand") or src.kind not in MODEL_KINDS + GENERIC_KINDS:
            return f"%{s.node} {s.label}: kernel kind {src.kind!r} (a hand kernel)"
        if src.block % 32 or src.block > 1024:
            return f"%{s.node} {s.label}: block of {src.block} threads"
    bad = sorted({b.dtype.name for b in bp.bufs if b.first >= 0 and b.dtype.name not in C_TYPES})
    return f"buffers of dtype {', '.join(bad)}" if bad else None


def emulable(bp) -> bool:
    """Every step a model kernel or a rendered generic kernel (no host steps, no hand kernels)
    over float32/int32/bool/float16 data."""
    return why_not_emulable(bp) is None


def _shared_static(text: str) -> str:
    # a block-scope __shared__ array (the block reduction's lf_red) is one per block: a
    # function-static array, since one block runs at a time; extern (dynamic) ones stay global
    return re.sub(r"(?<!extern )__shared__ ", "static ", text)


_LIBS: dict = {}


# hand kernels any plan may hold (the front end's composites, on every program that sorts):
# ``build`` adds their files itself
HAND_FILES_OF = {"sort_rows": "sort.cu", "argsort_rows": "sort.cu", "top_k_rows": "sort.cu", "scan_rows": "scan.cu"}


def _hand_file(kind: str):
    """The file of such a kernel kind (a long sort's launches are "sort_rows_tiles" and so on)."""
    return next((f for k, f in HAND_FILES_OF.items() if kind == k or kind.startswith(k + "_")), None)


def build(plans: list, workdir: str):
    """Compile every kernel of ``plans`` into one shared library; returns the ctypes handle
    (the same library again for the same set of kernels, in this process)."""
    plans = plans if isinstance(plans, (list, tuple)) else [plans]
    files = sorted({_hand_file(s.source.kind) for bp in plans for s in bp.steps
                    if isinstance(s, KernelStep) and _hand_file(s.source.kind)})
    return build_with_hand(plans, tuple(files), workdir)


# what the hand kernel files (kernels/*.cu) use beyond the prelude's helpers
_HAND_SHIM = r"""
#include <cstdlib>
// a shared array's alignment (the shim drops __align__; the vector loads check it)
#undef __align__
#define __align__(n) __attribute__((aligned(n)))
inline float __shfl_xor_sync(unsigned, float v, int o) { return lf_shfl(v, o); }
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <typename T> inline T __ldg(const T* p) { return *p; }
// mma.sync m16n8k16 (row.col, float sums) as the PTX ISA lays out its fragments: the lanes of a
// warp post their registers, then each computes its four elements of d from all of them
inline float lf_half_bits(unsigned short h, const __nv_bfloat16*) { return __bfloat162float({h}); }
inline float lf_half_bits(unsigned short h, const __half*) { __half x; std::memcpy(&x, &h, 2); return (float)x; }
static unsigned lf_mma_a[1024][4], lf_mma_b[1024][2];
template <typename T> inline void lf_mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const unsigned t = threadIdx.x, base = t & ~31u, g = (t & 31u) >> 2, q = t & 3u;
  for (int i = 0; i < 4; ++i) lf_mma_a[t][i] = a[i];
  for (int i = 0; i < 2; ++i) lf_mma_b[t][i] = b[i];
  lf_warp_bar[t / 32]->arrive_and_wait();
  auto half = [](unsigned reg, int e) {
    return lf_half_bits((unsigned short)(e ? reg >> 16 : reg & 0xffffu), (const T*)nullptr); };
  auto A = [&](int r, int k) {  // A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register r / 8 + 2 * (k / 8)
    return half(lf_mma_a[base + (r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)], k % 2); };
  auto B = [&](int k, int n) {  // B[k][n]: lane n * 4 + (k % 8) / 2, register k / 8
    return half(lf_mma_b[base + n * 4 + (k % 8) / 2][k / 8], k % 2); };
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = (int)g + 8 * (i / 2), col = 2 * (int)q + (i % 2);
    float s = d[i];
    for (int k = 0; k < 16; ++k) s += A(row, k) * B(k, col);
    out[i] = s;
  }
  lf_warp_bar[t / 32]->arrive_and_wait();
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}
inline void lf_ld16(const void* p, unsigned (&r)[4]) {
  if ((uintptr_t)p & 15u) lf_misaligned.fetch_add(1);
  std::memcpy(r, p, 16);
}
static int lf_or_slots[1024];
inline int __syncthreads_or(int p) {  // every thread's flag posted, then each reads them all
  lf_or_slots[threadIdx.x] = p;
  __syncthreads();
  int r = 0;
  for (unsigned i = 0; i < blockDim.x; ++i) r |= lf_or_slots[i];
  __syncthreads();
  return r;
}
// warp votes as CUDA's with every lane of the warp taking part (the only use here): bit l of
// __ballot_sync is lane l's predicate. The votes alternate between two slot arrays, so one warp
// barrier a vote keeps a lane's next vote from overwriting a slot another lane still reads.
static unsigned lf_vote_slots[2][1024];
static thread_local unsigned lf_vote_turn;
inline unsigned __ballot_sync(unsigned, int p) {
  const unsigned t = threadIdx.x, base = t & ~31u;
  unsigned* slots = lf_vote_slots[lf_vote_turn ^= 1u];
  slots[t] = p != 0;
  lf_warp_bar[t / 32]->arrive_and_wait();
  unsigned r = 0;
  for (unsigned l = 0; l < 32; ++l) r |= slots[base + l] << l;
  return r;
}
// __syncwarp: a barrier of the warp
inline void __syncwarp(unsigned = 0xffffffffu) { lf_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
// the attr-driven attention kernels of attention.cu need it to compile; they are not run here
inline float __shfl_sync(unsigned, float, int) { std::abort(); }
"""


HAND_NEEDS = {"gemv.cu": ("rms_norm.cu",), "attention.cu": ("rms_norm.cu",)}


def build_with_hand(plans, files: tuple, workdir: str) -> ctypes.CDLL:
    """The stand-in for CUDA, the hand kernel ``files`` (kernels/*.cu) and every kernel of
    ``plans`` (one plan or a list) in one library. A kernel that calls a function of those files
    runs on one OS thread per CUDA thread (the files' functions shuffle and synchronise out of the
    kernel's own text); any other as ``build`` runs it. The same library again for the same text,
    in this process."""
    import dataclasses

    from luminal_fn.backends.render.files import kernel_file

    # (a file may call functions of one before it in the module: gemv.cu's folded RMS norm sums
    # with rms_norm.cu's; the module's order puts them first)
    wanted = set(files) | {d for f in files for d in HAND_NEEDS.get(f, ())}
    texts = [kernel_file(f) for f in HAND_ORDER if f in wanted]
    defined = {m for t in texts for m in re.findall(r"^__device__[^\n(]*?\b(lf_\w+)\s*\(", t, re.M)}
    # (the switches that set the files' compile-time tuning, as module_source applies them)
    parts = [_SHIM, _HAND_SHIM] + hand_macros() + [_shared_static(t) for t in texts]
    plans = plans if isinstance(plans, (list, tuple)) else [plans]
    for src in {s.source.name: s.source for bp in plans for s in bp.steps}.values():
        parts.append(_shared_static(src.text))
        calls = any(re.search(rf"\b{name}\b", src.text) for name in defined)
        parts.append(_runner(dataclasses.replace(src, text=src.text + "\n// __syncthreads") if calls else src))
    key = hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]
    if key not in _LIBS:
        _LIBS[key] = compile_parts(parts, os.path.join(workdir, f"hand_{key}"))
    return _LIBS[key]


def compile_parts(parts: list, stem: str) -> ctypes.CDLL:
    """Write ``parts`` (C++ text) to ``stem``.cpp, compile it with g++ into ``stem``.so, load it."""
    src, lib = f"{stem}.cpp", f"{stem}.so"
    with open(src, "w") as f:
        f.write("\n".join(parts))
    res = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                          "-Wno-unknown-pragmas", "-o", lib, src], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"g++ rejected the emulated kernels ({src}):\n{res.stderr[:4000]}")
    return ctypes.CDLL(lib)


def _aligned(nbytes: int, keep: list) -> np.ndarray:
    """A zeroed uint8 array of ``nbytes`` (+ a guard band) starting on an ALIGN boundary."""
    raw = np.zeros(nbytes + GUARD + ALIGN, np.uint8)
    keep.append(raw)
    off = (-raw.ctypes.data) % ALIGN
    return raw[off:off + nbytes + GUARD]


def _place(arr: np.ndarray, keep: list, fill=None) -> np.ndarray:
    """A 256-byte-aligned copy of ``arr`` (C order) whose guard band holds 0xA5 bytes."""
    mem = _aligned(arr.nbytes, keep)
    mem[arr.nbytes:] = 0xA5
    out = mem[:arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr if fill is None else fill
    return out


def run(lib, bp, inputs: list, dims: dict) -> list:
    """Run a plan's steps on the emulation: copies of the caller's arrays as inputs (a donated
    one updated in place is returned as the output it becomes), outputs allocated at the call's
    dims; returns the outputs in the graph's order."""
    keep: list = []
    nsym = len(bp.symbols)
    ptrs = np.zeros(nsym + len(bp.bufs), np.int64)
    for i, s in enumerate(bp.symbols):
        ptrs[i] = dims[s]
    arena = _aligned(max(bp.arena_bytes, 1), keep)
    arrays: dict = {}
    for b in bp.bufs:
        if b.first < 0 and b.id not in bp.outputs:
            continue
        np_t = NP_TYPES[b.dtype.name]
        if b.kind == "input":
            arr = _place(np.ascontiguousarray(inputs[b.index], dtype=np_t), keep)
        elif b.kind == "const":
            arr = _place(np.ascontiguousarray(bp.const_values[b.index], dtype=np_t).reshape(-1), keep)
        elif b.kind == "output":
            shape = tuple(int(evaluate(d, dims)) for d in b.shape)
            fill = np.nan if np_t in (np.float32, np.float16, ml_dtypes.bfloat16) else -7777 if np_t is np.int32 else True
            arr = _place(np.empty(shape, np_t), keep, fill)
        else:
            ptrs[nsym + b.id] = arena.ctypes.data + b.offset
            continue
        arrays[b.id] = arr
        ptrs[nsym + b.id] = arr.ctypes.data
    sym_index = {s: i for i, s in enumerate(bp.symbols)}
    lib.lf_take_misaligned.restype = ctypes.c_int
    lib.lf_take_misaligned()
    for s in bp.steps:
        src = s.source
        args = np.array([nsym + b for b in s.bufs] + [sym_index[d] for d in src.dims], np.int32)
        (gx, gy, gz), (block, _, _) = launch_shape(src, bp.dims_max, EMULATED_SM_COUNT)
        fn = getattr(lib, f"run_{src.name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 4
        fn(ptrs.ctypes.data, args.ctypes.data, gx, gy, gz, block)
        bad = lib.lf_take_misaligned()
        if bad:
            raise AssertionError(f"emulated CUDA: step %{s.node} {s.label} ({src.name}) made {bad} "
                                 f"misaligned vector accesses (lf_vld/lf_vst need 4-element alignment)")
    for bid, arr in arrays.items():
        b = bp.bufs[bid]
        if b.kind == "output" or (b.kind == "input" and bid in bp.outputs):
            tail = np.frombuffer((ctypes.c_uint8 * GUARD).from_address(arr.ctypes.data + arr.nbytes), np.uint8)
            if not (tail == 0xA5).all():
                raise AssertionError(f"emulated CUDA: a kernel wrote past the end of buffer {bid} "
                                     f"({b.kind}, {arr.shape} {arr.dtype})")
    return [arrays[bid] for bid in bp.outputs]


__all__ = ["emulable", "why_not_emulable", "build", "build_with_hand", "run"]

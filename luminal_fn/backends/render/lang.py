"""Per-language tables for the C-style renderer: CUDA and Metal differ only here.

A :class:`Language` says how to spell types, conversions, thread indices, qualifiers, barriers,
warp shuffles, atomics and math functions, how a kernel binds its buffers, and which helper
prelude every module starts with. The renderer (kernels.py) never names a language.

Buffer binding:
  * ``"table"`` (CUDA): a kernel takes one argument, ``const long long* P``, a small device array
    holding the symbolic dims first and then one pointer per buffer. One compiled kernel and one
    captured CUDA graph then serve every dims value and every input pointer: the host rewrites P.
  * ``"args"`` (Metal): each buffer is its own ``[[buffer(i)]]`` argument and the dims are an
    ``int`` array in buffer 0 (Metal shading language cannot turn integers into pointers).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import dtypes as dt

COMPUTE = {"float32": "float", "float16": "float", "bfloat16": "float", "int32": "int", "bool": "bool"}


def compute_type(d: dt.DType) -> str:
    """The register type math runs in: half types compute in float, as the NumPy reference."""
    return COMPUTE[d.name]


@dataclass(frozen=True)
class Language:
    name: str
    storage: dict  # dtype name -> storage type
    binding: str  # "table" or "args"
    kernel_prefix: str  # before "void name(...)"
    restrict: str
    const_ptr: str  # "{t}" -> pointer to const storage
    mut_ptr: str
    block_idx: str
    thread_idx: str
    block_dim: str
    grid_dim: str
    extra_params: str  # Metal's thread-position arguments
    shared: str
    barrier: str
    shfl_xor: str  # "{v}", "{o}"
    math: dict  # op -> function name
    inf: str
    nan: str
    load: dict  # dtype name -> "{x}" conversion from storage to compute type
    store: dict  # dtype name -> "{x}" conversion from float compute to storage
    f2i: str  # saturating float -> int, NaN -> 0
    prelude: str
    isnan: str = "isnan({x})"
    launch_bounds: str = ""
    # statements at a kernel's start: let the next kernel launch, then wait for the one before
    # (a kernel whose body places the wait itself, after work that reads no kernel's writes,
    # takes only entry_launch)
    entry_launch: str = ""
    entry_wait: str = ""
    # a kernel's first and last statements when its blocks are timed (benchmarks/kernel_trace.py):
    # "{id}" is the kernel's own number, its name's digest
    trace_in: str = ""
    trace_out: str = ""
    vec_ok: bool = True
    # a split reduction in one launch: each warp adds one to its row's counter ("add", "{p}": the
    # counter's address; gives the old count) after a fence ("fence"), and the last one merges
    # the row's partials, read past the L1 ("load"). None: two launches (no such counters).
    merge_counter: dict | None = None
    notes: dict = field(default_factory=dict)

    def ptr(self, d: dt.DType, const: bool) -> str:
        t = self.storage[d.name]
        return (self.const_ptr if const else self.mut_ptr).format(t=t)


_CUDA_PRELUDE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef long long lf_i64;
#define LF_INF __int_as_float(0x7f800000)
#define LF_NAN __int_as_float(0x7fc00000)
#ifdef __CUDA_ARCH__
__device__ const int lf_module_arch = __CUDA_ARCH__;  // the host enables PDL only at 900 and above
#endif
// Programmatic dependent launch (sm_90+): a kernel lets the next one start (launch) and waits
// until the one before has finished and its writes are visible (wait). Launched without the
// attribute, wait returns at once. Every kernel waits before it reads what a kernel wrote.
__device__ __forceinline__ void lf_pdl_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void lf_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Block timing, compiled in only when the module defines LF_TRACE (the records it holds; set by
// LUMINAL_CUDA_TRACE, read by benchmarks/kernel_trace.py): thread 0 of each block that reaches the
// kernel's end records (kernel id, block << 16 | SM, globaltimer at entry, at the end).
#ifdef LF_TRACE
__device__ unsigned long long lf_trace_rec[LF_TRACE][4];
__device__ unsigned int lf_trace_n;
__device__ __forceinline__ unsigned long long lf_globaltime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void lf_trace_out(unsigned long long id, unsigned long long t_in) {
  if (threadIdx.x | threadIdx.y | threadIdx.z) return;
  const unsigned long long t = lf_globaltime();
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned slot = atomicAdd(&lf_trace_n, 1u);
  if (slot < LF_TRACE) {
    lf_trace_rec[slot][0] = id; lf_trace_rec[slot][1] = block << 16 | sm;
    lf_trace_rec[slot][2] = t_in; lf_trace_rec[slot][3] = t;
  }
}
#define LF_TRACE_IN() const unsigned long long lf_t_in = lf_globaltime()
#define LF_TRACE_OUT(id) lf_trace_out(id, lf_t_in)
#else
#define LF_TRACE_IN()
#define LF_TRACE_OUT(id)
#endif
// Tensor cores (sm_80+): d += a (16x16, row) * b (16x8, col) in float, a and b 2-byte floats
// packed two to a register in mma.sync m16n8k16's fragment layout (lf_skinny_nt_to).
template <typename T> __device__ __forceinline__ void lf_mma_16816(float (&d)[4], const unsigned (&a)[4],
                                                                  const unsigned (&b)[2]);
template <> __device__ __forceinline__ void lf_mma_16816<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4],
                                                                       const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
template <> __device__ __forceinline__ void lf_mma_16816<__half>(float (&d)[4], const unsigned (&a)[4],
                                                                const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
// 16 bytes at p (16-byte aligned) as four raw 32-bit words
__device__ __forceinline__ void lf_ld16(const void* p, unsigned (&r)[4]) {
  const uint4 v = __ldg((const uint4*)p);
  r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
// Pulls the cache line holding p into L2 (safe before lf_pdl_wait: L2 is where writes land).
__device__ __forceinline__ void lf_prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" :: "l"(p));
}
// Asks L2 for the calling block's share (by blockIdx.x of gridDim.x, in 16-byte units) of
// [p, p + bytes): a GEMV ends by requesting the head of the next GEMV's weights, so HBM keeps
// streaming during the small kernels in between (cuda/l2_prefetch.py). Fire and forget: nothing
// waits on it, and it is safe for correctness because L2 is the point of coherence. sm_90+ only
// (one bulk prefetch per 16 KiB); a per-line loop below that would cost too many instructions.
__device__ __forceinline__ void lf_l2_prefetch_share(const void* p, long long bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned long long a = (unsigned long long)p, start = (a + 15ull) & ~15ull;  // 16-byte aligned
  const long long units = (bytes - (long long)(start - a)) >> 4;
  if (units <= 0) return;
  const long long per = (units + gridDim.x - 1) / gridDim.x;
  const long long u0 = per * blockIdx.x, u1 = u0 + per < units ? u0 + per : units;
  for (long long u = u0 + 1024ll * threadIdx.x; u < u1; u += 1024ll * blockDim.x) {  // 16 KiB chunks
    const unsigned n = (unsigned)((u1 - u < 1024 ? u1 - u : 1024) << 4);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(start + (u << 4)), "r"(n) : "memory");
  }
#endif
}
__device__ __forceinline__ float lf_ld(float x) { return x; }
__device__ __forceinline__ float lf_ld(__half x) { return __half2float(x); }
__device__ __forceinline__ float lf_ld(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ int lf_ld(int x) { return x; }
__device__ __forceinline__ bool lf_ld(bool x) { return x; }
template <typename T> __device__ __forceinline__ T lf_st(float x);
template <> __device__ __forceinline__ float lf_st<float>(float x) { return x; }
template <> __device__ __forceinline__ __half lf_st<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 lf_st<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
// x rounded to T and read back as float (a half-precision rounding inside float math)
template <typename T> __device__ __forceinline__ float lf_round(float x) { return lf_ld(lf_st<T>(x)); }
__device__ __forceinline__ int lf_f2i(float x) { return __float2int_rz(x); }
__device__ __forceinline__ float lf_max(float a, float b) { return (b > a || b != b) ? b : a; }
__device__ __forceinline__ float lf_min(float a, float b) { return (b < a || b != b) ? b : a; }
// int max and min compare with the sign bit flipped, as unsigned: ptxas 12.9 and 13.0 fuse three
// signed max (or min) into one VIMNMX3 on sm_90 and drop a negation when two or more operands are
// negated (max(max(-a, -b), c) gave max(a, -b, c)); its unsigned form keeps every negation
__device__ __forceinline__ unsigned lf_ubias(int a) { return (unsigned)a ^ 0x80000000u; }
__device__ __forceinline__ int lf_max(int a, int b) { unsigned x = lf_ubias(a), y = lf_ubias(b); return (int)((y > x ? y : x) ^ 0x80000000u); }
__device__ __forceinline__ int lf_min(int a, int b) { unsigned x = lf_ubias(a), y = lf_ubias(b); return (int)((y < x ? y : x) ^ 0x80000000u); }
__device__ __forceinline__ bool lf_max(bool a, bool b) { return a || b; }
__device__ __forceinline__ bool lf_min(bool a, bool b) { return a && b; }
__device__ __forceinline__ int lf_imod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }  // INT_MIN % -1 traps
__device__ __forceinline__ float lf_shfl(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int lf_shfl(int v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ bool lf_shfl(bool v, int o) { return __shfl_xor_sync(0xffffffffu, (int)v, o) != 0; }

// Vector loads and stores of N consecutive elements (16 bytes for N*sizeof(T) == 16), with
// conversion to/from the compute type. The address must be aligned to N*sizeof(T).
template <int N> __device__ __forceinline__ void lf_vld(const float* p, float (&v)[N]) {
  #pragma unroll
  for (int j = 0; j < N; j += 4) { float4 t = *(const float4*)(p + j); v[j] = t.x; v[j+1] = t.y; v[j+2] = t.z; v[j+3] = t.w; }
}
template <int N> __device__ __forceinline__ void lf_vld(const int* p, int (&v)[N]) {
  #pragma unroll
  for (int j = 0; j < N; j += 4) { int4 t = *(const int4*)(p + j); v[j] = t.x; v[j+1] = t.y; v[j+2] = t.z; v[j+3] = t.w; }
}
// 2-byte floats: one 16-byte access per 8 elements when N is a multiple of 8 (the address then
// 16-byte aligned), else 8 bytes per 4 (two 8-byte loads of a 16-byte vector cost twice the
// load instructions and L1 wavefronts).
template <typename H2> __device__ __forceinline__ float2 lf_f2(unsigned u);
template <> __device__ __forceinline__ float2 lf_f2<__half2>(unsigned u) { return __half22float2(*(__half2*)&u); }
template <> __device__ __forceinline__ float2 lf_f2<__nv_bfloat162>(unsigned u) { return __bfloat1622float2(*(__nv_bfloat162*)&u); }
__device__ __forceinline__ unsigned lf_u2(__half2 h) { return *(unsigned*)&h; }
__device__ __forceinline__ unsigned lf_u2(__nv_bfloat162 h) { return *(unsigned*)&h; }
__device__ __forceinline__ __half2 lf_pack2(float a, float b, const __half*) { return __floats2half2_rn(a, b); }
__device__ __forceinline__ __nv_bfloat162 lf_pack2(float a, float b, const __nv_bfloat16*) { return __floats2bfloat162_rn(a, b); }
template <typename H2, int N, typename H> __device__ __forceinline__ void lf_vld_half(const H* p, float (&v)[N]) {
  if constexpr (N % 8 == 0) {
    #pragma unroll
    for (int j = 0; j < N; j += 8) { uint4 t = *(const uint4*)(p + j);
      const unsigned u[4] = {t.x, t.y, t.z, t.w};
      #pragma unroll
      for (int q = 0; q < 4; ++q) { float2 a = lf_f2<H2>(u[q]); v[j+2*q] = a.x; v[j+2*q+1] = a.y; } }
  } else {
    #pragma unroll
    for (int j = 0; j < N; j += 4) { uint2 t = *(const uint2*)(p + j);
      float2 a = lf_f2<H2>(t.x), b = lf_f2<H2>(t.y);
      v[j] = a.x; v[j+1] = a.y; v[j+2] = b.x; v[j+3] = b.y; }
  }
}
// 16 bytes held as loaded (lf_vraw) and converted to N = 16 / sizeof(T) floats where used
// (lf_vcvt): loads issued early without holding their floats (twice the registers for halves)
template <typename T> struct LfRaw { uint4 u; };
template <typename T> __device__ __forceinline__ LfRaw<T> lf_vraw(const T* p) { return {*(const uint4*)p}; }
template <int N> __device__ __forceinline__ void lf_vcvt(const LfRaw<float>& r, float (&v)[N]) {
  v[0] = __uint_as_float(r.u.x); v[1] = __uint_as_float(r.u.y); v[2] = __uint_as_float(r.u.z); v[3] = __uint_as_float(r.u.w);
}
// (lf_vld_half's conversion of one 16-byte word, written apart: calling a shared helper from
// lf_vld_half changed the SASS of every half-precision load, which nvcc showed on the CPU)
template <typename H2, int N> __device__ __forceinline__ void lf_vcvt_half(const uint4& t, float (&v)[N]) {
  const unsigned u[4] = {t.x, t.y, t.z, t.w};
  #pragma unroll
  for (int q = 0; q < 4; ++q) { float2 a = lf_f2<H2>(u[q]); v[2 * q] = a.x; v[2 * q + 1] = a.y; }
}
template <int N> __device__ __forceinline__ void lf_vcvt(const LfRaw<__half>& r, float (&v)[N]) { lf_vcvt_half<__half2>(r.u, v); }
template <int N> __device__ __forceinline__ void lf_vcvt(const LfRaw<__nv_bfloat16>& r, float (&v)[N]) { lf_vcvt_half<__nv_bfloat162>(r.u, v); }
template <int N, typename H> __device__ __forceinline__ void lf_vst_half(H* p, const float (&v)[N]) {
  if constexpr (N % 8 == 0) {
    #pragma unroll
    for (int j = 0; j < N; j += 8)
      *(uint4*)(p + j) = make_uint4(lf_u2(lf_pack2(v[j], v[j+1], p)), lf_u2(lf_pack2(v[j+2], v[j+3], p)),
                                    lf_u2(lf_pack2(v[j+4], v[j+5], p)), lf_u2(lf_pack2(v[j+6], v[j+7], p)));
  } else {
    #pragma unroll
    for (int j = 0; j < N; j += 4)
      *(uint2*)(p + j) = make_uint2(lf_u2(lf_pack2(v[j], v[j+1], p)), lf_u2(lf_pack2(v[j+2], v[j+3], p)));
  }
}
template <int N> __device__ __forceinline__ void lf_vld(const __half* p, float (&v)[N]) { lf_vld_half<__half2>(p, v); }
template <int N> __device__ __forceinline__ void lf_vld(const __nv_bfloat16* p, float (&v)[N]) { lf_vld_half<__nv_bfloat162>(p, v); }
template <int N> __device__ __forceinline__ void lf_vld(const bool* p, bool (&v)[N]) {
  #pragma unroll
  for (int j = 0; j < N; j += 4) { uchar4 t = *(const uchar4*)(p + j); v[j] = t.x; v[j+1] = t.y; v[j+2] = t.z; v[j+3] = t.w; }
}
template <int N> __device__ __forceinline__ void lf_vst(float* p, const float (&v)[N]) {
  #pragma unroll
  for (int j = 0; j < N; j += 4) *(float4*)(p + j) = make_float4(v[j], v[j+1], v[j+2], v[j+3]);
}
template <int N> __device__ __forceinline__ void lf_vst(int* p, const int (&v)[N]) {
  #pragma unroll
  for (int j = 0; j < N; j += 4) *(int4*)(p + j) = make_int4(v[j], v[j+1], v[j+2], v[j+3]);
}
template <int N> __device__ __forceinline__ void lf_vst(__half* p, const float (&v)[N]) { lf_vst_half(p, v); }
template <int N> __device__ __forceinline__ void lf_vst(__nv_bfloat16* p, const float (&v)[N]) { lf_vst_half(p, v); }
template <int N> __device__ __forceinline__ void lf_vst(bool* p, const bool (&v)[N]) {
  #pragma unroll
  for (int j = 0; j < N; j += 4) *(uchar4*)(p + j) = make_uchar4(v[j], v[j+1], v[j+2], v[j+3]);
}

// Atomic read-modify-write of one element of any 1/2/4-byte type through a CAS loop on the
// aligned 32-bit word that holds it; MODE 0 set, 1 add, 2 mul, 3 max, 4 min (NaN wins).
template <typename T> __device__ __forceinline__ float lf_asf(T x) { return lf_ld(x); }
__device__ __forceinline__ float lf_combine(int mode, float old, float v) {
  return mode == 0 ? v : mode == 1 ? old + v : mode == 2 ? old * v : mode == 3 ? (old != old ? old : lf_max(old, v)) : (old != old ? old : lf_min(old, v));
}
__device__ __forceinline__ int lf_combine(int mode, int old, int v) {
  return mode == 0 ? v : mode == 1 ? old + v : mode == 2 ? old * v : mode == 3 ? lf_max(old, v) : lf_min(old, v);
}
__device__ __forceinline__ bool lf_combine(int mode, bool old, bool v) {
  return mode == 0 ? v : mode == 1 ? (old || v) : mode == 2 ? (old && v) : mode == 3 ? (old || v) : (old && v);
}
__device__ __forceinline__ void lf_atomic(int mode, float* p, float v) {
  if (mode == 0) { *p = v; return; }
  if (mode == 1) { atomicAdd(p, v); return; }
  unsigned* w = (unsigned*)p; unsigned old = *w, as;
  do { as = old; old = atomicCAS(w, as, __float_as_uint(lf_combine(mode, __uint_as_float(as), v))); } while (as != old);
}
__device__ __forceinline__ void lf_atomic(int mode, int* p, int v) {
  if (mode == 0) { *p = v; return; }
  if (mode == 1) { atomicAdd(p, v); return; }
  if (mode == 3) { atomicMax(p, v); return; }
  if (mode == 4) { atomicMin(p, v); return; }
  int old = *p, as;
  do { as = old; old = atomicCAS(p, as, as * v); } while (as != old);
}
template <typename T> __device__ __forceinline__ void lf_atomic_narrow(int mode, T* p, float v) {
  // 1- and 2-byte elements: CAS on the containing aligned word
  size_t addr = (size_t)p; unsigned* w = (unsigned*)(addr & ~(size_t)3); int shift = (int)(addr & 3) * 8;
  unsigned mask = (sizeof(T) == 2 ? 0xffffu : 0xffu) << shift;
  unsigned old = *w, as;
  do {
    as = old;
    T cur; unsigned short bits = (unsigned short)((as & mask) >> shift);
    if (sizeof(T) == 2) cur = *(T*)&bits; else { unsigned char b8 = (unsigned char)bits; cur = *(T*)&b8; }
    T nv = (T)lf_st_any<T>(lf_combine(mode, lf_asf(cur), v));
    unsigned nb = sizeof(T) == 2 ? (unsigned)(*(unsigned short*)&nv) : (unsigned)(*(unsigned char*)&nv);
    old = atomicCAS(w, as, (as & ~mask) | (nb << shift));
  } while (as != old);
}
"""

# lf_st_any must exist before lf_atomic_narrow: defined in a small header placed first.
_CUDA_PRELUDE = _CUDA_PRELUDE.replace(
    "// Atomic read-modify-write",
    "template <typename T> __device__ __forceinline__ T lf_st_any(float x) { return lf_st<T>(x); }\n"
    "template <> __device__ __forceinline__ bool lf_st_any<bool>(float x) { return x != 0.f; }\n"
    "__device__ __forceinline__ float lf_asf(bool x) { return x ? 1.f : 0.f; }\n"
    "// Atomic read-modify-write")

CUDA = Language(
    name="cuda",
    storage={"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "int32": "int",
             "bool": "bool"},
    binding="table",
    kernel_prefix='extern "C" __global__ void',
    restrict="__restrict__",
    const_ptr="const {t}* __restrict__",
    mut_ptr="{t}* __restrict__",
    block_idx="blockIdx.x",
    thread_idx="threadIdx.x",
    block_dim="blockDim.x",
    grid_dim="gridDim.x",
    extra_params="",
    shared="__shared__",
    barrier="__syncthreads();",
    shfl_xor="lf_shfl({v}, {o})",
    # "Exp": the front end's exp2(x * log2 e) as expf (within 2 ulp; the product's rounding costs
    # up to |x| * 6e-8). Metal has no entry: its exp under fast math is not known to be better.
    math={"Exp2": "exp2f", "Log2": "log2f", "Sin": "sinf", "Sqrt": "sqrtf", "fmod": "fmodf",
          "Exp": "expf", "exp": "__expf", "rsqrt": "rsqrtf",
          "Atan2": "atan2f", "Asin": "asinf", "Acos": "acosf"},  # (tree.LIBRARY_FUNCTIONS)
    inf="LF_INF",
    nan="LF_NAN",
    load={"float32": "{x}", "float16": "__half2float({x})", "bfloat16": "__bfloat162float({x})",
          "int32": "{x}", "bool": "{x}"},
    store={"float32": "{x}", "float16": "__float2half_rn({x})", "bfloat16": "__float2bfloat16_rn({x})"},
    f2i="lf_f2i({x})",
    prelude=_CUDA_PRELUDE,
    launch_bounds="__launch_bounds__({n})",
    entry_launch="lf_pdl_launch();",
    entry_wait="lf_pdl_wait();",
    trace_in="LF_TRACE_IN();",
    trace_out="LF_TRACE_OUT(0x{id}ull);",
    merge_counter={"add": "atomicAdd({p}, 1)", "fence": "__threadfence();", "load": "__ldcg({p})"},
)

# Metal helpers every kernel may call (the MLX host uses these alone: no shuffles, no atomics).
# Integer limits are spelled out rather than relying on INT_MAX being defined.
METAL_HELPERS = r"""
#include <metal_stdlib>
using namespace metal;
#define LF_INF INFINITY
#define LF_NAN NAN
inline int lf_f2i(float x) { return isnan(x) ? 0 : x >= 2147483647.0f ? 2147483647 : x <= -2147483648.0f ? (-2147483647 - 1) : int(x); }
inline float lf_max(float a, float b) { return (b > a || isnan(b)) ? b : a; }
inline float lf_min(float a, float b) { return (b < a || isnan(b)) ? b : a; }
inline int lf_max(int a, int b) { return b > a ? b : a; }
inline int lf_min(int a, int b) { return b < a ? b : a; }
inline bool lf_max(bool a, bool b) { return a || b; }
inline bool lf_min(bool a, bool b) { return a && b; }
inline int lf_imod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }  // INT_MIN % -1 traps
"""

_METAL_PRELUDE = METAL_HELPERS + r"""inline float lf_shfl(float v, ushort o) { return simd_shuffle_xor(v, o); }
inline int lf_shfl(int v, ushort o) { return simd_shuffle_xor(v, o); }
inline bool lf_shfl(bool v, ushort o) { return simd_shuffle_xor(int(v), o) != 0; }
inline float lf_combine(int mode, float old, float v) {
  return mode == 0 ? v : mode == 1 ? old + v : mode == 2 ? old * v : mode == 3 ? (isnan(old) ? old : lf_max(old, v)) : (isnan(old) ? old : lf_min(old, v));
}
inline int lf_combine(int mode, int old, int v) {
  return mode == 0 ? v : mode == 1 ? old + v : mode == 2 ? old * v : mode == 3 ? lf_max(old, v) : lf_min(old, v);
}
inline void lf_atomic(int mode, device float* p, float v) {
  device atomic_uint* w = (device atomic_uint*)p;
  uint old = atomic_load_explicit(w, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(w, &old, as_type<uint>(lf_combine(mode, as_type<float>(old), v)),
                                                memory_order_relaxed, memory_order_relaxed)) {}
}
inline void lf_atomic(int mode, device int* p, int v) {
  device atomic_int* w = (device atomic_int*)p;
  int old = atomic_load_explicit(w, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(w, &old, lf_combine(mode, old, v),
                                                memory_order_relaxed, memory_order_relaxed)) {}
}
"""

METAL = Language(
    name="metal",
    storage={"float32": "float", "float16": "half", "bfloat16": "bfloat", "int32": "int", "bool": "bool"},
    binding="args",
    kernel_prefix="kernel void",
    restrict="",
    const_ptr="device const {t}*",
    mut_ptr="device {t}*",
    block_idx="lf_bid.x",
    thread_idx="lf_tid.x",
    block_dim="lf_bdim.x",
    grid_dim="lf_gdim.x",
    extra_params=("uint3 lf_bid [[threadgroup_position_in_grid]], uint3 lf_tid [[thread_position_in_threadgroup]], "
                  "uint3 lf_bdim [[threads_per_threadgroup]], uint3 lf_gdim [[threadgroups_per_grid]]"),
    shared="threadgroup",
    barrier="threadgroup_barrier(mem_flags::mem_threadgroup);",
    shfl_xor="lf_shfl({v}, {o})",
    math={"Exp2": "exp2", "Log2": "log2", "Sin": "sin", "Sqrt": "sqrt", "fmod": "fmod",
          "exp": "exp", "rsqrt": "rsqrt"},
    inf="LF_INF",
    nan="LF_NAN",
    load={"float32": "{x}", "float16": "float({x})", "bfloat16": "float({x})", "int32": "{x}",
          "bool": "{x}"},
    store={"float32": "{x}", "float16": "half({x})", "bfloat16": "bfloat({x})"},
    f2i="lf_f2i({x})",
    prelude=_METAL_PRELUDE,
    vec_ok=False,  # the Metal table renders the scalar paths only (no vector load helpers yet)
    notes={"scatter": "1- and 2-byte scatter modes other than set are not rendered for Metal"},
)

LANGUAGES = {"cuda": CUDA, "metal": METAL}


def get_language(name) -> Language:
    if isinstance(name, Language):
        return name
    try:
        return LANGUAGES[name]
    except KeyError:
        raise ValueError(f"unknown kernel language {name!r}; known: {', '.join(LANGUAGES)}") from None


# ---- conversions between storage and compute types ------------------------------------------------
def convert(lang: Language, x: str, src: str, dst: str) -> str:
    """Convert an expression between compute types ("float", "int", "bool")."""
    if src == dst:
        return x
    if dst == "float":
        return f"({x} ? 1.0f : 0.0f)" if src == "bool" else f"(float)({x})"
    if dst == "int":
        return lang.f2i.format(x=x) if src == "float" else f"(int)({x})"
    # to bool
    return f"({x} != 0)" if src == "int" else f"({x} != 0.0f)"


def load_expr(lang: Language, d: dt.DType, x: str) -> str:
    """A storage-typed expression as its compute type."""
    return lang.load[d.name].format(x=x)


def as_stored(lang: Language, d: dt.DType, x: str, src_compute: str) -> str:
    """``x`` as a store of dtype ``d`` then a load would give it back (half precision rounds),
    in ``d``'s compute type: a value computed in place of a kernel's stored output."""
    if d in dt.HALF:
        return load_expr(lang, d, store_expr(lang, d, x, src_compute))
    return convert(lang, x, src_compute, compute_type(d))


def store_expr(lang: Language, d: dt.DType, x: str, src_compute: str) -> str:
    """A compute-typed expression as the storage type of ``d``."""
    want = compute_type(d)
    x = convert(lang, x, src_compute, want)
    if want == "float":
        return lang.store[d.name].format(x=x)
    return x

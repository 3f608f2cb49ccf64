// argmax_rows, the kernel optimize/rules/specialize_argmax.egg offers (semantics in
// backends/numpy/row_kernels.py): out[r] = the first index of row r's largest value, or of its
// first NaN (NumPy's argmax). The traced formula is two reductions, a max and then the first
// position equal to it, each a launch that reads the row; this is one launch and one read.
//
// PARTS blocks a row each scan a slice of it, keeping a (value, index) pair per thread; warp
// shuffles and shared memory reduce the block's pairs. With PARTS > 1 each block stores its pair,
// then counts itself in the row's counter (zero between launches); the row's last block reads
// the PARTS pairs past the L1, reduces them and writes the index, and sets the counter back.
//
// The scan loop stays rolled and takes four elements a pass, written out: NVRTC 13.0 miscompiled
// the compiler-unrolled loop of a max whose value reads its own index (docs/benchmarks.md, runs
// CK-CL; render/reduce.py keeps such loops the same way).

// whether (v, i) comes before (bv, bi): a NaN before any number (the lower index between NaNs),
// else the larger value, else the lower index
__device__ __forceinline__ bool lf_am_before(float v, int i, float bv, int bi) {
  const bool vn = v != v, bn = bv != bv;
  if (vn || bn) return vn && (!bn || i < bi);
  return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void lf_am_take(float v, int i, float& bv, int& bi) {
  if (lf_am_before(v, i, bv, bi)) { bv = v; bi = i; }
}

// the block's first pair into (bv, bi) of thread 0 (every thread calls it; sv, si: 32 slots)
template <int BLOCK>
__device__ __forceinline__ void lf_am_block(float& bv, int& bi, float* sv, int* si) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = lf_shfl(bv, o);
    const int oi = lf_shfl(bi, o);
    lf_am_take(ov, oi, bv, bi);
  }
  if (BLOCK > 32) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
      bv = lane < BLOCK / 32 ? sv[lane] : -LF_INF;
      bi = lane < BLOCK / 32 ? si[lane] : 0x7fffffff;
      #pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = lf_shfl(bv, o);
        const int oi = lf_shfl(bi, o);
        lf_am_take(ov, oi, bv, bi);
      }
    }
    __syncthreads();  // (sv and si are read before a later call writes them)
  }
}

// x: R rows of N elements, row r at x + r * row_stride; R * parts work items (a row's part), taken
// by the blocks in turn (a grid of up to R * parts blocks of BLOCK threads). pv, pi (R * parts
// pairs) and cnt (R counters) are used only when parts > 1.
template <typename T, int BLOCK>
__device__ void lf_argmax_rows(const T* __restrict__ x, long long row_stride, int R, int N, int parts,
                               float* __restrict__ pv, int* __restrict__ pi, int* __restrict__ cnt,
                               int* __restrict__ out) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ int last[1];
  const int chunk = (N + parts - 1) / parts;
  for (int item = blockIdx.x; item < R * parts; item += gridDim.x) {  // (block-uniform)
    const int row = item / parts, part = item - row * parts;
    const T* xr = x + (long long)row * row_stride;
    const int lo = part * chunk, hi = min(N, lo + chunk);
    float bv = -LF_INF;
    int bi = 0x7fffffff;
    #pragma unroll 1
    for (int i0 = lo + (int)threadIdx.x; i0 < hi; i0 += 4 * BLOCK) {
      const int i1 = i0 + BLOCK, i2 = i0 + 2 * BLOCK, i3 = i0 + 3 * BLOCK;
      const float v0 = lf_ld(xr[i0]);
      const float v1 = i1 < hi ? lf_ld(xr[i1]) : 0.f;
      const float v2 = i2 < hi ? lf_ld(xr[i2]) : 0.f;
      const float v3 = i3 < hi ? lf_ld(xr[i3]) : 0.f;
      lf_am_take(v0, i0, bv, bi);
      if (i1 < hi) lf_am_take(v1, i1, bv, bi);
      if (i2 < hi) lf_am_take(v2, i2, bv, bi);
      if (i3 < hi) lf_am_take(v3, i3, bv, bi);
    }
    lf_am_block<BLOCK>(bv, bi, sv, si);
    if (parts == 1) {
      if (threadIdx.x == 0) out[row] = bi;
      continue;
    }
    if (threadIdx.x == 0) {
      pv[item] = bv;
      pi[item] = bi;
      __threadfence();  // the pair before the count
      last[0] = atomicAdd(cnt + row, 1) == parts - 1;
    }
    __syncthreads();
    if (!last[0]) continue;
    __threadfence();
    bv = -LF_INF;
    bi = 0x7fffffff;
    for (int p = threadIdx.x; p < parts; p += BLOCK)
      lf_am_take(__ldcg(pv + row * parts + p), __ldcg(pi + row * parts + p), bv, bi);
    lf_am_block<BLOCK>(bv, bi, sv, si);
    if (threadIdx.x == 0) {
      out[row] = bi;
      cnt[row] = 0;
    }
  }
}

// The argmax of one row folded into the GEMV that computes it (backends/cuda/gemv_argmax.py):
// the GEMV's store of value n also takes (the value as stored, n) into the thread's pair; after
// the GEMV the block merges its threads' pairs and puts the best into one 64-bit key with a
// fire-and-forget atomicMax (no fence, no count: the block ends at once). The key orders pairs as
// lf_am_before does: a NaN above any number, then the larger value (0 and -0 alike), then the
// lower index; so the largest key is the row's argmax. A one-thread kernel after the GEMV
// (lf_am_key_index) writes the index and sets the key back to zero for the next launch.
__device__ __forceinline__ unsigned long long lf_am_key(float v, int i) {
  const unsigned int u = __float_as_uint(v == 0.f ? 0.f : v);
  const unsigned int order = v != v ? 0xffffffffu : (u & 0x80000000u ? ~u : u | 0x80000000u);
  return (unsigned long long)order << 32 | (unsigned int)(0x7fffffff - i);
}

// every thread of the block calls it, after its last store; key is zero before the first block
template <int BLOCK>
__device__ void lf_am_fold_block(float bv, int bi, unsigned long long* key) {
  __shared__ float sv[32];
  __shared__ int si[32];
  lf_am_block<BLOCK>(bv, bi, sv, si);
  if (threadIdx.x == 0) atomicMax(key, lf_am_key(bv, bi));
}

// the row's index from the key the GEMV's blocks left, and the key back to zero (one thread)
__device__ __forceinline__ void lf_am_key_index(unsigned long long* key, int* __restrict__ out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    const unsigned long long k = *key;
    out[0] = 0x7fffffff - (int)(unsigned int)(k & 0xffffffffull);
    *key = 0ull;
  }
}

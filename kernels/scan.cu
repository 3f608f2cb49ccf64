// scan_rows (ir/composites.py; semantics in backends/numpy/row_kernels.py): the inclusive sum
// (OP 0), product (OP 1), maximum (OP 2) or minimum (OP 3) of each row along its last axis,
// float32 or int32 (int32 sums and products wrap). The front end's form is log2(n) shifted adds
// along a static axis, n^2 work or 31 steps along a dynamic one; this reads and writes each
// element once (twice read for a long row's parts).
//
// A block walks its part of a row in chunks of 4 * BLOCK: each thread scans its 4 neighbours,
// the block scans the threads' totals (warp shuffles, then the warps' totals), and the running
// total carries into the next chunk. Rows are split into PARTS when there are too few of them to
// fill the device (one row of 128256 was one SM's work): a first launch stores each part's total,
// the second starts each part from the total of the parts before it.

// a the earlier elements' scan, b the later ones'; OP 2 / 3 (cummax / cummin) are NumPy's
// maximum / minimum: a NaN on either side wins, and of equal values the earlier (which of +0.0 /
// -0.0), so they are associative
template <int OP>
__device__ __forceinline__ float lf_scan_op(float a, float b) {
  return OP == 0 ? a + b : OP == 1 ? a * b : OP == 2 ? ((a != a || a >= b) ? a : b) : ((a != a || a <= b) ? a : b);
}
template <int OP>  // (wrapping, as int32 sums wrap on every backend; signed overflow is undefined in C++)
__device__ __forceinline__ int lf_scan_op(int a, int b) {
  return OP == 0 ? (int)((unsigned)a + (unsigned)b) : OP == 1 ? (int)((unsigned)a * (unsigned)b)
         : OP == 2 ? max(a, b) : min(a, b);
}

template <typename T, int OP>
__device__ __forceinline__ T lf_scan_one();  // the identity: 0, 1, the lowest value
template <> __device__ __forceinline__ float lf_scan_one<float, 0>() { return 0.f; }
template <> __device__ __forceinline__ float lf_scan_one<float, 1>() { return 1.f; }
template <> __device__ __forceinline__ float lf_scan_one<float, 2>() { return -LF_INF; }
template <> __device__ __forceinline__ float lf_scan_one<float, 3>() { return LF_INF; }
template <> __device__ __forceinline__ int lf_scan_one<int, 0>() { return 0; }
template <> __device__ __forceinline__ int lf_scan_one<int, 1>() { return 1; }
template <> __device__ __forceinline__ int lf_scan_one<int, 2>() { return (int)0x80000000u; }
template <> __device__ __forceinline__ int lf_scan_one<int, 3>() { return 0x7fffffff; }

// the exclusive scan of v across the block (what the threads before this one hold together),
// and the block's total in *total (every thread calls it; wt: BLOCK / 32 slots, free again when
// it returns)
template <typename T, int OP, int BLOCK>
__device__ __forceinline__ T lf_block_scan(T v, T* total, T* wt) {
  const T one = lf_scan_one<T, OP>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  #pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T o = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v = lf_scan_op<OP>(o, v);
  }
  if (lane == 31) wt[warp] = v;
  T before = __shfl_up_sync(0xffffffffu, v, 1);
  if (lane == 0) before = one;
  __syncthreads();
  if (warp == 0) {  // the warps' totals, scanned in place
    T w = lane < BLOCK / 32 ? wt[lane] : one;
    #pragma unroll
    for (int d = 1; d < BLOCK / 32; d <<= 1) {
      const T o = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w = lf_scan_op<OP>(o, w);
    }
    if (lane < BLOCK / 32) wt[lane] = w;
  }
  __syncthreads();
  if (warp > 0) before = lf_scan_op<OP>(wt[warp - 1], before);
  *total = wt[BLOCK / 32 - 1];
  __syncthreads();
  return before;
}

// work item `item` of R * parts: row item / parts, its part [lo, hi) of ceil(N / parts)
struct lf_scan_part { int row, lo, hi; };
__device__ __forceinline__ lf_scan_part lf_scan_part_of(int item, int parts, int N) {
  const int chunk = (N + parts - 1) / parts, row = item / parts, lo = (item - row * parts) * chunk;
  return {row, lo, min(N, lo + chunk)};
}

// R rows of N elements, row r at x + r * row_stride; out R x N contiguous. R * parts work items
// (a row's part of ceil(N / parts)), taken by the blocks in turn. With parts > 1, part_tot holds
// each part's total, stored by lf_scan_part_totals.
template <typename T, int OP, int BLOCK>
__device__ void lf_scan_rows(const T* __restrict__ x, long long row_stride, int R, int N, int parts,
                             const T* __restrict__ part_tot, T* __restrict__ out) {
  __shared__ T wt[BLOCK / 32];
  const T one = lf_scan_one<T, OP>();
  for (int item = blockIdx.x; item < R * parts; item += gridDim.x) {  // (block-uniform)
    const auto [row, lo, hi] = lf_scan_part_of(item, parts, N);
    const T* xr = x + (long long)row * row_stride;
    T* orow = out + (long long)row * N;
    T carry = one;
    const int part = item - row * parts;
    if (part > 0) {  // the parts before this one, in order (a float sum's order is fixed)
      T p = one;
      for (int q = (int)threadIdx.x; q < part; q += BLOCK) p = lf_scan_op<OP>(p, part_tot[row * parts + q]);
      T all;
      lf_block_scan<T, OP, BLOCK>(p, &all, wt);
      carry = all;
    }
    for (int c0 = lo; c0 < hi; c0 += 4 * BLOCK) {  // (block-uniform)
      const int e = c0 + 4 * (int)threadIdx.x;
      T v[4];
      T acc = one;
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        acc = lf_scan_op<OP>(acc, e + u < hi ? xr[e + u] : one);
        v[u] = acc;
      }
      T chunk_tot;
      const T before = lf_scan_op<OP>(carry, lf_block_scan<T, OP, BLOCK>(acc, &chunk_tot, wt));
      #pragma unroll
      for (int u = 0; u < 4; ++u)
        if (e + u < hi) orow[e + u] = lf_scan_op<OP>(before, v[u]);
      carry = lf_scan_op<OP>(carry, chunk_tot);
    }
  }
}

// part_tot[row * parts + part] = the total of that part of the row (parts > 1)
template <typename T, int OP, int BLOCK>
__device__ void lf_scan_part_totals(const T* __restrict__ x, long long row_stride, int R, int N, int parts,
                                    T* __restrict__ part_tot) {
  __shared__ T wt[BLOCK / 32];
  const T one = lf_scan_one<T, OP>();
  for (int item = blockIdx.x; item < R * parts; item += gridDim.x) {  // (block-uniform)
    const auto [row, lo, hi] = lf_scan_part_of(item, parts, N);
    const T* xr = x + (long long)row * row_stride;
    T acc = one;
    for (int e = lo + (int)threadIdx.x; e < hi; e += BLOCK) acc = lf_scan_op<OP>(acc, xr[e]);
    T all;
    lf_block_scan<T, OP, BLOCK>(acc, &all, wt);
    if (threadIdx.x == 0) part_tot[item] = all;
  }
}

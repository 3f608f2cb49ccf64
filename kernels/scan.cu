// scan_rows (ir/composites.py; semantics in backends/numpy/row_kernels.py): the inclusive sum
// (OP 0) or product (OP 1) of each row along its last axis, float32 or int32 (int32 wraps). The
// front end's form is log2(n) shifted adds along a static axis, n^2 work or 31 steps along a
// dynamic one; this is one launch that reads and writes each element once.
//
// One block a row walks it in chunks of 4 * BLOCK: each thread scans its 4 neighbours, the
// block scans the threads' totals in shared memory (Hillis-Steele), and the row's running total
// carries into the next chunk.

template <int OP>
__device__ __forceinline__ float lf_scan_op(float a, float b) { return OP == 0 ? a + b : a * b; }
template <int OP>  // (wrapping, as int32 sums wrap on every backend; signed overflow is undefined in C++)
__device__ __forceinline__ int lf_scan_op(int a, int b) {
  return OP == 0 ? (int)((unsigned)a + (unsigned)b) : (int)((unsigned)a * (unsigned)b);
}

// R rows of N elements, row r at x + r * row_stride; out R x N contiguous
template <typename T, int OP, int BLOCK>
__device__ void lf_scan_rows(const T* __restrict__ x, long long row_stride, int R, int N, T* __restrict__ out) {
  __shared__ T tot[BLOCK];
  const T one = OP == 0 ? (T)0 : (T)1;
  for (int row = blockIdx.x; row < R; row += gridDim.x) {  // (block-uniform)
    const T* xr = x + (long long)row * row_stride;
    T* orow = out + (long long)row * N;
    T carry = one;
    for (int c0 = 0; c0 < N; c0 += 4 * BLOCK) {
      const int e = c0 + 4 * (int)threadIdx.x;
      T v[4];
      T acc = one;
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        acc = lf_scan_op<OP>(acc, e + u < N ? xr[e + u] : one);
        v[u] = acc;
      }
      tot[threadIdx.x] = acc;
      __syncthreads();
      for (int d = 1; d < BLOCK; d <<= 1) {  // inclusive scan of the threads' totals
        const T t = threadIdx.x >= d ? tot[threadIdx.x - d] : one;
        __syncthreads();
        tot[threadIdx.x] = lf_scan_op<OP>(t, tot[threadIdx.x]);
        __syncthreads();
      }
      const T before = lf_scan_op<OP>(carry, threadIdx.x > 0 ? tot[threadIdx.x - 1] : one);
      #pragma unroll
      for (int u = 0; u < 4; ++u)
        if (e + u < N) orow[e + u] = lf_scan_op<OP>(before, v[u]);
      carry = lf_scan_op<OP>(carry, tot[BLOCK - 1]);
      __syncthreads();  // (tot is rewritten by the next chunk)
    }
  }
}

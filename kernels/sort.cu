// sort_rows / argsort_rows (ir/composites.py; semantics in backends/numpy/sort_kernels.py): each
// row of x sorted along its last axis, stable, NaN after +inf, +0.0 and -0.0 tied; DESC gives
// JAX's descending order (NaN first, ties still in index order). The front end's form compares
// every pair of a row (n^2 work); this is a bitonic network (n log^2 n).
//
// Each element becomes one 64-bit key: an order-keeping 32-bit word of its value (high half) and
// its position (low half). The keys are then unique, so the network (which is not stable by
// itself) gives the stable order, and the position comes back out of the sorted key. A row is
// padded to P (a power of two) with keys of all ones, which sort last. One block sorts a row:
// the network's steps whose pairs lie within LF_SORT_TILE keys run in shared memory, the wider
// ones over the row's keys in a global scratch (R rows of P keys; none when P <= LF_SORT_TILE).

#define LF_SORT_TILE 4096

__device__ __forceinline__ unsigned lf_sort_word(float v) {
  v = v + 0.0f;  // -0.0 + 0.0 is +0.0: the two zeros are one key
  unsigned b = __float_as_uint(v);
  if (v != v) b = 0x7fc00000u;  // every NaN one positive NaN: above +inf
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ unsigned lf_sort_word(int v) { return (unsigned)v ^ 0x80000000u; }
__device__ __forceinline__ unsigned lf_sort_word(bool v) { return v ? 1u : 0u; }

template <typename T>
__device__ __forceinline__ unsigned long long lf_sort_key(const T* xr, int i, int N, int desc) {
  if (i >= N) return ~0ull;
  unsigned w = lf_sort_word(lf_ld(xr[i]));
  if (desc) w = ~w;
  return ((unsigned long long)w << 32) | (unsigned)i;
}

// the merge steps j = j_top .. 1 of stage k over n keys at s (key s[i] is the row's key base + i)
template <int BLOCK>
__device__ __forceinline__ void lf_sort_merge(unsigned long long* s, int n, int k, int j_top, int base) {
  for (int j = j_top; j > 0; j >>= 1) {
    for (int t = threadIdx.x; t < n / 2; t += BLOCK) {
      const int i = 2 * t - (t & (j - 1)), l = i + j;  // pair t at distance j
      const unsigned long long a = s[i], b = s[l];
      if ((a > b) == (((base + i) & k) == 0)) { s[i] = b; s[l] = a; }
    }
    __syncthreads();
  }
}

// R rows of N elements, row r at x + r * row_stride; vals (the sorted elements) or idx (their
// positions), R x N contiguous, whichever is given
template <typename T, int BLOCK>
__device__ void lf_sort_rows(const T* __restrict__ x, long long row_stride, int R, int N, int desc,
                             unsigned long long* __restrict__ scratch, long long scratch_stride,
                             T* __restrict__ vals, int* __restrict__ idx) {
  __shared__ unsigned long long s[LF_SORT_TILE];
  int P = 1;
  while (P < N) P <<= 1;
  const int tile = P < LF_SORT_TILE ? P : LF_SORT_TILE;
  for (int row = blockIdx.x; row < R; row += gridDim.x) {  // (block-uniform)
    const T* xr = x + (long long)row * row_stride;
    unsigned long long* g = P > LF_SORT_TILE ? scratch + (long long)row * scratch_stride : s;
    // every stage whose pairs stay within a tile, tile by tile
    for (int c = 0; c < P; c += tile) {
      for (int i = threadIdx.x; i < tile; i += BLOCK) s[i] = lf_sort_key(xr, c + i, N, desc);
      __syncthreads();
      for (int k = 2; k <= tile; k <<= 1) lf_sort_merge<BLOCK>(s, tile, k, k >> 1, c);
      if (g != s) {
        for (int i = threadIdx.x; i < tile; i += BLOCK) g[c + i] = s[i];
        __syncthreads();
      }
    }
    // wider stages: steps j >= tile over the scratch, then the rest of the stage a tile at a time
    for (int k = 2 * tile; k <= P; k <<= 1) {
      for (int j = k >> 1; j >= tile; j >>= 1) {
        for (int t = threadIdx.x; t < P / 2; t += BLOCK) {
          const int i = 2 * t - (t & (j - 1)), l = i + j;
          const unsigned long long a = g[i], b = g[l];
          if ((a > b) == ((i & k) == 0)) { g[i] = b; g[l] = a; }
        }
        __syncthreads();
      }
      for (int c = 0; c < P; c += tile) {
        for (int i = threadIdx.x; i < tile; i += BLOCK) s[i] = g[c + i];
        __syncthreads();
        lf_sort_merge<BLOCK>(s, tile, k, tile >> 1, c);
        for (int i = threadIdx.x; i < tile; i += BLOCK) g[c + i] = s[i];
        __syncthreads();
      }
    }
    for (int i = threadIdx.x; i < N; i += BLOCK) {
      const int pos = (int)(unsigned)(g[i] & 0xffffffffull);
      if (vals) vals[(long long)row * N + i] = xr[pos];
      if (idx) idx[(long long)row * N + i] = pos;
    }
    __syncthreads();  // (s is refilled by the next row)
  }
}

// sort_rows / argsort_rows (ir/composites.py; semantics in backends/numpy/sort_kernels.py): each
// row of x sorted along its last axis, stable, NaN after +inf, +0.0 and -0.0 tied; DESC gives
// JAX's descending order (NaN first, ties still in index order). The front end's form compares
// every pair of a row (n^2 work); this is a bitonic network (n log^2 n).
//
// Each element becomes one 64-bit key: an order-keeping 32-bit word of its value (high half) and
// its position (low half). The keys are then unique, so the network (which is not stable by
// itself) gives the stable order, and the position comes back out of the sorted key. A row is
// padded to P (a power of two) with keys of all ones, which sort last. A row of up to
// LF_SORT_TILE keys is one block's, in shared memory, in one launch (lf_sort_rows). A longer
// row's keys live in a global scratch (R rows of P keys) and take several launches, each over
// the whole grid (so one long row is not one SM's work): the tiles sorted, then for each wider
// stage its steps j >= TILE up to four a launch and the rest a tile at a time, then the outputs.

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

__device__ __forceinline__ int lf_sort_padded(int N) {
  int P = 1;
  while (P < N) P <<= 1;
  return P;
}

// rows of N <= LF_SORT_TILE in one launch: a block sorts a row in shared memory. R rows of N
// elements, row r at x + r * row_stride; vals (the sorted elements) or idx (their positions),
// the first F (<= N) of each row, R x F contiguous, whichever is given
template <typename T, int BLOCK>
__device__ void lf_sort_rows(const T* __restrict__ x, long long row_stride, int R, int N, int F, int desc,
                             T* __restrict__ vals, int* __restrict__ idx) {
  __shared__ unsigned long long s[LF_SORT_TILE];
  const int P = lf_sort_padded(N);
  for (int row = blockIdx.x; row < R; row += gridDim.x) {  // (block-uniform)
    const T* xr = x + (long long)row * row_stride;
    for (int i = threadIdx.x; i < P; i += BLOCK) s[i] = lf_sort_key(xr, i, N, desc);
    __syncthreads();
    for (int k = 2; k <= P; k <<= 1) lf_sort_merge<BLOCK>(s, P, k, k >> 1, 0);
    for (int i = threadIdx.x; i < F; i += BLOCK) {
      const int pos = (int)(unsigned)(s[i] & 0xffffffffull);
      if (vals) vals[(long long)row * F + i] = xr[pos];
      if (idx) idx[(long long)row * F + i] = pos;
    }
    __syncthreads();  // (s is refilled by the next row)
  }
}

// Longer rows take several launches, each spread over the whole grid; a row's keys live in the
// scratch g (row r at g + r * gs). 1: every tile of every row sorted by the stages k <= tile.
template <typename T, int BLOCK>
__device__ void lf_sort_tiles(const T* __restrict__ x, long long row_stride, int R, int N, int desc,
                              unsigned long long* __restrict__ g, long long gs) {
  __shared__ unsigned long long s[LF_SORT_TILE];
  const int P = lf_sort_padded(N), tile = P < LF_SORT_TILE ? P : LF_SORT_TILE, tiles = P / tile;
  for (int item = blockIdx.x; item < R * tiles; item += gridDim.x) {  // (block-uniform)
    const int row = item / tiles, c = (item - row * tiles) * tile;
    const T* xr = x + (long long)row * row_stride;
    for (int i = threadIdx.x; i < tile; i += BLOCK) s[i] = lf_sort_key(xr, c + i, N, desc);
    __syncthreads();
    for (int k = 2; k <= tile; k <<= 1) lf_sort_merge<BLOCK>(s, tile, k, k >> 1, c);
    for (int i = threadIdx.x; i < tile; i += BLOCK) g[(long long)row * gs + c + i] = s[i];
    __syncthreads();
  }
}

// 2. steps j, j/2, .. j/2^(S-1) (all >= LF_SORT_TILE) of stage k, in one pass over every row's
// keys (nothing where k > P): a thread holds the 2^S keys those steps exchange among themselves
// (its position's bits j/2^(S-1) .. j varied) in registers, so S steps cost one read and one
// write of the keys, not S (one row of 2^20 keys took 36 such passes, now 12).
template <int BLOCK, int S>
__device__ void lf_sort_steps(int R, int N, unsigned long long* __restrict__ g, long long gs, int k, int j) {
  const int P = lf_sort_padded(N);
  if (k > P) return;
  const int low = j >> (S - 1);
  int low_bits = 0;
  while ((1 << low_bits) < low) ++low_bits;
  const long long groups = P >> S, items = (long long)R * groups;
  for (long long q = (long long)blockIdx.x * BLOCK + threadIdx.x; q < items; q += (long long)gridDim.x * BLOCK) {
    const long long row = q / groups;
    const int t = (int)(q - row * groups);
    const int base = ((t >> low_bits) << (low_bits + S)) | (t & (low - 1));
    unsigned long long* gr = g + row * gs;
    const bool up = (base & k) == 0;  // (k > j: the direction bit is none of the varied ones)
    unsigned long long v[1 << S];
    #pragma unroll
    for (int m = 0; m < (1 << S); ++m) v[m] = gr[base + m * low];
    #pragma unroll
    for (int md = 1 << (S - 1); md > 0; md >>= 1) {
      #pragma unroll
      for (int m = 0; m < (1 << S); ++m) {
        if (m & md) continue;
        const unsigned long long a = v[m], b = v[m + md];
        if ((a > b) == up) { v[m] = b; v[m + md] = a; }
      }
    }
    #pragma unroll
    for (int m = 0; m < (1 << S); ++m) gr[base + m * low] = v[m];
  }
}

// 3. the steps j < LF_SORT_TILE of stage k, a tile at a time (nothing where k > P)
template <int BLOCK>
__device__ void lf_sort_merge_tiles(int R, int N, unsigned long long* __restrict__ g, long long gs, int k) {
  __shared__ unsigned long long s[LF_SORT_TILE];
  const int P = lf_sort_padded(N), tile = P < LF_SORT_TILE ? P : LF_SORT_TILE, tiles = P / tile;
  if (k > P) return;
  for (int item = blockIdx.x; item < R * tiles; item += gridDim.x) {  // (block-uniform)
    const int row = item / tiles, c = (item - row * tiles) * tile;
    unsigned long long* gt = g + (long long)row * gs + c;
    for (int i = threadIdx.x; i < tile; i += BLOCK) s[i] = gt[i];
    __syncthreads();
    lf_sort_merge<BLOCK>(s, tile, k, tile >> 1, c);
    for (int i = threadIdx.x; i < tile; i += BLOCK) gt[i] = s[i];
    __syncthreads();
  }
}

// 4. the sorted keys as outputs: the elements (vals) or their positions (idx), the first F of
// each row (R x F)
template <typename T, int BLOCK>
__device__ void lf_sort_out(const T* __restrict__ x, long long row_stride, int R, int F,
                            const unsigned long long* __restrict__ g, long long gs,
                            T* __restrict__ vals, int* __restrict__ idx) {
  const long long n = (long long)R * F;
  for (long long e = (long long)blockIdx.x * BLOCK + threadIdx.x; e < n; e += (long long)gridDim.x * BLOCK) {
    const long long row = e / F;
    const int i = (int)(e - row * F), pos = (int)(unsigned)(g[row * gs + i] & 0xffffffffull);
    if (vals) vals[e] = x[row * row_stride + pos];
    if (idx) idx[e] = pos;
  }
}

// top_k_rows (the first K positions of the descending order, K <= LF_SORT_TILE / 2) of rows
// longer than a tile, in two launches. 1: each tile of each row sorted (its own keys, base 0:
// every tile ascending), its first K keys to g (R rows of tiles x K candidates).
template <typename T, int BLOCK>
__device__ void lf_top_k_tiles(const T* __restrict__ x, long long row_stride, int R, int N, int K,
                               unsigned long long* __restrict__ g) {
  __shared__ unsigned long long s[LF_SORT_TILE];
  const int P = lf_sort_padded(N), tile = P < LF_SORT_TILE ? P : LF_SORT_TILE, tiles = P / tile;
  for (int item = blockIdx.x; item < R * tiles; item += gridDim.x) {  // (block-uniform)
    const int row = item / tiles, c = (item - row * tiles) * tile;
    const T* xr = x + (long long)row * row_stride;
    for (int i = threadIdx.x; i < tile; i += BLOCK) s[i] = lf_sort_key(xr, c + i, N, 1);
    __syncthreads();
    for (int k = 2; k <= tile; k <<= 1) lf_sort_merge<BLOCK>(s, tile, k, k >> 1, 0);
    for (int i = threadIdx.x; i < K; i += BLOCK) g[(long long)item * K + i] = s[i];
    __syncthreads();
  }
}

// 2. a block a row: its candidates in batches through shared memory, the best KP (K rounded up
// to a power of two) kept at the front of the next batch; the first K positions out (R x K)
template <int BLOCK>
__device__ void lf_top_k_merge(int R, int N, int K, const unsigned long long* __restrict__ g, int* __restrict__ idx) {
  __shared__ unsigned long long s[LF_SORT_TILE];
  const int P = lf_sort_padded(N), tile = P < LF_SORT_TILE ? P : LF_SORT_TILE, M = (P / tile) * K;
  const int S = lf_sort_padded(M) < LF_SORT_TILE ? lf_sort_padded(M) : LF_SORT_TILE, KP = lf_sort_padded(K);
  for (int row = blockIdx.x; row < R; row += gridDim.x) {  // (block-uniform)
    const unsigned long long* gr = g + (long long)row * M;
    for (int next = 0, lo = 0; next < M; lo = KP) {  // (block-uniform)
      for (int i = lo + (int)threadIdx.x; i < S; i += BLOCK) {
        const int c = next + i - lo;
        s[i] = c < M ? gr[c] : ~0ull;
      }
      next += S - lo;
      __syncthreads();
      for (int k = 2; k <= S; k <<= 1) lf_sort_merge<BLOCK>(s, S, k, k >> 1, 0);
    }
    for (int i = threadIdx.x; i < K; i += BLOCK) idx[(long long)row * K + i] = (int)(unsigned)(s[i] & 0xffffffffull);
    __syncthreads();
  }
}

// sort_rows / argsort_rows (ir/composites.py; semantics in backends/numpy/sort_kernels.py): each
// row of x sorted along its last axis, stable, NaN after +inf, +0.0 and -0.0 tied; DESC gives
// JAX's descending order (NaN first, ties still in index order). The front end's form compares
// every pair of a row (n^2 work).
//
// Each element becomes one 64-bit key: an order-keeping word of its value (high half) and its
// position (low half). A row of up to LF_SORT_TILE keys is one block's, in shared memory, in one
// launch (lf_sort_rows): a bitonic network (n log^2 n) over the keys padded to P (a power of two)
// with keys of all ones, which sort last; the keys are unique, so the network (not stable by
// itself) gives the stable order, and the position comes back out of the sorted key. A longer
// row takes an LSD radix sort of the same keys over its tiles (lf_radix_*, below).

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

// Longer rows: an LSD radix sort of the same keys, a pass a byte of the value word (its width
// the element's: float / int32 4 passes, half precision 2, bool 1), stable, so ties keep their
// positions as the unique keys of the network do. A pass is three launches over the rows' tiles
// of LF_RADIX_TILE keys (a block a tile): lf_radix_count (each tile's count of each digit),
// lf_radix_scan (a block a row: each tile's first place for each digit), lf_radix_scatter (each
// tile's keys to their places). The first pass reads x itself, the others the keys the previous
// one wrote (two scratches in turn), and the last writes the outputs instead of keys.
#define LF_RADIX_TILE 4096
#define LF_RADIX_BLOCK 256  // a thread a digit in the per-tile steps
#define LF_RADIX_WARPS (LF_RADIX_BLOCK / 32)
#define LF_RADIX_ITEMS (LF_RADIX_TILE / LF_RADIX_BLOCK)  // keys a thread holds
static_assert(LF_RADIX_BLOCK == 256, "lf_radix_*: a thread a digit");

// half precision: an order-keeping word of its own 16 bits (NaN above +inf, the zeros tied), the
// order of lf_sort_word on its float value in half the passes
__device__ __forceinline__ unsigned lf_radix_half(unsigned short h, float v) {
  const unsigned b = v != v ? 0x7fffu : v == 0.0f ? 0u : h;
  return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
}
template <typename T>
__device__ __forceinline__ unsigned lf_radix_word(const T* xr, int i) { return lf_sort_word(lf_ld(xr[i])); }
__device__ __forceinline__ unsigned lf_radix_word(const __half* xr, int i) {
  return lf_radix_half(reinterpret_cast<const unsigned short*>(xr)[i], lf_ld(xr[i]));
}
__device__ __forceinline__ unsigned lf_radix_word(const __nv_bfloat16* xr, int i) {
  return lf_radix_half(reinterpret_cast<const unsigned short*>(xr)[i], lf_ld(xr[i]));
}

// the key (word, position) of element i; DESC flips the word's own bits (8 a byte of T)
template <typename T>
__device__ __forceinline__ unsigned long long lf_radix_key(const T* xr, int i, int desc) {
  const unsigned flip = desc ? (unsigned)((1ull << (8 * sizeof(T))) - 1ull) : 0u;
  return ((unsigned long long)(lf_radix_word(xr, i) ^ flip) << 32) | (unsigned)i;
}

// the lanes of the warp whose (valid, digit) equal this lane's: a ballot a bit (and one for
// valid, but in a whole tile: `whole` is the same for the block)
__device__ __forceinline__ unsigned lf_radix_peers(unsigned d, bool valid, bool whole) {
  const unsigned v = whole ? 0xffffffffu : __ballot_sync(0xffffffffu, valid);
  unsigned m = valid ? v : ~v;
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    const bool bit = (d >> b) & 1u;
    const unsigned on = __ballot_sync(0xffffffffu, bit);
    m &= bit ? on : ~on;
  }
  return m;
}

// the cnt keys of a row's tile from c0 (from x where gr is null, else from gr): warp w holds the
// tile's keys w * 32 * ITEMS on, key[c] of lane l the (c * 32 + l)-th of them (~0 past cnt)
template <typename T>
__device__ __forceinline__ void lf_radix_load(const T* xr, const unsigned long long* gr, int c0, int cnt, int desc,
                                              unsigned long long (&key)[LF_RADIX_ITEMS]) {
  const int first = (threadIdx.x >> 5) * 32 * LF_RADIX_ITEMS + (threadIdx.x & 31);
#pragma unroll
  for (int c = 0; c < LF_RADIX_ITEMS; ++c) {  // (all loads first: in flight together)
    const int i = first + c * 32;
    key[c] = i >= cnt ? ~0ull : gr ? gr[c0 + i] : lf_radix_key(xr, c0 + i, desc);
  }
}

// those keys ranked by their digit at bit `shift` of the key: each warp counts its keys in order
// (ballots give a lane the peers below it), so rank[c] is the number of the warp's earlier keys
// of the same digit: the stable order. After it wc[w * 256 + d] is the number of keys of digit d
// in warps before w, and the result thread d's count of digit d in the tile.
__device__ __forceinline__ int lf_radix_rank(const unsigned long long (&key)[LF_RADIX_ITEMS], int cnt, int shift,
                                             int (&rank)[LF_RADIX_ITEMS], int* wc) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, first = w * 32 * LF_RADIX_ITEMS + lane;
  for (int j = threadIdx.x; j < LF_RADIX_WARPS * 256; j += LF_RADIX_BLOCK) wc[j] = 0;
  __syncthreads();
  int* mine = wc + w * 256;
#pragma unroll
  for (int c = 0; c < LF_RADIX_ITEMS; ++c) {
    const bool valid = first + c * 32 < cnt;
    const unsigned d = (unsigned)(key[c] >> shift) & 255u;
    const unsigned peers = lf_radix_peers(d, valid, cnt == LF_RADIX_TILE);
    const int below = __popc(peers & ((1u << lane) - 1u)), before = mine[d];
    __syncwarp();  // (every peer has read the count before the lowest one adds to it)
    if (valid && below == 0) mine[d] = before + __popc(peers);
    __syncwarp();
    rank[c] = before + below;
  }
  __syncthreads();
  int total = 0;
  for (int v = 0; v < LF_RADIX_WARPS; ++v) {
    const int k = wc[v * 256 + threadIdx.x];
    wc[v * 256 + threadIdx.x] = total;
    total += k;
  }
  return total;
}

// the sum of v over the threads before this one in the block (ws: 32 ints of shared memory)
template <int BLOCK>
__device__ __forceinline__ int lf_radix_exscan(int v, int* ws) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += u;
  }
  if (lane == 31) ws[w] = inc;
  __syncthreads();
  for (int j = 0; j < w; ++j) inc += ws[j];
  __syncthreads();  // (ws is free for the next call)
  return inc - v;
}

// 1. each tile's digit counts (a warp's peers add theirs at once): h holds, per row, tiles x 256
// digits (row r at h + r * tiles * 256)
template <typename T>
__device__ void lf_radix_count(const T* __restrict__ x, long long row_stride, int R, int N, int desc, int shift,
                               const unsigned long long* __restrict__ gin, int* __restrict__ h) {
  __shared__ int hc[256];
  const int tiles = (N + LF_RADIX_TILE - 1) / LF_RADIX_TILE, lane = threadIdx.x & 31;
  const int first = (threadIdx.x >> 5) * 32 * LF_RADIX_ITEMS + lane;
  for (int item = blockIdx.x; item < R * tiles; item += gridDim.x) {  // (block-uniform)
    const int row = item / tiles, t = item - row * tiles, c0 = t * LF_RADIX_TILE, cnt = min(LF_RADIX_TILE, N - c0);
    hc[threadIdx.x] = 0;
    unsigned long long key[LF_RADIX_ITEMS];
    lf_radix_load(x + row * row_stride, gin ? gin + (long long)row * N : gin, c0, cnt, desc, key);
    __syncthreads();
#pragma unroll
    for (int c = 0; c < LF_RADIX_ITEMS; ++c) {
      const bool valid = first + c * 32 < cnt;
      const unsigned d = (unsigned)(key[c] >> shift) & 255u, peers = lf_radix_peers(d, valid, cnt == LF_RADIX_TILE);
      if (valid && !(peers & ((1u << lane) - 1u))) atomicAdd(&hc[d], __popc(peers));
    }
    __syncthreads();
    h[((long long)row * tiles + t) * 256 + threadIdx.x] = hc[threadIdx.x];
    __syncthreads();
  }
}

// 2. a block a row: h's counts become their exclusive prefix sums in the order digit, then tile:
// each tile's first place in the row for each digit. Thread j sums digit j / PARTS over its part
// of the tiles (a warp's loads: a few whole sectors), one block scan of those sums in thread
// order, then the thread writes its part's prefixes.
template <int BLOCK>
__device__ void lf_radix_scan(int R, int N, int* __restrict__ h) {
  constexpr int PARTS = BLOCK / 256;
  __shared__ int ws[32];
  const int tiles = (N + LF_RADIX_TILE - 1) / LF_RADIX_TILE, per = (tiles + PARTS - 1) / PARTS;
  const int lo = min((int)(threadIdx.x % PARTS) * per, tiles), hi = min(lo + per, tiles);
  for (int row = blockIdx.x; row < R; row += gridDim.x) {  // (block-uniform)
    int* hd = h + (long long)row * tiles * 256 + threadIdx.x / PARTS;
    int sum = 0;
#pragma unroll 8
    for (int t = lo; t < hi; ++t) sum += hd[t * 256];
    int run = lf_radix_exscan<BLOCK>(sum, ws);
    for (int t = lo; t < hi; ++t) {
      const int c = hd[t * 256];
      hd[t * 256] = run;
      run += c;
    }
  }
}

// 3. each tile's keys in their stable order within it (in shared memory), then to their places:
// gout's row (keys of the next pass), or where gout is null the outputs, the first F of each
// row (R x F): the elements (vals) or their positions (idx), whichever is given
template <typename T>
__device__ void lf_radix_scatter(const T* __restrict__ x, long long row_stride, int R, int N, int F, int desc,
                                 int shift, const unsigned long long* __restrict__ gin, const int* __restrict__ h,
                                 unsigned long long* __restrict__ gout, T* __restrict__ vals, int* __restrict__ idx) {
  __shared__ unsigned long long s[LF_RADIX_TILE];
  __shared__ int wc[LF_RADIX_WARPS * 256], base[256], ws[32];
  const int tiles = (N + LF_RADIX_TILE - 1) / LF_RADIX_TILE, d = threadIdx.x, w = threadIdx.x >> 5;
  for (int item = blockIdx.x; item < R * tiles; item += gridDim.x) {  // (block-uniform)
    const int row = item / tiles, t = item - row * tiles, c0 = t * LF_RADIX_TILE, cnt = min(LF_RADIX_TILE, N - c0);
    const T* xr = x + row * row_stride;
    unsigned long long key[LF_RADIX_ITEMS];
    int rank[LF_RADIX_ITEMS];
    lf_radix_load(xr, gin ? gin + (long long)row * N : gin, c0, cnt, desc, key);
    const int total = lf_radix_rank(key, cnt, shift, rank, wc);
    const int start = lf_radix_exscan<LF_RADIX_BLOCK>(total, ws);  // digit d's first place in the tile
    base[d] = h[((long long)row * tiles + t) * 256 + d] - start;
    for (int v = 0; v < LF_RADIX_WARPS; ++v) wc[v * 256 + d] += start;
    __syncthreads();
#pragma unroll
    for (int c = 0; c < LF_RADIX_ITEMS; ++c)
      if (w * 32 * LF_RADIX_ITEMS + (threadIdx.x & 31) + c * 32 < cnt)
        s[wc[w * 256 + ((unsigned)(key[c] >> shift) & 255u)] + rank[c]] = key[c];
    __syncthreads();
    for (int i = threadIdx.x; i < cnt; i += LF_RADIX_BLOCK) {  // (a digit's run: consecutive places)
      const unsigned long long k = s[i];
      const int to = base[(unsigned)(k >> shift) & 255u] + i;
      if (gout) {
        gout[(long long)row * N + to] = k;
      } else if (to < F) {
        const int pos = (int)(unsigned)(k & 0xffffffffull);
        if (vals) vals[(long long)row * F + to] = xr[pos];
        if (idx) idx[(long long)row * F + to] = pos;
      }
    }
    __syncthreads();
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

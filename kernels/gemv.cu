// GEMV for one row of activations: y (N) = x (K) @ W, W given as its (K, N) logical matrix.
//
// lf_gemv_nk: W stored with k contiguous (W[n, k] at w + n*ldw + k, torch's Linear layout).
//   Warps per row WPR in {1, 2, 4, 8} (more for fewer rows, so the grid fills the device); a
//   block of 256 threads handles 8/WPR rows; lanes load
//   16 bytes of a row at a time and a warp shuffle (plus shared memory across the WPR warps)
//   sums them.
// lf_gemv_kn_to: W stored with n contiguous (W[k, n] at w + k*ldw + n, the x @ W layout of
//   luminal_fn.nn.linear). A block of 256 threads covers LC*V columns (LC lanes a row) and chunks
//   of 256/LC*ROWS rows (split-K over blockIdx.y); shuffles and shared memory sum the rows; with a
//   split, lf_gemv_partials_to adds the float partials in a second kernel.
// Both need K (nk) or N (kn) and the leading dim to be multiples of V = 16 / sizeof(T), and
// 16-byte aligned bases; the host checks and otherwise falls back to cuBLAS.
//   ITERS > 0: K == ITERS * WPR * 32 * V, known when the kernel is rendered, so every load of a
//   lane's share of the row is issued before the first multiply (more bytes in flight).
//   The block index and block count are arguments, not blockIdx.x / gridDim.x: one launch can
//   run several GEMVs that read the same x (a decode step's q, k, v), each on its own range of
//   blocks (block = blockIdx.x - the range's start, blocks = the range's length).
//   lf_gemv_nk_to hands each finished dot product to store(n, acc) instead of writing y[n]: a
//   wrapper can apply an elementwise epilogue there (the residual add after a projection).
//   The Linear-layout GEMVs take x as a pointer or as an LfRmsRow (the RMS norm before them,
//   computed by each block: see LfRmsRow below).
//   Both wait (lf_pdl_wait) for the kernel before only after asking L2 for the first
//   LF_GEMV_PREFETCH bytes of each weight row they read first: with programmatic dependent
//   launch the weight stream starts during the previous kernel's tail. Their callers must
//   not read what an earlier kernel wrote before the call (render with meta waits_inside).
#ifndef LF_GEMV_PREFETCH  // bytes; the module source sets it from LUMINAL_CUDA_GEMV_PREFETCH
// (H200, the Llama-3.2-1B bf16 decode step replayed alone: run T 839 us at 2048, 828 at 0,
// 828 at 1024; run U 829.5, 818.5, 818.8). Loading the whole first row into registers before
// the wait instead was slower (run V: 932 us against 815 us), and so were weight loads through
// ld.global.nc.L1::no_allocate.L2::256B (run Y: 853 us against 820 us with plain 16-byte loads).
#define LF_GEMV_PREFETCH 1024
#endif
// GEMVs whose x a prologue computes (LfRmsRow) may issue their first rows' weight loads before
// it, held raw (LfRaw) until the multiply: bit 1 single and merged GEMVs, bit 2 the gate/up pair.
// H200, the Llama-1B bf16 decode step replayed alone (runs CF, docs/benchmarks.md): 766.3 and
// 766.8 us with none, 754.5 with the pair's, 768.2 with the singles' (q/k/v alone 5.2 against
// 6.0 us, but 64-76 registers instead of 42-46), 764.4 and 762.9 with both.
#ifndef LF_GEMV_EARLY  // the module source sets it from LUMINAL_CUDA_GEMV_EARLY
#define LF_GEMV_EARLY 2
#endif
template <typename T>
__device__ __forceinline__ void lf_gemv_prefetch(const T* __restrict__ row, int K, int part, int WPR, int lane) {
  const char* p = (const char*)row;
  const int bytes = min(K * (int)sizeof(T), LF_GEMV_PREFETCH);
  for (int off = (part * 32 + lane) * 128; off < bytes; off += WPR * 32 * 128) lf_prefetch_l2(p + off);
}

// The x row a Linear-layout GEMV reads: a pointer (x as stored, in the weights' type), or
// LfRmsRow, the one-row RMS norm before the GEMV folded into it (backends/cuda/prologue.py). A
// block then computes the row itself into shared memory (xs, D values of TY) as
// lf_rms_rows<TX, TW, TY, BLOCK, TR> would store it: its first BLOCK threads hold the same
// vectors of h and g as that kernel's threads and add the same terms in the same order (the
// others add zeros, exact in the block sum's tree), so every value has the same bits. The norm's
// weight g is loaded before the wait for the kernel before (lf_xhold), h right after it
// (lf_xprepare), before the block's first weight loads.
template <typename TX, typename TW, typename TY, int BLOCK, typename TR, int D> struct LfRmsRow {
  static constexpr int V = LfVec<TX>::V, HOLD = (D + BLOCK * V - 1) / (BLOCK * V);
  const TX* __restrict__ h;
  const TW* __restrict__ g;
  TY* xs;
  float inv_n, eps;
  float gv[HOLD][V];
};

// Whether the GEMV's x is computed by each block (a prologue) rather than read: such a GEMV may
// issue its first rows' weight loads before that computation (LF_GEMV_EARLY), so that the two
// latencies overlap.
template <typename X> struct LfComputesX { static constexpr bool value = false; };
template <typename TX, typename TW, typename TY, int BLOCK, typename TR, int D>
struct LfComputesX<LfRmsRow<TX, TW, TY, BLOCK, TR, D>> { static constexpr bool value = true; };

template <typename X> __device__ __forceinline__ void lf_xhold(X&) {}
template <typename X> __device__ __forceinline__ void lf_xprepare(X&) {}
template <typename TX, typename TW, typename TY, int BLOCK, typename TR, int D>
__device__ __forceinline__ void lf_xhold(LfRmsRow<TX, TW, TY, BLOCK, TR, D>& x) {
  using R = LfRmsRow<TX, TW, TY, BLOCK, TR, D>;
  #pragma unroll
  for (int q = 0; q < R::HOLD; ++q) {
    const int i = (threadIdx.x + q * BLOCK) * R::V;
    if (threadIdx.x < BLOCK && i < D) lf_vld<R::V>(x.g + i, x.gv[q]);
  }
}
template <typename TX, typename TW, typename TY, int BLOCK, typename TR, int D>
__device__ __forceinline__ void lf_xprepare(LfRmsRow<TX, TW, TY, BLOCK, TR, D>& x) {  // the whole block calls it
  using R = LfRmsRow<TX, TW, TY, BLOCK, TR, D>;
  __shared__ float red[32];
  float hv[R::HOLD][R::V];
  float ss = 0.f;
  #pragma unroll
  for (int q = 0; q < R::HOLD; ++q) {
    const int i = (threadIdx.x + q * BLOCK) * R::V;
    if (threadIdx.x < BLOCK && i < D) {
      lf_vld<R::V>(x.h + i, hv[q]);
      #pragma unroll
      for (int j = 0; j < R::V; ++j) ss += hv[q][j] * hv[q][j];
    }
  }
  const float r = 1.0f / sqrtf(lf_block_sum<256>(ss, red) * x.inv_n + x.eps);
  #pragma unroll
  for (int q = 0; q < R::HOLD; ++q) {
    const int i = (threadIdx.x + q * BLOCK) * R::V;
    if (threadIdx.x < BLOCK && i < D) {
      #pragma unroll
      for (int j = 0; j < R::V; ++j) x.xs[i + j] = lf_st<TY>(lf_round<TR>(hv[q][j] * r) * x.gv[q][j]);
    }
  }
  __syncthreads();
}
template <int V, typename T>
__device__ __forceinline__ void lf_xload(const T* __restrict__ x, int k, float (&b)[V]) { lf_vld<V>(x + k, b); }
template <int V, typename TX, typename TW, typename TY, int BLOCK, typename TR, int D>
__device__ __forceinline__ void lf_xload(const LfRmsRow<TX, TW, TY, BLOCK, TR, D>& x, int k, float (&b)[V]) {
  lf_vld<V>(x.xs + k, b);
}

template <typename T> struct LfGemvStore {
  T* __restrict__ y;
  __device__ __forceinline__ void operator()(int n, float acc) const { y[n] = lf_st<T>(acc); }
};

// lf_gemv_nk_rows_to: lf_gemv_nk_to, or with PAIRS (one warp a row, WPR == 1) the rows of RoPE's
// pairs: the block's warps 0-3 take rows d of four pairs and warps 4-7 their rows d + half (rows
// h * 2 * half + j and that + half for pair p = h * half + j), and the two dot products of pair p
// go to store(p, acc_d, acc_d_half) together, through shared memory.
template <typename T, int ITERS, bool PAIRS, typename X, typename Store>
__device__ void lf_gemv_nk_rows_to(const T* __restrict__ w, long long ldw, X x, int N, int K, int WPR,
                                   int half, int block, int blocks, const Store& store) {
  constexpr int V = 16 / sizeof(T);
  __shared__ float red[8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rpb = 8 / WPR, row_in = warp / WPR, part = warp % WPR;
  // the row this warp computes in the group of rpb rows from ``base``, and whether it exists
  auto row_of = [&](int base) -> int {
    if constexpr (PAIRS) {
      const int p = base / 2 + (row_in & 3);
      return (p / half) * 2 * half + p % half + (row_in >> 2) * half;
    } else {
      return base + row_in;
    }
  };
  auto valid = [&](int base) -> bool {
    if constexpr (PAIRS) return base / 2 + (row_in & 3) < N / 2;
    else return base + row_in < N;
  };
  if (valid(block * rpb)) lf_gemv_prefetch(w + (long long)row_of(block * rpb) * ldw, K, part, WPR, lane);
  lf_xhold(x);
  lf_pdl_wait();
  constexpr bool EARLY = ITERS > 0 && LfComputesX<X>::value && (LF_GEMV_EARLY & 1);
  LfRaw<T> head[EARLY ? ITERS : 1];  // the first row's weights, loaded before x is computed
  if constexpr (EARLY) {
    if (valid(block * rpb)) {  // (k0 and step as the loop below names them)
      const T* wr = w + (long long)row_of(block * rpb) * ldw;
      const int k0 = (part * 32 + lane) * V, step = WPR * 32 * V;
      #pragma unroll
      for (int i = 0; i < ITERS; ++i) head[i] = lf_vraw(wr + k0 + i * step);
    }
  }
  lf_xprepare(x);
  for (int base = block * rpb; base < N; base += blocks * rpb) {
    const int n = row_of(base);
    const bool ok = valid(base);
    float acc = 0.f;
    if (ok) {
      const T* wr = w + (long long)n * ldw;
      const int k0 = (part * 32 + lane) * V, step = WPR * 32 * V;
      if (ITERS > 0) {
        if constexpr (EARLY) {  // raw loads, converted at the multiply (the first row's: head)
          if (base != block * rpb) {
            #pragma unroll
            for (int i = 0; i < ITERS; ++i) head[i] = lf_vraw(wr + k0 + i * step);
          }
          #pragma unroll
          for (int i = 0; i < ITERS; ++i) {
            float a[V], b[V];
            lf_vcvt<V>(head[i], a);
            lf_xload<V>(x, k0 + i * step, b);
            #pragma unroll
            for (int j = 0; j < V; ++j) acc += a[j] * b[j];
          }
        } else {
          float a[ITERS > 0 ? ITERS : 1][V];
          #pragma unroll
          for (int i = 0; i < ITERS; ++i) lf_vld<V>(wr + k0 + i * step, a[i]);
          #pragma unroll
          for (int i = 0; i < ITERS; ++i) {
            float b[V];
            lf_xload<V>(x, k0 + i * step, b);
            #pragma unroll
            for (int j = 0; j < V; ++j) acc += a[i][j] * b[j];
          }
        }
      } else {
        #pragma unroll 4
        for (int k = k0; k < K; k += step) {
          float a[V], b[V];
          lf_vld<V>(wr + k, a);
          lf_xload<V>(x, k, b);
          #pragma unroll
          for (int j = 0; j < V; ++j) acc += a[j] * b[j];
        }
      }
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if constexpr (PAIRS) {
      if (lane == 0) red[warp] = acc;
      __syncthreads();
      if (warp < 4 && lane == 0 && ok) store(base / 2 + warp, red[warp], red[warp + 4]);
      __syncthreads();
    } else if (WPR == 1) {
      if (lane == 0 && ok) store(n, acc);
    } else {
      if (lane == 0) red[warp] = acc;
      __syncthreads();
      if (part == 0 && lane == 0 && ok) {
        float s = 0.f;
        for (int p = 0; p < WPR; ++p) s += red[row_in * WPR + p];
        store(n, s);
      }
      __syncthreads();
    }
  }
}

template <typename T, int ITERS, typename X, typename Store>
__device__ void lf_gemv_nk_to(const T* __restrict__ w, long long ldw, X x,
                              int N, int K, int WPR, int block, int blocks, const Store& store) {
  lf_gemv_nk_rows_to<T, ITERS, false>(w, ldw, x, N, K, WPR, 0, block, blocks, store);
}

// RoPE's pairs of an output of N rows in heads of 2 * half (backends/cuda/gemv_stores.py):
// store(p, acc_d, acc_d_half) for each pair p, one warp a row
template <typename T, int ITERS, typename X, typename Store>
__device__ void lf_gemv_nk_rope_to(const T* __restrict__ w, long long ldw, X x,
                                   int N, int K, int half, int block, int blocks, const Store& store) {
  lf_gemv_nk_rows_to<T, ITERS, true>(w, ldw, x, N, K, 1, half, block, blocks, store);
}

// lf_gemv_nk_pair_to: row n of two weight matrices of the same shape (a gated MLP's gate and
// up) by the same warps, both dot products handed to store(n, acc0, acc1), so an epilogue such as
// silu(gate) * up needs neither product written. Both rows' loads are issued together; with
// ITERS > 0 (K == ITERS * WPR * 32 * V) every load of a lane's share of both rows is issued
// before the first multiply, as in lf_gemv_nk_to.
template <typename T, int ITERS, typename X, typename Store>
__device__ void lf_gemv_nk_pair_to(const T* __restrict__ w0, long long ldw0, const T* __restrict__ w1,
                                   long long ldw1, X x, int N, int K, int WPR,
                                   int block, int blocks, const Store& store) {
  constexpr int V = 16 / sizeof(T);
  __shared__ float red[2][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rpb = 8 / WPR, row_in = warp / WPR, part = warp % WPR;
  if (block * rpb + row_in < N) {
    lf_gemv_prefetch(w0 + (long long)(block * rpb + row_in) * ldw0, K, part, WPR, lane);
    lf_gemv_prefetch(w1 + (long long)(block * rpb + row_in) * ldw1, K, part, WPR, lane);
  }
  lf_xhold(x);
  lf_pdl_wait();
  constexpr bool EARLY = ITERS > 0 && LfComputesX<X>::value && (LF_GEMV_EARLY & 2);
  LfRaw<T> head0[EARLY ? ITERS : 1], head1[EARLY ? ITERS : 1];  // the first rows, before x is computed
  if constexpr (EARLY) {
    if (block * rpb + row_in < N) {
      const T* r0 = w0 + (long long)(block * rpb + row_in) * ldw0;
      const T* r1 = w1 + (long long)(block * rpb + row_in) * ldw1;
      const int k0 = (part * 32 + lane) * V, step = WPR * 32 * V;  // (as the loop below names them)
      #pragma unroll
      for (int i = 0; i < ITERS; ++i) { head0[i] = lf_vraw(r0 + k0 + i * step); head1[i] = lf_vraw(r1 + k0 + i * step); }
    }
  }
  lf_xprepare(x);
  for (int base = block * rpb; base < N; base += blocks * rpb) {
    const int n = base + row_in;
    float acc0 = 0.f, acc1 = 0.f;
    if (n < N) {
      const T* r0 = w0 + (long long)n * ldw0;
      const T* r1 = w1 + (long long)n * ldw1;
      const int step = WPR * 32 * V, k0 = (part * 32 + lane) * V;
      if (ITERS > 0) {
        if constexpr (EARLY) {  // raw loads, converted at the multiply (the first rows': head0/1)
          if (base != block * rpb) {
            #pragma unroll
            for (int i = 0; i < ITERS; ++i) { head0[i] = lf_vraw(r0 + k0 + i * step); head1[i] = lf_vraw(r1 + k0 + i * step); }
          }
          #pragma unroll
          for (int i = 0; i < ITERS; ++i) {
            float a[V], b[V], c[V];
            lf_vcvt<V>(head0[i], a);
            lf_vcvt<V>(head1[i], b);
            lf_xload<V>(x, k0 + i * step, c);
            #pragma unroll
            for (int j = 0; j < V; ++j) { acc0 += a[j] * c[j]; acc1 += b[j] * c[j]; }
          }
        } else {
          float a[ITERS > 0 ? ITERS : 1][V], b[ITERS > 0 ? ITERS : 1][V];
          #pragma unroll
          for (int i = 0; i < ITERS; ++i) { lf_vld<V>(r0 + k0 + i * step, a[i]); lf_vld<V>(r1 + k0 + i * step, b[i]); }
          #pragma unroll
          for (int i = 0; i < ITERS; ++i) {
            float c[V];
            lf_xload<V>(x, k0 + i * step, c);
            #pragma unroll
            for (int j = 0; j < V; ++j) { acc0 += a[i][j] * c[j]; acc1 += b[i][j] * c[j]; }
          }
        }
      } else {
        #pragma unroll 4
        for (int k = k0; k < K; k += step) {
          float a[V], b[V], c[V];
          lf_vld<V>(r0 + k, a);
          lf_vld<V>(r1 + k, b);
          lf_xload<V>(x, k, c);
          #pragma unroll
          for (int j = 0; j < V; ++j) { acc0 += a[j] * c[j]; acc1 += b[j] * c[j]; }
        }
      }
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      acc0 += __shfl_xor_sync(0xffffffffu, acc0, o);
      acc1 += __shfl_xor_sync(0xffffffffu, acc1, o);
    }
    if (WPR == 1) {
      if (lane == 0 && n < N) store(n, acc0, acc1);
    } else {
      if (lane == 0) { red[0][warp] = acc0; red[1][warp] = acc1; }
      __syncthreads();
      if (part == 0 && lane == 0 && n < N) {
        float s0 = 0.f, s1 = 0.f;
        for (int p = 0; p < WPR; ++p) { s0 += red[0][row_in * WPR + p]; s1 += red[1][row_in * WPR + p]; }
        store(n, s0, s1);
      }
      __syncthreads();
    }
  }
}

template <typename T, int ITERS, typename X>
__device__ void lf_gemv_nk(const T* __restrict__ w, long long ldw, X x,
                           T* __restrict__ y, int N, int K, int WPR, int block, int blocks) {
  lf_gemv_nk_to<T, ITERS>(w, ldw, x, N, K, WPR, block, blocks, LfGemvStore<T>{y});
}

// lf_gemv_kn_to: block (bx, by) of 256 threads covers COLS = LC*V columns of W (K, N), stripe bx,
// and an equal share of K's chunks of KC = RS*ROWS rows (share by: split-K among S blocks). The
// caller passes the block's (bx, by) (blockIdx.x and .y, or its place within its range of a
// launch that several GEMVs share: siblings.py). LC lanes of a
// warp read one row's COLS columns (LC * 16 bytes), so a warp reads RW = 32 / LC rows at once and
// the block RS = 8 * RW rows; thread (ty, tx) reads rows ty + RS*i (i < ROWS) of each chunk, every
// load of a chunk issued before its first multiply. Narrow stripes (LC < 32) give a product of
// few columns blocks enough to fill the device without a split. Shuffles add the rows of a warp's
// lanes that share columns, shared memory the 8 warps. With S == 1 the block hands each column's
// sum to store(col, value); with S > 1 it writes its float sums to partial[by * N + col]
// and lf_gemv_partials_to adds them up (and calls store). (H200: a second kernel beat the
// stripe's last block adding them in the same launch, 10.2 against 10.8 us at 2048x8192 bf16;
// docs/benchmarks.md.) Asking L2 for each thread's first chunk before the PDL wait measured no
// different (H200 run AU, 10.1-10.3 us either way at 2048x8192 and 8192x2048 bf16).
template <typename T, int ROWS, int LC, typename Store>
__device__ void lf_gemv_kn_to(const T* __restrict__ w, long long ldw, const T* __restrict__ x,
                              float* __restrict__ partial, int N, int K, int S, int bx, int by,
                              const Store& store) {
  static_assert(LC == 4 || LC == 8 || LC == 16 || LC == 32, "LC lanes a row: 4, 8, 16 or 32");
  constexpr int V = 16 / sizeof(T), RW = 32 / LC, RS = 8 * RW, KC = RS * ROWS, COLS = LC * V;
  __shared__ float red[8][COLS + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int tx = lane % LC, ty = warp * RW + lane / LC;
  const int col0 = (bx * LC + tx) * V;
  const int share = (K + S * KC - 1) / (S * KC) * KC;  // rows of K this block reads
  const int k1 = min(K, (by + 1) * share);
  float acc[V];
  #pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = 0.f;
  if (col0 < N) {
    for (int k0 = by * share + ty; k0 < k1; k0 += KC) {
      float a[ROWS][V], xv[ROWS];
      const T* wr = w + (long long)k0 * ldw + col0;
      if (k0 + RS * (ROWS - 1) < k1) {  // a whole chunk: no conditions between the loads
        #pragma unroll
        for (int i = 0; i < ROWS; ++i) lf_vld<V>(wr + RS * i * ldw, a[i]);
        #pragma unroll
        for (int i = 0; i < ROWS; ++i) xv[i] = lf_ld(x[k0 + RS * i]);
      } else {
        #pragma unroll
        for (int i = 0; i < ROWS; ++i) {
          xv[i] = 0.f;
          #pragma unroll
          for (int j = 0; j < V; ++j) a[i][j] = 0.f;
          if (k0 + RS * i < k1) {
            lf_vld<V>(wr + RS * i * ldw, a[i]);
            xv[i] = lf_ld(x[k0 + RS * i]);
          }
        }
      }
      #pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        #pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += xv[i] * a[i][j];
      }
    }
  }
  #pragma unroll
  for (int o = LC; o < 32; o <<= 1) {  // the lanes holding the same columns (none when LC == 32)
    #pragma unroll
    for (int j = 0; j < V; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
  }
  if (lane < LC) {
    #pragma unroll
    for (int j = 0; j < V; ++j) red[warp][tx * V + j] = acc[j];
  }
  __syncthreads();
  const int base = bx * COLS;
  for (int c = threadIdx.x; c < COLS; c += 256) {
    float s = 0.f;
    #pragma unroll
    for (int g = 0; g < 8; ++g) s += red[g][c];
    if (base + c < N) {
      if (S == 1) store(base + c, s);
      else partial[(long long)by * N + base + c] = s;
    }
  }
}

// the second kernel of a split lf_gemv_kn_to: store(n, the S partials of column n added up). Block
// bx of 256 threads covers columns 128 bx.. (N a multiple of 4, each partial row 16-byte aligned):
// warp g loads partials g, g + 8, ... as float4s, all issued before the first add, and shared
// memory adds the 8 warps' sums, so a column's S loads run as one round trip over 8 warps rather
// than S in a row on one thread (a 2048-column product split 32 ways is 16 blocks).
template <int S, typename Store>
__device__ void lf_gemv_partials_to(const float* __restrict__ partial, int N, int bx, const Store& store) {
  constexpr int P = (S + 7) / 8;  // partials a warp loads
  __shared__ float4 red[8][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c4 = bx * 32 + lane;  // this lane's four columns, c4 * 4 ...
  float4 v[P];
  #pragma unroll
  for (int i = 0; i < P; ++i) {
    const int p = warp + 8 * i;
    v[i] = (p < S && 4 * c4 < N) ? __ldg((const float4*)(partial + (long long)p * N) + c4)
                                 : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float4 t = v[0];
  #pragma unroll
  for (int i = 1; i < P; ++i) {
    t.x += v[i].x; t.y += v[i].y; t.z += v[i].z; t.w += v[i].w;
  }
  red[warp][lane] = t;
  __syncthreads();
  if (threadIdx.x < 128) {
    const int c = threadIdx.x, n = bx * 128 + c;
    float s = 0.f;
    #pragma unroll
    for (int g = 0; g < 8; ++g) s += ((const float*)&red[g][c >> 2])[c & 3];
    if (n < N) store(n, s);
  }
}

// split_k.py's sum: store(n, the S partials of element n added in order) for MN elements (a
// multiple of E; each partial MN floats, aligned to E floats), E elements a thread (1, 2 or 4;
// split_k.sum_width: 2 unless 4 still leaves the device blocks enough), all S loads of them
// issued before the first add (S is known when the kernel is rendered).
template <int E> __device__ __forceinline__ void lf_ldg_floats(const float* __restrict__ p, float (&v)[E]) {
  if constexpr (E == 4) {
    const float4 t = __ldg((const float4*)p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (E == 2) {
    const float2 t = __ldg((const float2*)p);
    v[0] = t.x; v[1] = t.y;
  } else {
    v[0] = __ldg(p);
  }
}

template <int S, int E, typename Store>
__device__ void lf_split_k_sum_to(const float* __restrict__ partial, int MN, const Store& store) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < MN / E; i += blockDim.x * gridDim.x) {
    float v[S][E];
    #pragma unroll
    for (int p = 0; p < S; ++p) lf_ldg_floats<E>(partial + (long long)p * MN + (long long)E * i, v[p]);
    #pragma unroll
    for (int e = 0; e < E; ++e) {
      float t = v[0][e];
      #pragma unroll
      for (int p = 1; p < S; ++p) t += v[p][e];
      store(E * i + e, t);
    }
  }
}

// lf_skinny_nt_to: C (M, N) = A (M, K) @ W^T for W stored (N, K) (a Linear's layout) and few
// rows (M <= 16 * MT: a prompt's tokens), on tensor cores (mma.sync m16n8k16, float sums), so
// the weights stream once at the GEMV's pace rather than through cuBLAS's tiles for large M. A
// block of 128 threads covers 32 rows of W (NT = 4 tiles of 8 columns of C) and an equal share
// of K's chunks of 64 (blockIdx.y's share of S); warp w takes chunks w, w + 4, ... of it. A
// lane loads 16 bytes of each of its W rows (n0 + 8j + lane / 4) and of its A rows (16mt +
// lane / 4, + 8) at k0 + 8 * (lane % 4) and k0 + 32 + 8 * (lane % 4): every load is 16 bytes,
// since the k order inside a chunk is permuted alike for both operands (mma's logical k pair
// 2q, 2q + 1 is physical 8q + 4t, + 1 and its pair 2q + 8, + 9 is 8q + 4t + 2, + 3, for the
// chunk's halves t = 0, 1 of each 16-byte load) and a sum does not depend on its order. Shared
// memory adds the 4 warps. With S == 1 the block hands element (m, n) to store(m * N + n, v);
// with S > 1 it writes partial[blockIdx.y * M * N + m * N + n] and lf_split_k_sum_to adds them.
// Before lf_pdl_wait it asks L2 for the W rows of its first PF chunks (W is never written by an
// earlier kernel, so it streams during that kernel's tail; the caller renders meta waits_inside).
// Needs K % 64 == 0, lda and ldw multiples of 8 and 16-byte aligned bases (the planner checks).
template <typename T, int MT, int PF, typename Store>
__device__ void lf_skinny_nt_to(const T* __restrict__ a, long long lda, const T* __restrict__ w, long long ldw,
                                float* __restrict__ partial, int M, int N, int K, int S, const Store& store) {
  constexpr int NT = 4, KC = 64;
  __shared__ float red[4][MT * 16][NT * 8 + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int n0 = blockIdx.x * (NT * 8);
  const int chunks = K / KC, share = (chunks + S - 1) / S;
  const int c1 = min(chunks, (int)(blockIdx.y + 1) * share);
  const int mts = min(MT, (M + 15) / 16);  // the tiles of 16 rows this call's M needs (MT: the bucket's)
  if (PF > 0 && q == 0) {  // W's rows of this warp's first PF chunks (128 bytes a row), before the wait
    for (int c = blockIdx.y * share + warp, i = 0; c < c1 && i < PF; c += 4, ++i)
      #pragma unroll
      for (int j = 0; j < NT; ++j)
        if (n0 + 8 * j + g < N) lf_prefetch_l2(w + (long long)(n0 + 8 * j + g) * ldw + c * KC);
  }
  lf_pdl_wait();
  float acc[MT][NT][4];
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int j = 0; j < NT; ++j)
      #pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][j][i] = 0.f;
  for (int c = blockIdx.y * share + warp; c < c1; c += 4) {
    const int k0 = c * KC + 8 * q;
    unsigned b[NT][2][4], x[MT][2][2][4];  // W: [tile][chunk half][word]; A: [tile][row g, g + 8][half][word]
    #pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int n = n0 + 8 * j + g;
      #pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (n < N) lf_ld16(w + (long long)n * ldw + k0 + 32 * h, b[j][h]);
        else b[j][h][0] = b[j][h][1] = b[j][h][2] = b[j][h][3] = 0u;
      }
    }
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (mt >= mts) break;
        const int m = 16 * mt + g + 8 * r;
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (m < M) lf_ld16(a + (long long)m * lda + k0 + 32 * h, x[mt][r][h]);
          else x[mt][r][h][0] = x[mt][r][h][1] = x[mt][r][h][2] = x[mt][r][h][3] = 0u;
        }
      }
    #pragma unroll
    for (int h = 0; h < 2; ++h)
      #pragma unroll
      for (int t = 0; t < 2; ++t)
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (mt >= mts) break;  // (warp-uniform: M is the call's)
          const unsigned af[4] = {x[mt][0][h][2 * t], x[mt][1][h][2 * t], x[mt][0][h][2 * t + 1], x[mt][1][h][2 * t + 1]};
          #pragma unroll
          for (int j = 0; j < NT; ++j) {
            const unsigned bf[2] = {b[j][h][2 * t], b[j][h][2 * t + 1]};
            lf_mma_16816<T>(acc[mt][j], af, bf);
          }
        }
  }
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int j = 0; j < NT; ++j)
      #pragma unroll
      for (int i = 0; i < 4; ++i) red[warp][16 * mt + g + 8 * (i >> 1)][8 * j + 2 * q + (i & 1)] = acc[mt][j][i];
  __syncthreads();
  for (int e = threadIdx.x; e < MT * 16 * NT * 8; e += 128) {
    const int m = e / (NT * 8), col = e % (NT * 8), n = n0 + col;
    if (m < M && n < N) {
      const float v = red[0][m][col] + red[1][m][col] + red[2][m][col] + red[3][m][col];
      if (S == 1) store(m * N + n, v);
      else partial[(long long)blockIdx.y * M * N + (long long)m * N + n] = v;
    }
  }
}

// Scaled dot-product attention with grouped-query heads, in float registers.
//   q (B, Hq, Lq, D), k (B, Hkv, Lk, D), v (B, Hkv, Lk, D), each with its own batch/head/seq
//   strides and unit stride along D; o (B, Hq, Lq, D) contiguous. Query head h reads key/value
//   head h / (Hq / Hkv). Keys j < kv_len are valid; causal 1 keeps j <= i (PyTorch's is_causal,
//   top-left), causal 2 keeps j <= i + kv_len - Lq (a KV cache: the last query sees every key).
//   A query that keeps no key gets NaN, as PyTorch.
// lf_attn_decode: one block of NW warps per (query, head, batch); warps split the keys, each
//   runs an online softmax, shared memory merges them (flash-decoding inside one block).
// lf_attn_prefill: one block of 4 warps per 16 queries of a (head, batch); key/value tiles of TK
//   rows are staged in shared memory; lane j scores key j of the tile, then lanes split D for
//   the weighted sum of values.
struct LfAttn {
  long long qb, qh, ql, kb, kh, kl, vb, vh, vl;
  int B, Hq, Hkv, Lq, Lk, kv_len, causal;
  float scale;
};

__device__ __forceinline__ int lf_attn_limit(const LfAttn& p, int i) {
  // number of keys query i may read
  int lim = min(p.kv_len, p.Lk);
  if (p.causal == 1) lim = min(lim, i + 1);
  else if (p.causal == 2) lim = min(lim, i + p.kv_len - p.Lq + 1);
  return max(lim, 0);
}

template <typename T, int D, int NW>
__device__ void lf_attn_decode(const T* __restrict__ q, const T* __restrict__ k,
                               const T* __restrict__ v, T* __restrict__ o, LfAttn p) {
  constexpr int E = D / 32;
  __shared__ float sm_m[NW], sm_l[NW];
  __shared__ float sm_acc[NW][D];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  if (i >= p.Lq || b >= p.B) return;
  const int hk = h / (p.Hq / p.Hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T* qr = q + b * p.qb + h * p.qh + i * p.ql;
  float qv[E];
  #pragma unroll
  for (int e = 0; e < E; ++e) qv[e] = lf_ld(qr[lane + 32 * e]) * p.scale;
  const T* kbase = k + b * p.kb + hk * p.kh;
  const T* vbase = v + b * p.vb + hk * p.vh;
  const int lim = lf_attn_limit(p, i);
  float m = -LF_INF, l = 0.f, acc[E];
  #pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.f;
  for (int j = warp; j < lim; j += NW) {
    const T* kr = kbase + j * p.kl;
    float s = 0.f;
    #pragma unroll
    for (int e = 0; e < E; ++e) s += qv[e] * lf_ld(kr[lane + 32 * e]);
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    const float mn = fmaxf(m, s);
    const float corr = expf(m - mn), pj = expf(s - mn);
    l = l * corr + pj;
    const T* vr = vbase + j * p.vl;
    #pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = acc[e] * corr + pj * lf_ld(vr[lane + 32 * e]);
    m = mn;
  }
  if (lane == 0) { sm_m[warp] = m; sm_l[warp] = l; }
  #pragma unroll
  for (int e = 0; e < E; ++e) sm_acc[warp][lane + 32 * e] = acc[e];
  __syncthreads();
  if (warp == 0) {
    float M = -LF_INF;
    #pragma unroll
    for (int w = 0; w < NW; ++w) M = fmaxf(M, sm_m[w]);
    float L = 0.f, out[E];
    #pragma unroll
    for (int e = 0; e < E; ++e) out[e] = 0.f;
    #pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float f = sm_m[w] == -LF_INF ? 0.f : expf(sm_m[w] - M);
      L += sm_l[w] * f;
      #pragma unroll
      for (int e = 0; e < E; ++e) out[e] += sm_acc[w][lane + 32 * e] * f;
    }
    const float inv = 1.0f / L;  // L == 0 (no key): 0 * inf = NaN, as PyTorch
    T* orow = o + (((long long)b * p.Hq + h) * p.Lq + i) * D;
    #pragma unroll
    for (int e = 0; e < E; ++e) orow[lane + 32 * e] = lf_st<T>(L == 0.f ? LF_NAN : out[e] * inv);
  }
}

template <typename T, int D, int TK>
__device__ void lf_attn_prefill(const T* __restrict__ q, const T* __restrict__ k,
                                const T* __restrict__ v, T* __restrict__ o, LfAttn p) {
  constexpr int E = D / 32, QPW = 4, BQ = 16;
  __shared__ float sk[TK][D + 1];
  __shared__ float sv[TK][D + 1];
  __shared__ float sq[BQ][D];
  const int h = blockIdx.y, b = blockIdx.z, i0 = blockIdx.x * BQ;
  if (b >= p.B || i0 >= p.Lq) return;  // uniform over the block
  const int hk = h / (p.Hq / p.Hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int t = threadIdx.x; t < BQ * D; t += 128) {
    const int qi = t / D, d = t % D;
    const int i = i0 + qi;
    sq[qi][d] = i < p.Lq ? lf_ld(q[b * p.qb + h * p.qh + i * p.ql + d]) * p.scale : 0.f;
  }
  float m[QPW], l[QPW], acc[QPW][E];
  int lim[QPW];
  int lim_max = 0;
  #pragma unroll
  for (int r = 0; r < QPW; ++r) {
    const int i = i0 + warp * QPW + r;
    lim[r] = i < p.Lq ? lf_attn_limit(p, i) : 0;
    m[r] = -LF_INF; l[r] = 0.f;
    #pragma unroll
    for (int e = 0; e < E; ++e) acc[r][e] = 0.f;
  }
  // the block's key range: the largest limit of its queries
  for (int qi = 0; qi < BQ; ++qi) {
    const int i = i0 + qi;
    if (i < p.Lq) lim_max = max(lim_max, lf_attn_limit(p, i));
  }
  const T* kbase = k + b * p.kb + hk * p.kh;
  const T* vbase = v + b * p.vb + hk * p.vh;
  for (int j0 = 0; j0 < lim_max; j0 += TK) {
    __syncthreads();
    for (int t = threadIdx.x; t < TK * D; t += 128) {
      const int jj = t / D, d = t % D, j = j0 + jj;
      const bool ok = j < lim_max;
      sk[jj][d] = ok ? lf_ld(kbase[j * p.kl + d]) : 0.f;
      sv[jj][d] = ok ? lf_ld(vbase[j * p.vl + d]) : 0.f;
    }
    __syncthreads();
    #pragma unroll
    for (int r = 0; r < QPW; ++r) {
      const int qi = warp * QPW + r;
      if (j0 >= lim[r]) continue;
      float s = -LF_INF;
      if (lane < TK && j0 + lane < lim[r]) {
        s = 0.f;
        #pragma unroll 8
        for (int d = 0; d < D; ++d) s += sq[qi][d] * sk[lane][d];
      }
      float tmax = s;
      #pragma unroll
      for (int off = 16; off > 0; off >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
      const float mn = fmaxf(m[r], tmax);
      const float corr = expf(m[r] - mn);
      const float pj = s == -LF_INF ? 0.f : expf(s - mn);
      float ps = pj;
      #pragma unroll
      for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
      l[r] = l[r] * corr + ps;
      #pragma unroll
      for (int e = 0; e < E; ++e) acc[r][e] *= corr;
      #pragma unroll 4
      for (int jj = 0; jj < TK; ++jj) {
        const float pb = __shfl_sync(0xffffffffu, pj, jj);
        #pragma unroll
        for (int e = 0; e < E; ++e) acc[r][e] += pb * sv[jj][lane + 32 * e];
      }
      m[r] = mn;
    }
  }
  #pragma unroll
  for (int r = 0; r < QPW; ++r) {
    const int i = i0 + warp * QPW + r;
    if (i >= p.Lq) continue;
    T* orow = o + (((long long)b * p.Hq + h) * p.Lq + i) * D;
    const float inv = 1.0f / l[r];
    #pragma unroll
    for (int e = 0; e < E; ++e) orow[lane + 32 * e] = lf_st<T>(l[r] == 0.f ? LF_NAN : acc[r][e] * inv);
  }
}

// attention_rows, the kernel optimize/rules/specialize_attention.egg offers (semantics:
// backends/numpy/attention_kernels.py): the grouped-query attention of one query row (h, s) per
// block, h = hk * G + g reading key/value head hk, computing exactly the traced formula
//   x_j = (q . k_j) * scale + mask_j,  e_j = exp2((x_j + max(x) * neg) * log2e),
//   y = sum_j (e_j * (1 / sum(e))) * v_j
// in three passes over the keys (max, sum, weighted values), so the (H, S, C) scores and weights
// are never written. When C <= CS (the bucket's largest C) the scores stay in shared memory, each
// thread scoring whole keys; otherwise warps take keys in turn, the lanes splitting E, and passes
// 2 and 3 recompute them. For the values warps take keys in turn, the lanes splitting Ev.
// q (Hk, G, S, E), k (Hk, C, E), v (Hk, C, Ev) and the mask (H, S, C) are read with their own
// strides and unit stride along the last axis; y is contiguous (Hk, G, S, Ev). NE, NEV: E and Ev in lanes-worth (ceil(E / 32)). Needs
// lf_block_sum / lf_block_max from rms_norm.cu.
template <typename TQ, typename TK, int NE>
__device__ __forceinline__ float lf_attn_score(const float (&qv)[NE], const TK* __restrict__ kr, int E,
                                               int lane) {
  float d = 0.f;
  #pragma unroll
  for (int i = 0; i < NE; ++i) {
    const int e = lane + 32 * i;
    if (e < E) d += qv[i] * lf_ld(kr[e]);
  }
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
  return d;  // every lane holds the sum
}

// A short context (C <= NW * LfAttnHeld::R): warp w takes keys w, w + NW, ... and loads all
// of their key and value rows and mask values into registers before any arithmetic, so the row
// costs one round of memory latency instead of one per pass; then the same formula. Adds the
// warp's weighted values to acc (its lanes splitting Ev).
// Keys a warp holds: fewer for long heads, so the rows fit in registers.
template <int NE, int NEV> struct LfAttnHeld { static constexpr int R = NE + NEV <= 4 ? 8 : NE + NEV <= 8 ? 4 : 2; };
template <typename TK, typename TV, typename TM, int BLOCK, int NE, int NEV>
__device__ __forceinline__ void lf_attn_rows_held(
    const float (&qv)[NE], const TK* __restrict__ kb, long long kc, const TV* __restrict__ vb,
    long long vc, const TM* __restrict__ mr, int C, int E, int Ev, float neg, float log2e,
    float scale, float* red, float (&acc)[NEV]) {
  constexpr int NW = BLOCK / 32, R = LfAttnHeld<NE, NEV>::R;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float kr[R][NE], vr[R][NEV], mk[R];
  #pragma unroll
  for (int r = 0; r < R; ++r) {
    const int j = warp + NW * r;
    const bool ok = j < C;
    #pragma unroll
    for (int i = 0; i < NE; ++i) {
      const int e = lane + 32 * i;
      kr[r][i] = ok && e < E ? lf_ld(kb[j * kc + e]) : 0.f;
    }
    #pragma unroll
    for (int i = 0; i < NEV; ++i) {
      const int e = lane + 32 * i;
      vr[r][i] = ok && e < Ev ? lf_ld(vb[j * vc + e]) : 0.f;
    }
    mk[r] = ok ? lf_ld(mr[j]) : 0.f;
  }
  float x[R], mx = -LF_INF;
  #pragma unroll
  for (int r = 0; r < R; ++r) {
    float d = 0.f;
    #pragma unroll
    for (int i = 0; i < NE; ++i) d += qv[i] * kr[r][i];
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
    x[r] = d * scale + mk[r];
    if (warp + NW * r < C) mx = lf_max(mx, x[r]);
  }
  mx = lf_block_max<BLOCK>(mx, red);
  const float shift = mx * neg;
  float sum = 0.f;
  #pragma unroll
  for (int r = 0; r < R; ++r) {
    x[r] = warp + NW * r < C ? exp2f((x[r] + shift) * log2e) : 0.f;
    sum += x[r];
  }
  const float inv = 1.0f / lf_block_sum<BLOCK>(lane == 0 ? sum : 0.f, red);  // one lane a warp
  #pragma unroll
  for (int r = 0; r < R; ++r) {
    const float w = x[r] * inv;
    #pragma unroll
    for (int i = 0; i < NEV; ++i) acc[i] += w * vr[r][i];
  }
}

// One part of a split row (see lf_attn_rows, PARTS): keys [pt * chunk, min(C, (pt + 1) * chunk)).
// Warp w runs an online softmax over keys w, w + NW, ...: running max mw, sum lw and weighted
// values (its lanes splitting Ev); masked keys (x = -inf) add nothing. The block merges its warps
// and writes its (max, sum, values); the row's last block merges the np parts into yr.
template <typename TQ, typename TK, typename TV, typename TM, typename TY, typename TR, int BLOCK, int NE,
          int NEV, int PARTS>
__device__ __forceinline__ void lf_attn_rows_part(
    const float (&qv)[NE], const TK* __restrict__ kb, long long kc, const TV* __restrict__ vb,
    long long vc, const TM* __restrict__ mr, TY* __restrict__ yr, long long ye, int C, int E, int Ev,
    float neg, float log2e, float scale, int row, int pt, int np, float* __restrict__ scratch,
    int* __restrict__ count, float (*part)[NEV * 32], float* wm, float* wl, float* pf, int* last) {
  constexpr int NW = BLOCK / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunk = (C + np - 1) / np, j0 = pt * chunk, j1 = min(C, j0 + chunk);
  float mw = -LF_INF, lw = 0.f, acc[NEV];
  #pragma unroll
  for (int i = 0; i < NEV; ++i) acc[i] = 0.f;
  for (int j = j0 + warp; j < j1; j += NW) {
    const float x = lf_attn_score<TQ, TK, NE>(qv, kb + j * kc, E, lane) * scale + lf_ld(mr[j]);
    if (x == -LF_INF) continue;  // (warp-uniform: every lane holds the same score)
    const float mn = lf_max(mw, x);
    const float corr = mw == -LF_INF ? 0.f : exp2f((mw + mn * neg) * log2e);
    const float e = exp2f((x + mn * neg) * log2e);
    lw = lw * corr + e;
    const TV* vr = vb + j * vc;
    #pragma unroll
    for (int i = 0; i < NEV; ++i) {
      const int c = lane + 32 * i;
      acc[i] = acc[i] * corr + (c < Ev ? e * lf_ld(vr[c]) : 0.f);
    }
    mw = mn;
  }
  if (lane == 0) { wm[warp] = mw; wl[warp] = lw; }
  #pragma unroll
  for (int i = 0; i < NEV; ++i) part[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float mb = -LF_INF;
  for (int w = 0; w < NW; ++w) mb = lf_max(mb, wm[w]);
  __syncthreads();  // (every thread has read wm)
  if (threadIdx.x < NW) {  // each warp's rescaling to the block's max, once: wm now holds it
    const float m0 = wm[threadIdx.x];
    wm[threadIdx.x] = m0 == -LF_INF ? 0.f : exp2f((m0 + mb * neg) * log2e);
  }
  __syncthreads();
  float* out = scratch + ((long long)row * PARTS + pt) * (2 + Ev);
  if (threadIdx.x == 0) {
    float lb = 0.f;
    for (int w = 0; w < NW; ++w) lb += wl[w] * wm[w];
    out[0] = mb;
    out[1] = lb;
  }
  for (int c = threadIdx.x; c < Ev; c += BLOCK) {
    float t = 0.f;
    for (int w = 0; w < NW; ++w) t += part[w][c] * wm[w];
    out[2 + c] = t;
  }
  __threadfence();  // this part's values before its count
  __syncthreads();
  if (threadIdx.x == 0) *last = atomicAdd(count + row, 1) == np - 1;
  __syncthreads();
  if (*last) {  // (block-uniform) every other part has been written: merge them
    __threadfence();
    const float* rp = scratch + (long long)row * PARTS * (2 + Ev);
    float M = -LF_INF;
    for (int p = 0; p < np; ++p) M = lf_max(M, __ldcg(rp + p * (2 + Ev)));
    if (threadIdx.x < np) {  // each part's rescaling to the row's max, once (np <= PARTS <= 32)
      const float mp = __ldcg(rp + threadIdx.x * (2 + Ev));
      pf[threadIdx.x] = mp == -LF_INF ? 0.f : exp2f((mp + M * neg) * log2e);
    }
    __syncthreads();
    float L = 0.f;
    for (int p = 0; p < np; ++p) L += __ldcg(rp + p * (2 + Ev) + 1) * pf[p];
    const float inv = 1.0f / L;
    for (int c = threadIdx.x; c < Ev; c += BLOCK) {
      float t = 0.f;
      for (int p = 0; p < np; ++p) t += __ldcg(rp + p * (2 + Ev) + 2 + c) * pf[p];
      yr[c * ye] = lf_st<TY>(lf_round<TR>(t * inv));
    }
    if (threadIdx.x == 0) count[row] = 0;  // zero again for the next launch
  }
  __syncthreads();  // part, wm, wl, pf and last are reused by the block's next row
}

// y[hk * yhk + g * yg + s * ys + e * ye] = the row's value rounded to TR, then stored as TY: the
// plain output is TR = TY with contiguous strides; a cast-and-transpose copy the next kernel would
// make is folded in by giving its dtype and layout instead (attentionkernels.fold_attention_stores).
// PARTS > 1 (flash decoding, for few rows over many keys): a row's keys are split among up to
// PARTS blocks of at least KEYS keys each (fewer blocks for a shorter C; a C of at most KEYS
// takes the whole-row path above in one block). Each block runs an online
// softmax over its keys per warp, merges its warps, and writes (max, sum, weighted values) to
// ``scratch`` (rows * PARTS * (2 + Ev) floats); the last block of the row to finish (``count``, rows
// ints that are zero between launches, counted atomically and reset by that block) merges the
// parts and stores y. Needs neg == -1 (the traced softmax's x - max(x)), checked by the host.
template <typename TQ, typename TK, typename TV, typename TM, typename TY, typename TR, int BLOCK, int NE,
          int NEV, int CS, int PARTS = 1, int KEYS = 128>
__device__ void lf_attn_rows(const TQ* __restrict__ q, long long qh, long long qg, long long qs,
                             const TK* __restrict__ k, long long kh, long long kc,
                             const TV* __restrict__ v, long long vh, long long vc,
                             const TM* __restrict__ m, long long mh, long long ms,
                             TY* __restrict__ y, long long yhk, long long yg, long long ys, long long ye,
                             int Hk, int G, int S, int C, int E, int Ev,
                             float neg, float log2e, float scale,
                             float* __restrict__ scratch = nullptr, int* __restrict__ count = nullptr) {
  static_assert(BLOCK >= 64 && BLOCK % 32 == 0, "lf_attn_rows: at least two warps");
  constexpr int NW = BLOCK / 32;
  __shared__ float red[32];
  __shared__ float xs[CS > 0 ? CS : 1];
  __shared__ float sq[CS > 0 ? NE * 32 : 1];
  __shared__ float part[NW][NEV * 32];
  __shared__ float wm[NW], wl[NW], pf[PARTS];
  __shared__ int last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rows = Hk * G * S;
  const bool cached = CS > 0 && C <= CS;
  // parts this C takes (block-uniform): one for a short C
  const int np = PARTS > 1 ? max(1, min(PARTS, (C + KEYS - 1) / KEYS)) : 1;
  for (int bid = blockIdx.x; bid < rows * PARTS; bid += gridDim.x) {
    // part-major: the rows' first parts are the first blocks scheduled (for a short C the only
    // ones with work; the others exit at once)
    const int pt = bid / rows, row = bid - pt * rows;
    if (pt >= np) continue;
    const int h = row / S, s = row - h * S, hk = h / G, g = h - hk * G;
    const TQ* qr = q + hk * qh + g * qg + s * qs;
    const TK* kb = k + hk * kh;
    const TV* vb = v + hk * vh;
    const TM* mr = m + h * mh + s * ms;
    float qv[NE];
    #pragma unroll
    for (int i = 0; i < NE; ++i) {
      const int e = lane + 32 * i;
      qv[i] = e < E ? lf_ld(qr[e]) : 0.f;
    }
    float acc[NEV];
    #pragma unroll
    for (int i = 0; i < NEV; ++i) acc[i] = 0.f;
    TY* yr = y + hk * yhk + g * yg + s * ys;
    if (np > 1) {
      lf_attn_rows_part<TQ, TK, TV, TM, TY, TR, BLOCK, NE, NEV, PARTS>(
          qv, kb, kc, vb, vc, mr, yr, ye, C, E, Ev, neg, log2e, scale, row, pt, np, scratch, count,
          part, wm, wl, pf, &last);
      continue;
    }
    if (C <= NW * LfAttnHeld<NE, NEV>::R) {  // block-uniform: every key held in registers
      lf_attn_rows_held<TK, TV, TM, BLOCK, NE, NEV>(qv, kb, kc, vb, vc, mr, C, E, Ev, neg, log2e, scale,
                                                    red, acc);
    } else {
      // pass 1: the scores and their max. Kept in shared memory: each thread scores whole keys
      // (q staged in shared memory; no shuffles). Else each warp scores a key, lanes splitting E.
      float mx = -LF_INF;
      if (cached) {
        for (int e = threadIdx.x; e < E; e += BLOCK) sq[e] = lf_ld(qr[e]);
        __syncthreads();
        for (int j = threadIdx.x; j < C; j += BLOCK) {
          const TK* kr = kb + j * kc;
          float d = 0.f;
          #pragma unroll 8
          for (int e = 0; e < E; ++e) d += sq[e] * lf_ld(kr[e]);
          const float x = d * scale + lf_ld(mr[j]);
          xs[j] = x;
          mx = lf_max(mx, x);
        }
      } else {
        for (int j = warp; j < C; j += NW)
          mx = lf_max(mx, lf_attn_score<TQ, TK, NE>(qv, kb + j * kc, E, lane) * scale + lf_ld(mr[j]));
      }
      mx = lf_block_max<BLOCK>(mx, red);  // its barriers also publish xs
      const float shift = mx * neg;
      // pass 2: the sum of the exponentials
      float sum = 0.f;
      if (cached) {
        for (int j = threadIdx.x; j < C; j += BLOCK) sum += exp2f((xs[j] + shift) * log2e);
      } else {
        for (int j = warp; j < C; j += NW) {
          const float x = lf_attn_score<TQ, TK, NE>(qv, kb + j * kc, E, lane) * scale + lf_ld(mr[j]);
          if (lane == 0) sum += exp2f((x + shift) * log2e);
        }
      }
      const float inv = 1.0f / lf_block_sum<BLOCK>(sum, red);
      // pass 3: the weighted values, each warp over its keys, then summed across the warps
      for (int j = warp; j < C; j += NW) {
        const float x = cached ? xs[j]
                               : lf_attn_score<TQ, TK, NE>(qv, kb + j * kc, E, lane) * scale + lf_ld(mr[j]);
        const float w = exp2f((x + shift) * log2e) * inv;
        const TV* vr = vb + j * vc;
        #pragma unroll
        for (int i = 0; i < NEV; ++i) {
          const int e = lane + 32 * i;
          if (e < Ev) acc[i] += w * lf_ld(vr[e]);
        }
      }
    }
    #pragma unroll
    for (int i = 0; i < NEV; ++i) part[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    for (int e = threadIdx.x; e < Ev; e += BLOCK) {
      float t = 0.f;
      #pragma unroll
      for (int w = 0; w < NW; ++w) t += part[w][e];
      yr[e * ye] = lf_st<TY>(lf_round<TR>(t));
    }
    __syncthreads();  // part and xs are reused by the block's next row
  }
}

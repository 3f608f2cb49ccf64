// lf_attn_tiles: attention_rows for a long prompt's many query rows (same arguments and formula
// as lf_attn_rows). One row a block reads every key and value of its head once, so a prompt of S
// tokens reads them S times (H200: 9.2 ms a layer at S = C = 1000). Here a block of 128 threads
// takes R rows that share a key/value head (QS = R / G positions s0 .. s0 + QS - 1 of each of the
// G query heads of hk) and runs over the keys in tiles of TK staged in shared memory, with an
// online softmax per row (running max and sum; needs neg == -1, as the split rows). A tile whose
// mask is -inf for every row of the block adds nothing and is skipped (a causal prompt's later
// keys). E and Ev at most EM (zero-padded in shared memory): (R, TK, EM) = (64, 32, 64), or
// (32, 16, 128) for heads of up to 128, which keeps the block within 48 KiB of shared memory.
// Thread t owns rows 4 (t / L) .. + 3, L = 128 / (R / 4) threads a row group (8 or 16): it scores
// keys t % L + L u (u < TK / L) of a tile and weighs value columns 4 (t % L) .. + 3 and
// EM / 2 + 4 (t % L) .. + 3, so a row's L threads are lanes of one warp, which shuffle its max
// and sum. Shared rows of EM + 4 floats let each quarter-warp's 16-byte reads hit distinct banks.
// Every global load of a tile (its keys and values, the next tile's mask) is issued before the
// first is stored, so a tile costs one round trip; the heaviest blocks (a causal prompt's last
// positions) are scheduled first.
template <typename TM, int L, int KPT>
__device__ __forceinline__ void lf_attn_tile_mask(const TM* const (&mr)[4], const bool (&ok)[4], int j0, int C,
                                                  int kg, float (&mk)[4][KPT]) {
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int u = 0; u < KPT; ++u) {
      const int j = j0 + kg + L * u;
      mk[i][u] = ok[i] && j < C ? lf_ld(mr[i][j]) : -LF_INF;
    }
}

template <typename TQ, typename TK, typename TV, typename TM, typename TY, typename TR, int QS, int R, int TKEYS,
          int EM>
__device__ void lf_attn_tiles(const TQ* __restrict__ q, long long qh, long long qg, long long qs,
                              const TK* __restrict__ k, long long kh, long long kc,
                              const TV* __restrict__ v, long long vh, long long vc,
                              const TM* __restrict__ m, long long mh, long long ms,
                              TY* __restrict__ y, long long yhk, long long yg, long long ys, long long ye,
                              int Hk, int G, int S, int C, int E, int Ev,
                              float neg, float log2e, float scale) {
  constexpr int L = 128 / (R / 4), KPT = TKEYS / L, LD = EM + 4, RPI = 128 / EM;
  constexpr int PQ = R * EM / 128, PK = TKEYS * EM / 128;
  static_assert((L == 8 || L == 16) && (EM == 64 || EM == 128) && KPT >= 1 && EM / L == 8, "lf_attn_tiles: geometry");
  __shared__ __align__(16) float sq[R][LD];      // the block's q rows
  __shared__ __align__(16) float sk[TKEYS][LD];  // a tile's keys
  __shared__ __align__(16) float sv[TKEYS][LD];  // and values
  __shared__ __align__(16) float sp[TKEYS][R + 4];  // its probabilities, sp[key][row]
  constexpr int LS = L == 16 ? 4 : 3, ES = EM == 128 ? 7 : 6;  // log2 L, log2 EM
  const int t = threadIdx.x, rg = t >> LS, kg = t & (L - 1), te = t & (EM - 1), tr = t >> ES;
  const int tiles = (S + QS - 1) / QS;
  for (int tile = blockIdx.x; tile < Hk * tiles; tile += gridDim.x) {
    const int hk = tile / tiles, s0 = (tiles - 1 - (tile - hk * tiles)) * QS;  // the last positions first
    float qv[PQ];  // thread t stages element t % EM of rows t / EM + RPI i
    #pragma unroll
    for (int i = 0; i < PQ; ++i) {
      const int rr = tr + RPI * i, g = rr / QS, s = s0 + rr - g * QS;
      qv[i] = s < S && te < E ? lf_ld(q[hk * qh + g * qg + s * qs + te]) : 0.f;
    }
    __syncthreads();  // the previous tile's reads of sq are done
    #pragma unroll
    for (int i = 0; i < PQ; ++i) sq[tr + RPI * i][te] = qv[i];
    bool ok[4];
    const TM* mr[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int rr = 4 * rg + i, g = rr / QS, s = s0 + rr - g * QS;
      ok[i] = s < S;
      mr[i] = m + (hk * G + g) * mh + s * ms;
    }
    float mrun[4], lrun[4], acc[4][8], x[4][KPT];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      mrun[i] = -LF_INF;
      lrun[i] = 0.f;
      #pragma unroll
      for (int c = 0; c < 8; ++c) acc[i][c] = 0.f;
    }
    const TK* kb = k + hk * kh;
    const TV* vb = v + hk * vh;
    lf_attn_tile_mask<TM, L, KPT>(mr, ok, 0, C, kg, x);  // x holds the tile's mask until its scores are added
    for (int j0 = 0; j0 < C; j0 += TKEYS) {
      int live = 0;
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int u = 0; u < KPT; ++u) live |= x[i][u] != -LF_INF;
      // (block-uniform; its barrier also ends the previous tile's reads of sk, sv and sp)
      if (!__syncthreads_or(live)) {
        lf_attn_tile_mask<TM, L, KPT>(mr, ok, j0 + TKEYS, C, kg, x);
        continue;
      }
      float kv[PK], vv[PK], mk[4][KPT];
      #pragma unroll
      for (int i = 0; i < PK; ++i) {
        const int j = j0 + tr + RPI * i;
        kv[i] = j < C && te < E ? lf_ld(kb[j * kc + te]) : 0.f;
        vv[i] = j < C && te < Ev ? lf_ld(vb[j * vc + te]) : 0.f;
      }
      lf_attn_tile_mask<TM, L, KPT>(mr, ok, j0 + TKEYS, C, kg, mk);
      #pragma unroll
      for (int i = 0; i < PK; ++i) {
        sk[tr + RPI * i][te] = kv[i];
        sv[tr + RPI * i][te] = vv[i];
      }
      __syncthreads();
      float d[4][KPT];
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int u = 0; u < KPT; ++u) d[i][u] = 0.f;
      #pragma unroll 4
      for (int e = 0; e < EM; e += 4) {
        float4 a[4], b[KPT];
        #pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = *(const float4*)&sq[4 * rg + i][e];
        #pragma unroll
        for (int u = 0; u < KPT; ++u) b[u] = *(const float4*)&sk[kg + L * u][e];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
          #pragma unroll
          for (int u = 0; u < KPT; ++u)
            d[i][u] += a[i].x * b[u].x + a[i].y * b[u].y + a[i].z * b[u].z + a[i].w * b[u].w;
      }
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        float mt = -LF_INF;
        #pragma unroll
        for (int u = 0; u < KPT; ++u) {
          x[i][u] = d[i][u] * scale + x[i][u];
          mt = lf_max(mt, x[i][u]);
        }
        #pragma unroll
        for (int o = 1; o < L; o <<= 1) mt = lf_max(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        const float mn = lf_max(mrun[i], mt);
        // (mn == -inf: every key so far masked; nothing to weigh yet)
        const float corr = mn == -LF_INF ? 1.f : exp2f((mrun[i] + mn * neg) * log2e);
        float ps = 0.f;
        #pragma unroll
        for (int u = 0; u < KPT; ++u) {
          const float p = mn == -LF_INF ? 0.f : exp2f((x[i][u] + mn * neg) * log2e);
          sp[kg + L * u][4 * rg + i] = p;
          ps += p;
        }
        #pragma unroll
        for (int o = 1; o < L; o <<= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
        lrun[i] = lrun[i] * corr + ps;
        mrun[i] = mn;
        #pragma unroll
        for (int c = 0; c < 8; ++c) acc[i][c] *= corr;
      }
      __syncthreads();
      #pragma unroll 4
      for (int jj = 0; jj < TKEYS; ++jj) {
        const float4 p = *(const float4*)&sp[jj][4 * rg];
        const float4 v0 = *(const float4*)&sv[jj][4 * kg], v1 = *(const float4*)&sv[jj][EM / 2 + 4 * kg];
        const float pw[4] = {p.x, p.y, p.z, p.w}, vw[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        #pragma unroll
        for (int i = 0; i < 4; ++i)
          #pragma unroll
          for (int c = 0; c < 8; ++c) acc[i][c] += pw[i] * vw[c];
      }
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int u = 0; u < KPT; ++u) x[i][u] = mk[i][u];
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (!ok[i]) continue;
      const int rr = 4 * rg + i, g = rr / QS, s = s0 + rr - g * QS;
      const float inv = 1.0f / lrun[i];
      TY* yr = y + hk * yhk + g * yg + s * ys;
      #pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int col = (c < 4 ? 0 : EM / 2 - 4) + 4 * kg + c;  // 4 kg + c, then EM / 2 + 4 kg + c - 4
        if (col < Ev) yr[col * ye] = lf_st<TY>(lf_round<TR>(acc[i][c] * inv));
      }
    }
  }
}

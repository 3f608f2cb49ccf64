// Softmax over the last axis of rows: y = exp(s*x - max) / sum(exp(s*x - max)), s = scale.
// One block per row, an online max/sum pass then a write pass (the row stays in L1/L2).
// Needs lf_block_sum / lf_block_max from rms_norm.cu (modules include both).
template <typename T, int BLOCK>
__device__ void lf_softmax(const T* __restrict__ x, long long row_stride, T* __restrict__ y,
                           int rows, int D, float scale) {
  __shared__ float red[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + (long long)row * row_stride;
    T* yr = y + (long long)row * D;
    float m = -LF_INF, s = 0.f;
    for (int i = threadIdx.x; i < D; i += BLOCK) {
      const float v = lf_ld(xr[i]) * scale;
      if (v > m) { s = s * expf(m - v) + 1.f; m = v; }
      else if (v == v) { if (v != -LF_INF) s += expf(v - m); }
      else { m = v; }  // NaN poisons the row, as the reference
    }
    const float M = lf_block_max<BLOCK>(m, red);
    float part = (m == -LF_INF) ? 0.f : s * expf(m - M);
    if (M != M) part = M;
    const float S = lf_block_sum<BLOCK>(part, red);
    const float inv = 1.0f / S;
    for (int i = threadIdx.x; i < D; i += BLOCK) {
      const float v = lf_ld(xr[i]) * scale;
      yr[i] = lf_st<T>(expf(v - M) * inv);
    }
  }
}

// softmax_rows, the kernel optimize/rules/specialize_norms.egg offers: rows (h, s) of D elements,
// x = a (SCALED: a * scale + mask, the attention scores, never written out), then exactly the
// traced formula e = exp2((x + max(x) * neg) * log2e), y = e * (1 / sum(e)). a and the mask are
// read with strides (per h, per s, unit along D); y contiguous (H, S, D). A row of up to
// BLOCK * HOLD 16-byte vectors is read once and kept in registers; a longer one takes three
// passes (it stays in L1/L2): max, sum, write.
template <typename TA, typename TM, typename TY, int BLOCK, bool SCALED>
__device__ void lf_softmax_rows(const TA* __restrict__ a, long long ah, long long as,
                                const TM* __restrict__ m, long long mh, long long ms,
                                TY* __restrict__ y, int H, int S, int D, float neg, float log2e,
                                float scale) {
  __shared__ float red[32];
  const int rows = H * S;
  constexpr int V = LfVec<TA>::V;
  // 16-byte loads a thread keeps in registers for a row of D <= BLOCK * V * HOLD: 16 elements, so
  // that a 2-byte row holds as many floats a thread as a float32 one (as lf_rms_rows)
  constexpr int HOLD = 16 / V;
  const bool vec = D % V == 0 && ah % V == 0 && as % V == 0 && (unsigned long long)a % 16 == 0
                   && (unsigned long long)y % 16 == 0;
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const int h = row / S, s = row - h * S;
    const TA* ar = a + h * ah + s * as;
    const TM* mr = SCALED ? m + h * mh + s * ms : m;
    TY* yr = y + (long long)row * D;
    if (vec && D <= BLOCK * V * HOLD) {  // block-uniform: the row is read once, then kept in registers
      float xv[HOLD][V];
      float mx = -LF_INF;
      #pragma unroll
      for (int k = 0; k < HOLD; ++k) {
        const int i = (threadIdx.x + k * BLOCK) * V;
        if (i < D) lf_vld<V>(ar + i, xv[k]);
      }
      #pragma unroll
      for (int k = 0; k < HOLD; ++k) {
        const int i = (threadIdx.x + k * BLOCK) * V;
        if (i < D) {
          #pragma unroll
          for (int j = 0; j < V; ++j) {
            if (SCALED) xv[k][j] = xv[k][j] * scale + lf_ld(mr[i + j]);
            mx = lf_max(mx, xv[k][j]);
          }
        }
      }
      mx = lf_block_max<BLOCK>(mx, red);
      const float shift = mx * neg;
      float sum = 0.f;
      #pragma unroll
      for (int k = 0; k < HOLD; ++k) {
        if ((threadIdx.x + k * BLOCK) * V < D) {
          #pragma unroll
          for (int j = 0; j < V; ++j) {
            xv[k][j] = exp2f((xv[k][j] + shift) * log2e);
            sum += xv[k][j];
          }
        }
      }
      const float inv = 1.0f / lf_block_sum<BLOCK>(sum, red);
      #pragma unroll
      for (int k = 0; k < HOLD; ++k) {
        const int i = (threadIdx.x + k * BLOCK) * V;
        if (i < D) {
          #pragma unroll
          for (int j = 0; j < V; ++j) xv[k][j] *= inv;
          lf_vst<V>(yr + i, xv[k]);
        }
      }
      continue;
    }
    float mx = -LF_INF;
    for (int i = threadIdx.x; i < D; i += BLOCK) {
      const float v = SCALED ? lf_ld(ar[i]) * scale + lf_ld(mr[i]) : lf_ld(ar[i]);
      mx = lf_max(mx, v);
    }
    mx = lf_block_max<BLOCK>(mx, red);
    const float shift = mx * neg;
    float sum = 0.f;
    for (int i = threadIdx.x; i < D; i += BLOCK) {
      const float v = SCALED ? lf_ld(ar[i]) * scale + lf_ld(mr[i]) : lf_ld(ar[i]);
      sum += exp2f((v + shift) * log2e);
    }
    const float inv = 1.0f / lf_block_sum<BLOCK>(sum, red);
    for (int i = threadIdx.x; i < D; i += BLOCK) {
      const float v = SCALED ? lf_ld(ar[i]) * scale + lf_ld(mr[i]) : lf_ld(ar[i]);
      yr[i] = lf_st<TY>(exp2f((v + shift) * log2e) * inv);
    }
  }
}

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

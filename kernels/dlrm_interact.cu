// DLRM pairwise dot interaction, the kernel of the "dlrm_interact" rule
// (optimize/rules/specialize_models.egg; NumPy reference: backends/numpy/model_kernels.py).
//
// lf_dlrm_interact_f32(out, t, sb, sf, sd, B, F, D)
//   t    the stacked features T (B, F, D) read through strides (sb, sf, sd) (elements)
//   out  (B, P) float, contiguous, P = F*(F-1)/2
//   out[b, p] = sum_d T[b, i_p, d] * T[b, j_p, d] for the p-th pair (i_p, j_p), i_p > j_p, in
//   numpy.tril_indices(F, -1) order: (1,0), (2,0), (2,1), (3,0), ... Only these P products
//   are computed (the (B, F, F) Gram matrix is never formed).
// Launch: grid (B), block 128 threads (4 warps), dynamic shared memory F*D*sizeof(float).
// The block stages T[b] in shared memory; warp w computes pairs w, w+4, ...; its lanes stride
// over d and a shuffle reduction sums the dot product.
__device__ __forceinline__ void lf_tril_pair(int p, int* i, int* j) {
  // the row i with i(i-1)/2 <= p < i(i+1)/2, from the quadratic formula, then fixed up
  int r = (int)((1.0f + sqrtf(1.0f + 8.0f * (float)p)) * 0.5f);
  while (r * (r - 1) / 2 > p) --r;
  while ((r + 1) * r / 2 <= p) ++r;
  *i = r;
  *j = p - r * (r - 1) / 2;
}

extern "C" __global__ void lf_dlrm_interact_f32(float* __restrict__ out, const float* __restrict__ t,
                                                long long sb, long long sf, long long sd,
                                                int B, int F, int D) {
  extern __shared__ float lf_rows[];  // F * D
  const int b = blockIdx.x;
  if (b >= B) return;
  const float* tb = t + (long long)b * sb;
  for (int e = threadIdx.x; e < F * D; e += blockDim.x) {
    const int f = e / D, d = e - f * D;
    lf_rows[e] = __ldg(tb + f * sf + d * sd);
  }
  __syncthreads();
  const int P = F * (F - 1) / 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int p = warp; p < P; p += warps) {
    int i, j;
    lf_tril_pair(p, &i, &j);
    const float* ri = lf_rows + i * D;
    const float* rj = lf_rows + j * D;
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc += ri[d] * rj[d];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) out[(long long)b * P + p] = acc;
  }
}

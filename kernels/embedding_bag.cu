// Embedding-bag (sum pooling, fixed bag size), the kernel of the "embedding_bag" rule
// (optimize/rules/specialize_models.egg; NumPy reference: backends/numpy/model_kernels.py).
//
// lf_embedding_bag_sum_f32(out, table, rows, row_stride, B, L, D, table_size)
//   out        (B, D) float, contiguous
//   table      the table's logical elements, contiguous (table_size of them; (V, D) row-major
//              for nn.embedding_bag)
//   rows       (B*L,) int32 row indices, contiguous: bag b is rows[b*L .. b*L+L)
//   row_stride one int32 on the device: elements between rows (D for a (V, D) table; the HLIR
//              keeps it as a constant input, so the kernel reads it rather than assuming D)
//   out[b, d] = sum_l table[clamp(rows[b*L + l] * row_stride + d, 0, table_size - 1)]
//   (the clamp is the Gather primitive's out-of-range rule).
// Launch: grid (B, ceil(D / blockDim.x)), block 64..256 threads over d; each thread walks the L
// rows of one bag, so neighbouring threads read neighbouring floats of one table row.
extern "C" __global__ void lf_embedding_bag_sum_f32(float* __restrict__ out,
                                                    const float* __restrict__ table,
                                                    const int* __restrict__ rows,
                                                    const int* __restrict__ row_stride,
                                                    int B, int L, int D, long long table_size) {
  const int b = blockIdx.x;
  const int d = blockIdx.y * blockDim.x + threadIdx.x;
  if (b >= B || d >= D) return;
  const long long stride = (long long)__ldg(row_stride);
  const int* bag = rows + (long long)b * L;
  float acc = 0.0f;
  #pragma unroll 4
  for (int l = 0; l < L; ++l) {
    long long i = (long long)__ldg(bag + l) * stride + d;
    i = i < 0 ? 0 : (i >= table_size ? table_size - 1 : i);
    acc += __ldg(table + i);
  }
  out[(long long)b * D + d] = acc;
}

// Multi-table form: K tables of possibly different row counts, one bag size L and width D,
// one launch producing (B, K, D) (DLRM's num_cat tables). The tables' and index arrays'
// device addresses come in as two arrays of K 64-bit pointers.
//   out          (B, K, D) float, contiguous
//   tables[k]    (V_k, D) float, contiguous; table_rows[k] = V_k (indices are clamped to it)
//   rows[k]      (B*L,) int32 row indices of table k
// Launch: grid (B, K), block >= min(D, 256) threads striding over d.
// The "embedding_bag_multi" rule (specialize_models.egg) selects the rendered form of this
// algorithm (backends/cuda/modelkernels.py: one pointer per table through the parameter table,
// strided views, a prefix slot, every storage dtype); this file is its hand-written reference.
extern "C" __global__ void lf_embedding_bag_sum_multi_f32(float* __restrict__ out,
                                                          const float* const* __restrict__ tables,
                                                          const int* const* __restrict__ rows,
                                                          const int* __restrict__ table_rows,
                                                          int B, int K, int L, int D) {
  const int b = blockIdx.x, k = blockIdx.y;
  if (b >= B || k >= K) return;
  const float* t = tables[k];
  const int* bag = rows[k] + (long long)b * L;
  const int vk = table_rows[k];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.0f;
    for (int l = 0; l < L; ++l) {
      int r = __ldg(bag + l);
      r = r < 0 ? 0 : (r >= vk ? vk - 1 : r);
      acc += __ldg(t + (long long)r * D + d);
    }
    out[((long long)b * K + k) * D + d] = acc;
  }
}

// Embedding-bag (sum pooling, fixed bag size) for MLX: the body of an mx.fast.metal_kernel
// (ensure_row_contiguous=True), the Metal twin of kernels/embedding_bag.cu.
//   inputs   table      float, the table's elements (row-major (V, D) for nn.embedding_bag)
//            rows       int32 (B*L,): bag b is rows[b*L .. b*L+L)
//            row_stride int32 (1,): elements between table rows (D for a (V, D) table)
//            params     int32 (5,): B, L, D, table_size, R (R > 0: rows are raw lnp.take indices,
//                       normalised first as lnp.take does: clip(i + (i < 0) * R, 0, R - 1))
//   output   out float (B*D,)  out[b, d] = sum_l table[clamp(rows[b*L+l] * row_stride + d)]
//   grid     (D, B, 1) threads, threadgroup (min(D, 256), 1, 1)
uint d = thread_position_in_grid.x;
uint b = thread_position_in_grid.y;
int B = params[0], L = params[1], D = params[2];
long n = long(params[3]);
int R = params[4];
if (int(b) >= B || int(d) >= D) return;
long stride = long(row_stride[0]);
float acc = 0.0f;
for (int l = 0; l < L; ++l) {
  long row = long(rows[int(b) * L + l]);
  if (R > 0) {
    row += row < 0 ? long(R) : 0;
    row = row < 0 ? 0 : (row > long(R - 1) ? long(R - 1) : row);
  }
  long i = row * stride + long(d);
  i = i < 0 ? 0 : (i >= n ? n - 1 : i);
  acc += float(table[i]);
}
out[int(b) * D + int(d)] = acc;

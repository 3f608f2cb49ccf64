// DLRM pairwise dot interaction for MLX: the body of an mx.fast.metal_kernel
// (ensure_row_contiguous=True), the Metal twin of kernels/dlrm_interact.cu.
//   inputs   t       float (B, F, D) stacked features, row-major
//            params  int32 (3,): B, F, D
//   output   out float (B*P,), P = F*(F-1)/2:  out[b, p] = dot(t[b, i_p], t[b, j_p]) for the
//            p-th pair (i_p > j_p) in numpy.tril_indices(F, -1) order
//   grid     (P, B, 1) threads, threadgroup (min(P, 256), 1, 1); one thread per dot product
uint p = thread_position_in_grid.x;
uint b = thread_position_in_grid.y;
int B = params[0], F = params[1], D = params[2];
int P = F * (F - 1) / 2;
if (int(b) >= B || int(p) >= P) return;
int i = int((1.0f + sqrt(1.0f + 8.0f * float(p))) * 0.5f);  // row of pair p, then fixed up
while (i * (i - 1) / 2 > int(p)) --i;
while ((i + 1) * i / 2 <= int(p)) ++i;
int j = int(p) - i * (i - 1) / 2;
int base = int(b) * F * D;
float acc = 0.0f;
for (int d = 0; d < D; ++d) acc += float(t[base + i * D + d]) * float(t[base + j * D + d]);
out[int(b) * P + int(p)] = acc;

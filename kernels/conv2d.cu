// Direct 2-D convolution with bias, the kernel of the "conv2d_bias" rule
// (optimize/rules/specialize_models.egg; NumPy reference: backends/numpy/model_kernels.py).
// It reads the input directly (padding by bounds checks), so the (H_out*W_out, C*kh*kw) patch
// matrix of the traced unfold + matmul is never materialised.
//
// lf_conv2d_bias_f32(out, x, w, bias, N, C, H, W, xn, xc, xh, xw, wo, wk, bs, C_out, kh, kw,
//                    sh, sw, dh, dw, pt, pl, H_out, W_out)
//   x     (N, C, H, W) read through strides (xn, xc, xh, xw) (elements); N = 1 for (C, H, W)
//   w     (C_out, C*kh*kw) read through strides (wo, wk): tap (c, i, j) at column (c*kh + i)*kw + j
//   bias  (C_out,) with stride bs
//   out   (N, C_out, H_out, W_out) float, contiguous
//   out[n, o, y, x'] (per sample n) = bias[o] + sum_{c,i,j} w[o, (c*kh+i)*kw+j] * x[c, y*sh + i*dh - pt, x'*sw + j*dw - pl]
//   with x taken as 0 outside [0, H) x [0, W) (zero padding: top pt, left pl; bottom and right
//   implied by H_out, W_out).
// Launch: grid (ceil(H_out*W_out / blockDim.x), C_out, N), block 128..256 threads, dynamic shared
// memory C*kh*kw*sizeof(float) (the filter of output channel blockIdx.y, loaded once per block);
// one thread per output pixel.
extern "C" __global__ void lf_conv2d_bias_f32(float* __restrict__ out, const float* __restrict__ x,
                                              const float* __restrict__ w,
                                              const float* __restrict__ bias,
                                              int N, int C, int H, int W, long long xn,
                                              long long xc, long long xh,
                                              long long xw, long long wo, long long wk, long long bs,
                                              int C_out, int kh, int kw, int sh, int sw, int dh,
                                              int dw, int pt, int pl, int H_out, int W_out) {
  extern __shared__ float lf_filter[];  // C * kh * kw
  const int o = blockIdx.y, n = blockIdx.z;
  if (o >= C_out || n >= N) return;
  const int K = C * kh * kw;
  for (int e = threadIdx.x; e < K; e += blockDim.x) lf_filter[e] = __ldg(w + o * wo + e * wk);
  __syncthreads();
  const int pix = blockIdx.x * blockDim.x + threadIdx.x;
  if (pix >= H_out * W_out) return;
  const int y = pix / W_out, xo = pix - y * W_out;
  float acc = __ldg(bias + o * bs);
  for (int c = 0; c < C; ++c) {
    const float* xcp = x + n * xn + c * xc;
    for (int i = 0; i < kh; ++i) {
      const int yy = y * sh + i * dh - pt;
      if (yy < 0 || yy >= H) continue;
      const float* row = xcp + yy * xh;
      const float* f = lf_filter + (c * kh + i) * kw;
      for (int j = 0; j < kw; ++j) {
        const int xx = xo * sw + j * dw - pl;
        if (xx >= 0 && xx < W) acc += f[j] * __ldg(row + xx * xw);
      }
    }
  }
  out[(((long long)n * C_out + o) * H_out + y) * W_out + xo] = acc;
}

// Direct 2-D convolution with bias for MLX: the body of an mx.fast.metal_kernel
// (ensure_row_contiguous=True), the Metal twin of kernels/conv2d.cu (no patch matrix).
//   inputs   x       float (N, C, H, W) (N = 1 for (C, H, W)), row-major
//            w       float (C_out, C*kh*kw), row-major: tap (c, i, j) at column (c*kh + i)*kw + j
//            bias    float (C_out,)
//            params  int32 (15,): N, C, H, W, C_out, kh, kw, sh, sw, dh, dw, pad_top, pad_left, H_out, W_out
//   output   out float (N*C_out*H_out*W_out,), per sample n:
//            out[n, o, y, x'] = bias[o] + sum w[o, (c*kh+i)*kw+j] * x[c, y*sh + i*dh - pt, x'*sw + j*dw - pl]
//            (x is 0 outside [0, H) x [0, W))
//   grid     (W_out, H_out, N*C_out) threads, threadgroup (min(W_out, 16), min(H_out, 16), 1)
uint3 g = thread_position_in_grid;
int N = params[0], C = params[1], H = params[2], W = params[3], C_out = params[4];
int kh = params[5], kw = params[6], sh = params[7], sw = params[8], dh = params[9], dw = params[10];
int pt = params[11], pl = params[12], H_out = params[13], W_out = params[14];
int xo = int(g.x), y = int(g.y), o = int(g.z) % C_out, n = int(g.z) / C_out;
if (xo >= W_out || y >= H_out || n >= N) return;
int K = C * kh * kw;
float acc = float(bias[o]);
for (int c = 0; c < C; ++c) {
  for (int i = 0; i < kh; ++i) {
    int yy = y * sh + i * dh - pt;
    if (yy < 0 || yy >= H) continue;
    for (int j = 0; j < kw; ++j) {
      int xx = xo * sw + j * dw - pl;
      if (xx < 0 || xx >= W) continue;
      acc += float(w[o * K + (c * kh + i) * kw + j]) * float(x[((n * C + c) * H + yy) * W + xx]);
    }
  }
}
out[((n * C_out + o) * H_out + y) * W_out + xo] = acc;

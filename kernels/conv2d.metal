// Direct 2-D convolution with bias for MLX: the body of an mx.fast.metal_kernel
// (ensure_row_contiguous=True), the Metal twin of kernels/conv2d.cu (no patch matrix).
//   inputs   x       float (C, H, W), row-major
//            w       float (C_out, C*kh*kw), row-major: tap (c, i, j) at column (c*kh + i)*kw + j
//            bias    float (C_out,)
//            params  int32 (14,): C, H, W, C_out, kh, kw, sh, sw, dh, dw, pad_top, pad_left, H_out, W_out
//   output   out float (C_out*H_out*W_out,):
//            out[o, y, x'] = bias[o] + sum w[o, (c*kh+i)*kw+j] * x[c, y*sh + i*dh - pt, x'*sw + j*dw - pl]
//            (x is 0 outside [0, H) x [0, W))
//   grid     (W_out, H_out, C_out) threads, threadgroup (min(W_out, 16), min(H_out, 16), 1)
uint3 g = thread_position_in_grid;
int C = params[0], H = params[1], W = params[2], C_out = params[3];
int kh = params[4], kw = params[5], sh = params[6], sw = params[7], dh = params[8], dw = params[9];
int pt = params[10], pl = params[11], H_out = params[12], W_out = params[13];
int xo = int(g.x), y = int(g.y), o = int(g.z);
if (xo >= W_out || y >= H_out || o >= C_out) return;
int K = C * kh * kw;
float acc = float(bias[o]);
for (int c = 0; c < C; ++c) {
  for (int i = 0; i < kh; ++i) {
    int yy = y * sh + i * dh - pt;
    if (yy < 0 || yy >= H) continue;
    for (int j = 0; j < kw; ++j) {
      int xx = xo * sw + j * dw - pl;
      if (xx < 0 || xx >= W) continue;
      acc += float(w[o * K + (c * kh + i) * kw + j]) * float(x[(c * H + yy) * W + xx]);
    }
  }
}
out[(o * H_out + y) * W_out + xo] = acc;

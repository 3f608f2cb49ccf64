// RMS norm over the last axis: y = round(x * rsqrt(mean(x^2) + eps)) * (w + w_offset).
// One block per row (grid-stride over rows); vector loads when the row is V-aligned.
// ROUND: round the normalised value to T before the weight multiplies (Hugging Face's order,
// which luminal_fn.nn.rms_norm follows); float math throughout.
template <typename T> struct LfVec { static const int V = 16 / sizeof(T); };

template <int BLOCK>
__device__ __forceinline__ float lf_block_sum(float v, float* red) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (BLOCK > 32) {
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < BLOCK / 32 ? red[lane] : 0.f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

template <int BLOCK>
__device__ __forceinline__ float lf_block_max(float v, float* red) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = lf_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (BLOCK > 32) {
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < BLOCK / 32 ? red[lane] : -LF_INF;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = lf_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// This thread's share of the sum of squares of one row of D elements (16-byte loads when
// ``vec``) in a block of BLOCK threads.
template <typename T, int BLOCK>
__device__ __forceinline__ float lf_row_sumsq_part(const T* __restrict__ xr, int D, bool vec) {
  constexpr int V = LfVec<T>::V;
  float ss = 0.f;
  if (vec) {
    for (int i = threadIdx.x * V; i < D; i += BLOCK * V) {
      float v[V]; lf_vld<V>(xr + i, v);
      #pragma unroll
      for (int j = 0; j < V; ++j) ss += v[j] * v[j];
    }
  } else {
    for (int i = threadIdx.x; i < D; i += BLOCK) { const float v = lf_ld(xr[i]); ss += v * v; }
  }
  return ss;
}

// The sum of squares of one row of D elements, over the block.
template <typename T, int BLOCK>
__device__ __forceinline__ float lf_row_sumsq(const T* __restrict__ xr, int D, bool vec, float* red) {
  return lf_block_sum<BLOCK>(lf_row_sumsq_part<T, BLOCK>(xr, D, vec), red);
}

template <typename T, typename W, int BLOCK, bool HAS_W, bool ROUND>
__device__ void lf_rms_norm(const T* __restrict__ x, long long row_stride, const W* __restrict__ w,
                            T* __restrict__ y, int rows, int D, float eps, float w_offset) {
  __shared__ float red[32];
  constexpr int V = LfVec<T>::V;
  const bool vec = (D % V == 0) && (row_stride % V == 0);
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + (long long)row * row_stride;
    T* yr = y + (long long)row * D;
    const float r = 1.0f / sqrtf(lf_row_sumsq<T, BLOCK>(xr, D, vec, red) / (float)D + eps);
    if (vec) {
      for (int i = threadIdx.x * V; i < D; i += BLOCK * V) {
        float v[V]; lf_vld<V>(xr + i, v);
        #pragma unroll
        for (int j = 0; j < V; ++j) {
          float n = v[j] * r;
          if (ROUND) n = lf_round<T>(n);
          if (HAS_W) n = n * (lf_ld(w[i + j]) + w_offset);
          v[j] = n;
        }
        lf_vst<V>(yr + i, v);
      }
    } else {
      for (int i = threadIdx.x; i < D; i += BLOCK) {
        float n = lf_ld(xr[i]) * r;
        if (ROUND) n = lf_round<T>(n);
        if (HAS_W) n = n * (lf_ld(w[i]) + w_offset);
        yr[i] = lf_st<T>(n);
      }
    }
  }
}

// rms_norm_rows, the kernel optimize/rules/specialize_norms.egg offers: the traced formula
// y = x * (1 / sqrt(sum(x * x) * inv_n + eps)) * w per row, with the literals inv_n and eps as
// traced (so a norm written with another mean or epsilon is computed as written). x rows of D
// unit-stride elements at row_stride; w (D,) at w_stride; y contiguous, in its own dtype. TR:
// x * r is rounded to it before the weight multiply (Hugging Face's LlamaRMSNorm in half
// precision casts the normalised row back to x's dtype first); float: no rounding.
template <typename TX, typename TW, typename TY, int BLOCK, typename TR = float>
__device__ void lf_rms_rows(const TX* __restrict__ x, long long row_stride, const TW* __restrict__ w,
                            long long w_stride, TY* __restrict__ y, int rows, int D, float inv_n,
                            float eps) {
  __shared__ float red[32];
  constexpr int V = LfVec<TX>::V;
  const bool vec = (D % V == 0) && (row_stride % V == 0) && ((unsigned long long)x % 16 == 0);
  // vector stores of y and vector loads of w where aligned (2-byte scalar stores of a bf16 row
  // ran at a quarter of the copy bandwidth)
  const bool vy = vec && ((unsigned long long)y % 16 == 0);
  const bool vw = vec && w_stride == 1 && ((unsigned long long)w % 16 == 0);
  // 16-byte loads of x (and of w) a thread keeps in registers for a row of D <= BLOCK * V * HOLD:
  // 16 elements of each, so that a 2-byte row (V = 8) holds as many floats as a float32 one
  // (with 4 loads of 8 the 128 floats left one 256-thread block an SM: 0.55 of copy, run V)
  constexpr int HOLD = 16 / V;
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const TX* xr = x + (long long)row * row_stride;
    TY* yr = y + (long long)row * D;
    if (vec && D <= BLOCK * V * HOLD) {  // block-uniform: x and w read once, both before the sum
      float xv[HOLD][V], wv[HOLD][V];
      float ss = 0.f;
      #pragma unroll
      for (int h = 0; h < HOLD; ++h) {
        const int i = (threadIdx.x + h * BLOCK) * V;
        if (i < D) {
          lf_vld<V>(xr + i, xv[h]);
          if (vw) {
            lf_vld<V>(w + i, wv[h]);
          } else {
            #pragma unroll
            for (int j = 0; j < V; ++j) wv[h][j] = lf_ld(w[(long long)(i + j) * w_stride]);
          }
        }
      }
      #pragma unroll
      for (int h = 0; h < HOLD; ++h) {  // the same order of terms as lf_row_sumsq_part
        if ((threadIdx.x + h * BLOCK) * V < D) {
          #pragma unroll
          for (int j = 0; j < V; ++j) ss += xv[h][j] * xv[h][j];
        }
      }
      const float r = 1.0f / sqrtf(lf_block_sum<BLOCK>(ss, red) * inv_n + eps);
      #pragma unroll
      for (int h = 0; h < HOLD; ++h) {
        const int i = (threadIdx.x + h * BLOCK) * V;
        if (i < D) {
          float o[V];
          #pragma unroll
          for (int j = 0; j < V; ++j) o[j] = lf_round<TR>(xv[h][j] * r) * wv[h][j];
          if (vy) {
            lf_vst<V>(yr + i, o);
          } else {
            #pragma unroll
            for (int j = 0; j < V; ++j) yr[i + j] = lf_st<TY>(o[j]);
          }
        }
      }
      continue;
    }
    const float r = 1.0f / sqrtf(lf_row_sumsq<TX, BLOCK>(xr, D, vec, red) * inv_n + eps);
    if (vec) {
      for (int i = threadIdx.x * V; i < D; i += BLOCK * V) {
        float v[V]; lf_vld<V>(xr + i, v);
        #pragma unroll
        for (int j = 0; j < V; ++j) v[j] = lf_round<TR>(v[j] * r) * lf_ld(w[(long long)(i + j) * w_stride]);
        if (vy) {
          lf_vst<V>(yr + i, v);
        } else {
          #pragma unroll
          for (int j = 0; j < V; ++j) yr[i + j] = lf_st<TY>(v[j]);
        }
      }
    } else {
      for (int i = threadIdx.x; i < D; i += BLOCK)
        yr[i] = lf_st<TY>(lf_round<TR>(lf_ld(xr[i]) * r) * lf_ld(w[(long long)i * w_stride]));
    }
  }
}

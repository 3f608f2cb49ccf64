// Rotary embedding of one pair (x1, x2) with its table entries (the host renders the index
// arithmetic around it, so x, cos and sin may be any strided/broadcast views):
//   y1 = x1 * cos1 - x2 * sin1,  y2 = x2 * cos2 + x1 * sin2
// "half" style pairs element i with i + D/2 (Llama / Hugging Face rotate_half), "interleaved"
// pairs 2i with 2i + 1 (GPT-J / Meta's original Llama). cos/sin are the full-width tables
// (D entries, the D/2 angles repeated as Hugging Face builds them), so entry 1 and entry 2 of a
// pair are read separately.
__device__ __forceinline__ void lf_rope_pair(float x1, float x2, float c1, float s1, float c2,
                                             float s2, float& y1, float& y2) {
  y1 = x1 * c1 - x2 * s1;
  y2 = x2 * c2 + x1 * s2;
}

// The rope_half kind of optimize/rules/specialize_rope.egg: the formula nn.rope traces, with its
// literal neg (-1) passed in so the kernel computes exactly what was traced:
//   y1 = x1 * c1 + (x2 * neg) * s1,  y2 = x2 * c2 + x1 * s2
// (with the half tables, c1 == c2 and s1 == s2: both elements of the pair read one entry).
__device__ __forceinline__ void lf_rope_half_pair(float x1, float x2, float c1, float s1, float c2,
                                                  float s2, float neg, float& y1, float& y2) {
  y1 = x1 * c1 + (x2 * neg) * s1;
  y2 = x2 * c2 + x1 * s2;
}

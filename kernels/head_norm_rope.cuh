// One (row, head) of per-head RMSNorm and rotate-half RoPE in one warp's registers (graph.h HeadRmsNorm +
// Rope; dflash.md §1.4-1.5): head_norm_rope.cu runs it in place, qkv_prep.cu on the q and k heads of a
// fused [q | k | v] row before it appends k and v to the cache. Both store the same rounded values, so the
// fused and the separate launches leave the same bits.
// Included by prelude.cuh (the kernels' one header), after the helpers it uses.
#pragma once

namespace tandem::kernels {

constexpr unsigned kHeadWarps = 4;    // (row, head) pairs per 128-thread block
constexpr unsigned kHeadPerLane = 8;  // head_dim <= 256

// Lane l holds columns l, l + 32, ... of the head (column j = lane + 32·i) in v. Normed when w is set,
// rotated at `pos` when inv_freq is set: angles from f32 inverse frequencies, cos/sin in f64 as the CPU
// reference takes them. `warp` indexes the block's shared pair buffer.
template <class T>
TK_DEV void norm_rope_head(const T* x, unsigned head_dim, const float* w, float eps, const float* inv_freq,
                           unsigned pos, unsigned warp, unsigned lane, float (&v)[kHeadPerLane]) {
  const unsigned half = head_dim / 2;
  float sq = 0.0f;
  for (unsigned i = 0; i < kHeadPerLane; ++i) {
    const unsigned j = lane + 32 * i;
    v[i] = j < head_dim ? to_f32(x[j]) : 0.0f;
    sq += v[i] * v[i];
  }
  if (w != nullptr) {
    const float scale = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(head_dim) + eps);
    for (unsigned i = 0; i < kHeadPerLane; ++i) {
      const unsigned j = lane + 32 * i;
      if (j < head_dim) v[i] = w[j] * (v[i] * scale);
    }
  }
  if (inv_freq != nullptr) {
    const float p = static_cast<float>(pos);
    // Column j < half pairs with j + half: in the same lane when half is a multiple of 32, else held by
    // another lane; the pair's partner comes through shared memory to keep every head_dim exact.
    __shared__ float pairs[kHeadWarps][kHeadPerLane * 32];
    for (unsigned i = 0; i < kHeadPerLane; ++i) pairs[warp][lane + 32 * i] = v[i];
    __syncwarp();
    for (unsigned i = 0; i < kHeadPerLane; ++i) {
      const unsigned j = lane + 32 * i;
      if (j >= head_dim) continue;
      const unsigned f = j < half ? j : j - half;
      const double angle = p * inv_freq[f];
      const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
      const float other = pairs[warp][j < half ? j + half : j - half];
      // rotate_pair's arithmetic: x0' = x0·c − x1·s, x1' = x1·c + x0·s.
      v[i] = j < half ? v[i] * c - other * s : v[i] * c + other * s;
    }
  }
}

template <class T>
TK_DEV void store_head(T* x, unsigned head_dim, unsigned lane, const float (&v)[kHeadPerLane]) {
  for (unsigned i = 0; i < kHeadPerLane; ++i) {
    const unsigned j = lane + 32 * i;
    if (j < head_dim) store(x + j, v[i]);
  }
}

}  // namespace tandem::kernels

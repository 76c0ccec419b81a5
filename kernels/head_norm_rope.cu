// Per-head RMSNorm and rotate-half RoPE at absolute positions, in place (graph.h HeadRmsNorm + Rope, the
// pair Qwen3 runs on q and k; dflash.md §1.4-1.5). One warp per (row, head): the head's head_dim <= 256
// values sit in registers (8 per lane), its sum of squares is a warp reduction, and the rotation pairs
// column i with i + head_dim/2 through a shuffle. Positions come from the index (any position a cache
// holds), angles from f32 inverse frequencies, cos/sin in f64 as the CPU reference takes them.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kWarps = 4;    // (row, head) pairs per 128-thread block
constexpr unsigned kPerLane = 8;  // head_dim <= 256

template <class T>
__device__ __forceinline__ void head_norm_rope(const HeadNormRopeArgs& a) {
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned long long item = static_cast<unsigned long long>(blockIdx.x) * kWarps + warp;
  const unsigned row = static_cast<unsigned>(item / a.heads), head = static_cast<unsigned>(item % a.heads);
  if (row >= real_rows(a.n, kRowsTokens)) return;  // whole warps leave together
  // INVARIANT: row < the real tokens <= the bucket rows of x; heads · head_dim <= ld (lowering checked).
  T* x = static_cast<T*>(a.x) + static_cast<unsigned long long>(row) * a.ld + static_cast<unsigned long long>(head) * a.head_dim;
  const unsigned half = a.head_dim / 2;
  // Lane l holds columns l, l + 32, ... of the head (column j = lane + 32·i).
  float v[kPerLane];
  float sq = 0.0f;
  for (unsigned i = 0; i < kPerLane; ++i) {
    const unsigned j = lane + 32 * i;
    v[i] = j < a.head_dim ? to_f32(x[j]) : 0.0f;
    sq += v[i] * v[i];
  }
  if (a.w != nullptr) {
    const float scale = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(a.head_dim) + a.eps);
    for (unsigned i = 0; i < kPerLane; ++i) {
      const unsigned j = lane + 32 * i;
      if (j < a.head_dim) v[i] = a.w[j] * (v[i] * scale);
    }
  }
  if (a.inv_freq != nullptr) {
    const float pos = static_cast<float>(a.pos[row]);
    // Column j < half pairs with j + half: in the same lane when half is a multiple of 32, else held by
    // another lane; the pair's partner comes through shared memory to keep every head_dim exact.
    __shared__ float pairs[kWarps][kPerLane * 32];
    for (unsigned i = 0; i < kPerLane; ++i) pairs[warp][lane + 32 * i] = v[i];
    __syncwarp();
    for (unsigned i = 0; i < kPerLane; ++i) {
      const unsigned j = lane + 32 * i;
      if (j >= a.head_dim) continue;
      const unsigned f = j < half ? j : j - half;
      const double angle = pos * a.inv_freq[f];
      const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
      const float other = pairs[warp][j < half ? j + half : j - half];
      // rotate_pair's arithmetic: x0' = x0·c − x1·s, x1' = x1·c + x0·s.
      v[i] = j < half ? v[i] * c - other * s : v[i] * c + other * s;
    }
  }
  for (unsigned i = 0; i < kPerLane; ++i) {
    const unsigned j = lane + 32 * i;
    if (j < a.head_dim) store(x + j, v[i]);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) head_norm_rope_f32(HeadNormRopeArgs a) { head_norm_rope<float>(a); }
extern "C" __global__ void __launch_bounds__(128) head_norm_rope_f16(HeadNormRopeArgs a) { head_norm_rope<half_t>(a); }
extern "C" __global__ void __launch_bounds__(128) head_norm_rope_bf16(HeadNormRopeArgs a) { head_norm_rope<bf16_t>(a); }

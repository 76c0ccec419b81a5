// Per-head RMSNorm and rotate-half RoPE at absolute positions, in place (graph.h HeadRmsNorm + Rope, the
// pair Qwen3 runs on q and k; dflash.md §1.4-1.5). One warp per (row, head): the head's head_dim <= 256
// values sit in registers (8 per lane, head_norm_rope.cuh), its sum of squares is a warp reduction, and the
// rotation pairs column i with i + head_dim/2. Positions come from the index (any position a cache holds).
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class T>
__device__ __forceinline__ void head_norm_rope(const HeadNormRopeArgs& a) {
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned long long item = static_cast<unsigned long long>(blockIdx.x) * kHeadWarps + warp;
  const unsigned row = static_cast<unsigned>(item / a.heads), head = static_cast<unsigned>(item % a.heads);
  if (row >= real_rows(a.n, kRowsTokens)) return;  // whole warps leave together
  // INVARIANT: row < the real tokens <= the bucket rows of x; heads · head_dim <= ld (lowering checked).
  T* x = static_cast<T*>(a.x) + static_cast<unsigned long long>(row) * a.ld + static_cast<unsigned long long>(head) * a.head_dim;
  float v[kHeadPerLane];
  norm_rope_head(x, a.head_dim, a.w, a.eps, a.inv_freq, a.inv_freq != nullptr ? a.pos[row] : 0u, warp, lane, v);
  store_head(x, a.head_dim, lane, v);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) head_norm_rope_f32(HeadNormRopeArgs a) {
  enter_grid();
  head_norm_rope<float>(a);
}
extern "C" __global__ void __launch_bounds__(128) head_norm_rope_f16(HeadNormRopeArgs a) {
  enter_grid();
  head_norm_rope<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(128) head_norm_rope_bf16(HeadNormRopeArgs a) {
  enter_grid();
  head_norm_rope<bf16_t>(a);
}

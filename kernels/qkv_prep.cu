// A fused [q | k | v] row made ready for cache attention in one launch (args.cuh QkvPrepArgs): replaces
// head_norm_rope on q, head_norm_rope on k and cache_append, three launches a decoder layer that a
// batch-1 step pays in launch gaps more than in bytes (PERF_NOTES "Where a batch-1 decode step goes").
// One warp per (row, head) over the row's heads + 2 · kv_heads heads; values as head_norm_rope.cuh
// computes them, so every element's bits equal the three separate launches'.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class T>
__device__ __forceinline__ void qkv_prep(const QkvPrepArgs& a) {
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned per_row = a.heads + 2 * a.kv_heads;
  const unsigned long long item = static_cast<unsigned long long>(blockIdx.x) * kHeadWarps + warp;
  const unsigned row = static_cast<unsigned>(item / per_row), head = static_cast<unsigned>(item % per_row);
  if (row >= real_rows(a.n, kRowsTokens)) return;  // whole warps leave together
  // INVARIANT: row < the real tokens <= the bucket rows of x; per_row · head_dim <= ld (lowering checked);
  // ir::check kept pos + rows <= capacity and slot < slots, so the cache row lies inside its array.
  T* x = static_cast<T*>(a.x) + static_cast<unsigned long long>(row) * a.ld +
         static_cast<unsigned long long>(head) * a.head_dim;
  if (head < a.heads) {
    float v[kHeadPerLane];
    norm_rope_head(x, a.head_dim, a.w_q, a.eps, a.inv_freq, a.pos[row], warp, lane, v);
    store_head(x, a.head_dim, lane, v);
    return;
  }
  const unsigned width = a.kv_heads * a.head_dim;
  const unsigned long long at =
      (static_cast<unsigned long long>(a.slot[a.seq[row]]) * a.n[kHeaderCapacity] + a.pos[row]) * width;
  const CacheTable t = a.caches[a.cache];
  if (head < a.heads + a.kv_heads) {
    const unsigned kh = head - a.heads;
    float v[kHeadPerLane];
    norm_rope_head(x, a.head_dim, a.w_k, a.eps, a.inv_freq, a.pos[row], warp, lane, v);
    store_head(x, a.head_dim, lane, v);
    store_head(reinterpret_cast<T*>(t.k) + at + static_cast<unsigned long long>(kh) * a.head_dim, a.head_dim, lane, v);
    return;
  }
  const unsigned vh = head - a.heads - a.kv_heads;
  T* dst = reinterpret_cast<T*>(t.v) + at + static_cast<unsigned long long>(vh) * a.head_dim;
  for (unsigned j = lane; j < a.head_dim; j += 32) dst[j] = x[j];
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) qkv_prep_f32(QkvPrepArgs a) {
  enter_grid();
  qkv_prep<float>(a);
}
extern "C" __global__ void __launch_bounds__(128) qkv_prep_f16(QkvPrepArgs a) {
  enter_grid();
  qkv_prep<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(128) qkv_prep_bf16(QkvPrepArgs a) {
  enter_grid();
  qkv_prep<bf16_t>(a);
}

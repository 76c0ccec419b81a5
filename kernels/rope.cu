// Standalone rotate-half RoPE (scorer.md §2 Rope), in place, for a Rope op that is not fused into the
// attention that follows it. Positions come from the index buffer; cos/sin tables are built on the host
// exactly as the CPU reference builds them. One block per token row.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class T>
__device__ __forceinline__ void rope(const RopeArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsTokens)) return;
  // INVARIANT: row < the real tokens; pos[row] < the table's positions (bucket tokens).
  T* x = static_cast<T*>(a.x) + static_cast<unsigned long long>(row) * a.ld + a.col;
  const float* cs = a.cos + static_cast<unsigned long long>(a.pos[row]) * a.half;
  const float* sn = a.sin + static_cast<unsigned long long>(a.pos[row]) * a.half;
  for (unsigned i = threadIdx.x; i < a.heads * a.half; i += blockDim.x) {
    const unsigned h = i / a.half, j = i % a.half;
    T* p = x + h * 2u * a.half;
    float x0 = to_f32(p[j]), x1 = to_f32(p[j + a.half]);
    rotate_pair(x0, x1, cs[j], sn[j]);
    store(p + j, x0);
    store(p + j + a.half, x1);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) rope_f32_f32(RopeArgs a) {
  enter_grid();
  rope<float>(a);
}
extern "C" __global__ void __launch_bounds__(256) rope_f16_f16(RopeArgs a) {
  enter_grid();
  rope<half_t>(a);
}

// Greedy token choice (graph.h Argmax; engine/ir/sampling.h argmax): the first index of the largest value
// of each row. One 1024-thread block per row reads the row once; a max over 64-bit keys (value order,
// then the lower id) is exact whatever the reduction order, so the result never depends on the batch.
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::choice;

namespace {

constexpr unsigned kThreads = kArgmaxThreads;
constexpr unsigned kWarps = kThreads / 32;

__device__ __forceinline__ void argmax_row(const ArgmaxArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, a.kind)) return;  // the whole block leaves together
  // INVARIANT: row < the real rows <= the bucket rows lowering sized x (ld wide) and out for; columns <= ld.
  const float* x = a.x + static_cast<unsigned long long>(row) * a.ld;
  unsigned long long best = 0;
  unsigned c = 0;
  if ((a.ld & 3u) == 0) {
    const unsigned vec_end = a.columns & ~3u;
#pragma unroll 4
    for (c = threadIdx.x * 4; c < vec_end; c += kThreads * 4) {
      // INVARIANT: arena values are 64-byte aligned and ld % 4 == 0, so x + c is 16-byte aligned.
      TK_ASSERT_ALIGNED(x + c, 16);
      const V4 v = *reinterpret_cast<const V4*>(x + c);
      best = max_u64(best, max_u64(max_u64(choice_key(v.x, c), choice_key(v.y, c + 1)),
                                   max_u64(choice_key(v.z, c + 2), choice_key(v.w, c + 3))));
    }
    c = vec_end;
  }
  for (unsigned i = c + threadIdx.x; i < a.columns; i += kThreads) best = max_u64(best, choice_key(x[i], i));
  for (int m = 16; m > 0; m >>= 1) best = max_u64(best, shfl_xor_bits(best, m));
  __shared__ unsigned long long warp_best[kWarps];
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 0; w < kWarps; ++w) best = max_u64(best, warp_best[w]);
    a.out[row] = x[0] != x[0] ? 0u : 0xffffffffu - static_cast<unsigned>(best);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads) argmax_f32_u32(ArgmaxArgs a) {
  enter_grid();
  argmax_row(a);
}

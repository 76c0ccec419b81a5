// Row-wise element type conversion (scorer.md §3 ToHalf): the 16-bit staging copy of an FP32 value that
// feeds an FP16 or BF16 GEMM. Round to nearest even. One block per row, real rows only.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class Out>
__device__ __forceinline__ void cast(const CastArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, a.kind)) return;
  // INVARIANT: row < the real count <= the bucket rows lowering sized every buffer for.
  const unsigned long long base = static_cast<unsigned long long>(row) * a.width;
  const float* x = static_cast<const float*>(a.x) + base;
  Out* y = static_cast<Out*>(a.out) + base;
  for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) store(y + c, x[c]);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) cast_f32_f16(CastArgs a) {
  enter_grid();
  cast<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) cast_f32_bf16(CastArgs a) {
  enter_grid();
  cast<bf16_t>(a);
}

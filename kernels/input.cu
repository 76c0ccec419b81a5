// Input (graph.h Input; dflash.md §1.3): a drafter's tap rows gathered from the feature source of this run
// (the target's tap output left on the device, or the plan's copy of host rows), converted to out's type.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class Out>
__device__ __forceinline__ void input(const InputArgs& a) {
  const unsigned long long address =
      static_cast<unsigned long long>(a.source[0]) | (static_cast<unsigned long long>(a.source[1]) << 32);
  const unsigned long long stride = a.source[2];
  const unsigned storage = a.source[3];
  const unsigned tokens = real_rows(a.n, kRowsTokens);
  const unsigned long long total = static_cast<unsigned long long>(tokens) * a.width;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const unsigned long long row = i / a.width;
    const unsigned c = static_cast<unsigned>(i % a.width);
    // INVARIANT: rows[row] < the source's rows and the source holds rows of at least width elements,
    // stride apart, of its storage (ir::check and CudaPlan::check_batch); row < the real tokens.
    const unsigned long long at = static_cast<unsigned long long>(a.rows[row]) * stride + c;
    float v;
    if (storage == kFeatF16) {
      v = to_f32(reinterpret_cast<const half_t*>(address)[at]);
    } else if (storage == kFeatBF16) {
      v = to_f32(reinterpret_cast<const bf16_t*>(address)[at]);
    } else {
      v = reinterpret_cast<const float*>(address)[at];
    }
    store(static_cast<Out*>(a.out) + row * a.width + c, v);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) input_f32(InputArgs a) {
  enter_grid();
  input<float>(a);
}
extern "C" __global__ void __launch_bounds__(256) input_f16(InputArgs a) {
  enter_grid();
  input<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) input_bf16(InputArgs a) {
  enter_grid();
  input<bf16_t>(a);
}

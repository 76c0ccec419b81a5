// Row picks (graph.h PickRows): out[p] = h[prow[p]], where the index buffer holds each picked row's
// absolute token row (cu[s] + pick): the scorer's markers, a decoder's logit rows. One block per row.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class In, class Out>
__device__ __forceinline__ void gather(const PickRowsArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsPicks)) return;
  // INVARIANT: row < the real picks; prow[row] = cu[s] + pick < the real tokens (ir::check).
  const In* h = static_cast<const In*>(a.h) + static_cast<unsigned long long>(a.prow[row]) * a.width;
  Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * a.width;
  for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) store(y + c, to_f32(h[c]));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) pick_rows_f32_f32(PickRowsArgs a) {
  enter_grid();
  gather<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) pick_rows_f32_f16(PickRowsArgs a) {
  enter_grid();
  gather<float, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) pick_rows_f16_f32(PickRowsArgs a) {
  enter_grid();
  gather<half_t, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) pick_rows_f16_f16(PickRowsArgs a) {
  enter_grid();
  gather<half_t, half_t>(a);
}

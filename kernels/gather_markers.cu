// Marker gather (scorer.md §2 GatherMarkers): out[m] = h[mrow[m]], where the index buffer holds each
// marker's absolute token row (cu[s] + marker). One block per marker row.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class In, class Out>
__device__ __forceinline__ void gather(const GatherArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsMarkers)) return;
  // INVARIANT: row < the real markers; mrow[row] = cu[s] + marker < the real tokens (ir::check).
  const In* h = static_cast<const In*>(a.h) + static_cast<unsigned long long>(a.mrow[row]) * a.width;
  Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * a.width;
  for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) store(y + c, to_f32(h[c]));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) gather_markers_f32_f32(GatherArgs a) { gather<float, float>(a); }
extern "C" __global__ void __launch_bounds__(256) gather_markers_f32_f16(GatherArgs a) { gather<float, half_t>(a); }
extern "C" __global__ void __launch_bounds__(256) gather_markers_f16_f32(GatherArgs a) { gather<half_t, float>(a); }
extern "C" __global__ void __launch_bounds__(256) gather_markers_f16_f16(GatherArgs a) {
  gather<half_t, half_t>(a);
}

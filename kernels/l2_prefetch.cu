// A weight's leading bytes brought into the L2 while other kernels run (engine/cuda/l2_prefetch.cpp says
// when): a thread per (row, K slice) segment asks for it and exits; nothing is written and nothing waits.
#include "prelude.cuh"

using namespace tandem::kernels;

extern "C" __global__ void __launch_bounds__(256) l2_prefetch(L2PrefetchArgs a) {
  const unsigned long long segments = static_cast<unsigned long long>(a.rows) * a.slices;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < segments;
       i += step) {
    const unsigned row = static_cast<unsigned>(i / a.slices), slice = static_cast<unsigned>(i % a.slices);
    // INVARIANT: row < rows and slice < slices, seg_bytes <= slice_bytes and slices · slice_bytes = row_bytes
    // (the launcher checked), so the segment lies inside the weight.
    prefetch_l2(static_cast<const char*>(a.w) + row * a.row_bytes + slice * a.slice_bytes, a.seg_bytes);
  }
}

// DFlash 2's grouped dynamic causal convolution (graph.h DynConv, dflash.md §3.2): a thread per element
// (columns over grid x, rows over grid y), taps summed in the CPU reference's order (τ = 0 first), rows causal
// within their own sequence.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class In, class Out>
__device__ __forceinline__ void dyn_conv(const DynConvArgs& a) {
  // One thread per element: the columns over grid x, the rows over grid y (striding past 65,535), so no thread
  // divides a 64-bit element index (the flat form did, for every element) and every row's sequence offset is
  // read by the threads of that row only.
  const unsigned tokens = real_rows(a.n, kRowsTokens);
  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= a.width) return;
  const unsigned groups = a.width / a.group;
  const In* x = static_cast<const In*>(a.x);
  for (unsigned row = blockIdx.y; row < tokens; row += gridDim.y) {
    // INVARIANT: row < the real tokens, so seq[row] is its sequence and cu[seq] <= row; d rows are
    // 2·taps·groups wide and base is [2, taps, width] (lowering checked both), x and out do not alias.
    const unsigned t = row - a.cu[a.seq[row]];
    const In* d = static_cast<const In*>(a.d) + static_cast<unsigned long long>(row) * 2 * a.taps * groups;
    float y = 0.0f;
    for (unsigned tau = 0; tau < a.taps && tau <= t; ++tau) {  // the CPU reference's order: τ = 0 first
      const unsigned k = a.stage * a.taps + tau;
      const float coef = a.base[static_cast<unsigned long long>(k) * a.width + c] + to_f32(d[k * groups + c / a.group]);
      y += coef * to_f32(x[static_cast<unsigned long long>(row - tau) * a.width + c]);
    }
    Out* o = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * a.width + c;
    store(o, a.accumulate != 0u ? to_f32(*o) + y : y);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) dyn_conv_f32_f32(DynConvArgs a) {
  enter_grid();
  dyn_conv<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) dyn_conv_f16_f16(DynConvArgs a) {
  enter_grid();
  dyn_conv<half_t, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) dyn_conv_f16_f32(DynConvArgs a) {
  enter_grid();
  dyn_conv<half_t, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) dyn_conv_bf16_bf16(DynConvArgs a) {
  enter_grid();
  dyn_conv<bf16_t, bf16_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) dyn_conv_bf16_f32(DynConvArgs a) {
  enter_grid();
  dyn_conv<bf16_t, float>(a);
}

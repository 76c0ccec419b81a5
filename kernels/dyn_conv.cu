// DFlash 2's grouped dynamic causal convolution (graph.h DynConv, dflash.md §3.2): a block per token row, a
// thread per column, taps summed in the CPU reference's order (τ = 0 first), rows causal within their own
// sequence.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class In, class Out>
__device__ __forceinline__ void dyn_conv(const DynConvArgs& a) {
  // A block per row (grid-striding over rows), its threads over the columns: the row's sequence offset is read
  // once a row, and no thread divides a 64-bit element index (the flat form spent most of its time there).
  const unsigned tokens = real_rows(a.n, kRowsTokens);
  const unsigned groups = a.width / a.group;
  const In* x = static_cast<const In*>(a.x);
  for (unsigned row = blockIdx.x; row < tokens; row += gridDim.x) {
    // INVARIANT: row < the real tokens, so seq[row] is its sequence and cu[seq] <= row; d rows are
    // 2·taps·groups wide and base is [2, taps, width] (lowering checked both), x and out do not alias.
    const unsigned t = row - a.cu[a.seq[row]];
    const unsigned taps = t + 1 < a.taps ? t + 1 : a.taps;  // rows before the sequence's first read zero
    const In* d = static_cast<const In*>(a.d) + static_cast<unsigned long long>(row) * 2 * a.taps * groups;
    Out* o = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * a.width;
    for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) {
      float y = 0.0f;
      for (unsigned tau = 0; tau < taps; ++tau) {  // the CPU reference's order: τ = 0 first
        const unsigned k = a.stage * a.taps + tau;
        const float coef =
            a.base[static_cast<unsigned long long>(k) * a.width + c] + to_f32(d[k * groups + c / a.group]);
        y += coef * to_f32(x[static_cast<unsigned long long>(row - tau) * a.width + c]);
      }
      store(o + c, a.accumulate != 0u ? to_f32(o[c]) + y : y);
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) dyn_conv_f32_f32(DynConvArgs a) { dyn_conv<float, float>(a); }
extern "C" __global__ void __launch_bounds__(256) dyn_conv_f16_f16(DynConvArgs a) { dyn_conv<half_t, half_t>(a); }
extern "C" __global__ void __launch_bounds__(256) dyn_conv_f16_f32(DynConvArgs a) { dyn_conv<half_t, float>(a); }
extern "C" __global__ void __launch_bounds__(256) dyn_conv_bf16_bf16(DynConvArgs a) { dyn_conv<bf16_t, bf16_t>(a); }
extern "C" __global__ void __launch_bounds__(256) dyn_conv_bf16_f32(DynConvArgs a) { dyn_conv<bf16_t, float>(a); }

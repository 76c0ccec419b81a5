// Tap capture (graph.h Tap; dflash.md §1.2): out[r, col : col + width] = x[r], the residual stream after a
// tapped layer written into its place of the joined tap row, converted to the tap buffer's type.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class In, class Out>
__device__ __forceinline__ void tap(const TapArgs& a) {
  for_each_chunk(real_rows(a.n, a.kind), a.width, [&](unsigned long long row, unsigned c, bool vec) {
    // INVARIANT: row < the real count <= the bucket rows; col + width <= ld (lowering checked), and the
    // 8-wide path needs col and ld to be multiples of 8 as well (the launcher picks it only then).
    const In* x = static_cast<const In*>(a.x) + row * a.width + c;
    Out* y = static_cast<Out*>(a.out) + row * a.ld + a.col + c;
    if (vec && (a.col & 7u) == 0 && (a.ld & 7u) == 0) {
      float v[8];
      load8(x, v);
      store8(y, v);
    } else if (vec) {
      for (int e = 0; e < 8; ++e) store(y + e, to_f32(x[e]));
    } else {
      store(y, to_f32(*x));
    }
  });
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) tap_f32_f32(TapArgs a) {
  enter_grid();
  tap<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) tap_f32_f16(TapArgs a) {
  enter_grid();
  tap<float, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) tap_f32_bf16(TapArgs a) {
  enter_grid();
  tap<float, bf16_t>(a);
}

// GEMM epilogue kernel (scorer.md §2 Gemm): x = act(x + bias) in place on the real rows, for the
// epilogues cuBLASLt cannot do exactly (exact-erf GELU) or for outputs it cannot bias. Threads take
// 8-wide chunks (single elements when the width is not a multiple of 8), flattened over rows × chunks.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

__device__ __forceinline__ float activate(float v, unsigned act) {
  if (act == kActGelu) return gelu_erf(v);
  if (act == kActRelu) return fmaxf(v, 0.0f);
  return v;
}

template <class T>
__device__ __forceinline__ void bias_act(const BiasActArgs& a) {
  for_each_chunk(real_rows(a.n, a.kind), a.width, [&](unsigned long long row, unsigned c, bool vec) {
    // INVARIANT: row < the real count <= the bucket rows lowering sized x for; c + 8 <= width.
    T* x = static_cast<T*>(a.x) + row * a.width + c;
    if (vec) {
      float v[8], b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      load8(x, v);
      if (a.bias != nullptr) load8(a.bias + c, b);
      for (int e = 0; e < 8; ++e) v[e] = activate(v[e] + b[e], a.act);
      store8(x, v);
    } else {
      store(x, activate(to_f32(*x) + (a.bias != nullptr ? a.bias[c] : 0.0f), a.act));
    }
  });
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) bias_act_f32_f32(BiasActArgs a) {
  enter_grid();
  bias_act<float>(a);
}
extern "C" __global__ void __launch_bounds__(256) bias_act_f16_f16(BiasActArgs a) {
  enter_grid();
  bias_act<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) bias_act_bf16_bf16(BiasActArgs a) {
  enter_grid();
  bias_act<bf16_t>(a);
}

// GeGLU (scorer.md §2): out = gelu(x[:, :I]) · x[:, I:] with exact-erf GELU in FP32. Threads take 8-wide
// chunks of the real rows (single elements when I is not a multiple of 8), flattened over rows × chunks.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class In, class Out>
__device__ __forceinline__ void geglu(const GegluArgs& a) {
  for_each_chunk(real_rows(a.n, a.kind), a.inter, [&](unsigned long long row, unsigned c, bool vec) {
    // INVARIANT: row < the real count <= the bucket rows lowering sized x and out for.
    const In* x = static_cast<const In*>(a.x) + row * 2u * a.inter;
    Out* y = static_cast<Out*>(a.out) + row * a.inter;
    if (vec) {
      float g[8], u[8], r[8];
      load8(x + c, g);
      load8(x + a.inter + c, u);
      for (int e = 0; e < 8; ++e) r[e] = gelu_erf(g[e]) * u[e];
      store8(y + c, r);
    } else {
      store(y + c, gelu_erf(to_f32(x[c])) * to_f32(x[a.inter + c]));
    }
  });
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) geglu_f32_f32(GegluArgs a) {
  enter_grid();
  geglu<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) geglu_f32_f16(GegluArgs a) {
  enter_grid();
  geglu<float, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) geglu_f16_f32(GegluArgs a) {
  enter_grid();
  geglu<half_t, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) geglu_f16_f16(GegluArgs a) {
  enter_grid();
  geglu<half_t, half_t>(a);
}

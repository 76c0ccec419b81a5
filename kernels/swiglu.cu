// SwiGLU (graph.h SwiGlu; Qwen3's MLP): out = silu(x[:, :I]) · x[:, I:] with silu(g) = g / (1 + e^-g),
// on the real rows; threads take 8-wide chunks (single elements when I is not a multiple of 8).
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

template <class In, class Out>
__device__ __forceinline__ void swiglu(const SwigluArgs& a) {
  allow_dependents();  // the down GEMM after it may start and prefetch its weights
  for_each_chunk(real_rows(a.n, a.kind), a.inter, [&](unsigned long long row, unsigned c, bool vec) {
    // INVARIANT: row < the real count <= the bucket rows of x and out; c + 8 <= inter when vec.
    const In* g = static_cast<const In*>(a.x) + row * 2 * a.inter + c;
    const In* u = g + a.inter;
    Out* y = static_cast<Out*>(a.out) + row * a.inter + c;
    if (vec) {
      float gv[8], uv[8];
      load8(g, gv);
      load8(u, uv);
      for (int e = 0; e < 8; ++e) gv[e] = silu(gv[e]) * uv[e];
      store8(y, gv);
    } else {
      store(y, silu(to_f32(*g)) * to_f32(*u));
    }
  });
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) swiglu_f32_f32(SwigluArgs a) {
  enter_grid();
  swiglu<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(256) swiglu_f32_f16(SwigluArgs a) {
  enter_grid();
  swiglu<float, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) swiglu_f32_bf16(SwigluArgs a) {
  enter_grid();
  swiglu<float, bf16_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) swiglu_f16_f16(SwigluArgs a) {
  enter_grid();
  swiglu<half_t, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(256) swiglu_bf16_bf16(SwigluArgs a) {
  enter_grid();
  swiglu<bf16_t, bf16_t>(a);
}

// RMSNorm over rows of any width (graph.h RmsNorm; HF Qwen3RMSNorm): y = w · f32(x / sqrt(mean(x²) + eps)).
// One 256-thread block per row: each thread sums the squares of a strided share of the columns, a fixed
// warp-then-block tree adds them (the same order for every run), then the row is scaled in a second pass.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kThreads = 256;

template <class In, class Out>
__device__ __forceinline__ void rms_norm(const RmsNormArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, a.kind)) return;  // the whole block leaves together
  // INVARIANT: row < the real count <= the bucket rows lowering sized x and out for.
  const In* x = static_cast<const In*>(a.x) + static_cast<unsigned long long>(row) * a.width;
  Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * a.width;
  const bool vec = (a.width & 7u) == 0;
  float sq = 0.0f;
  if (vec) {
    for (unsigned c = threadIdx.x * 8; c < a.width; c += kThreads * 8) {
      float v[8];
      load8(x + c, v);
      for (int e = 0; e < 8; ++e) sq += v[e] * v[e];
    }
  } else {
    for (unsigned c = threadIdx.x; c < a.width; c += kThreads) {
      const float v = to_f32(x[c]);
      sq += v * v;
    }
  }
  __shared__ float partial[kThreads / 32];
  sq = warp_sum(sq);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sq;
  __syncthreads();
  float total = 0.0f;
  for (unsigned w = 0; w < kThreads / 32; ++w) total += partial[w];
  const float scale = 1.0f / sqrtf(total / static_cast<float>(a.width) + a.eps);
  if (vec) {
    for (unsigned c = threadIdx.x * 8; c < a.width; c += kThreads * 8) {
      float v[8], w[8];
      load8(x + c, v);
      load8(a.w + c, w);
      for (int e = 0; e < 8; ++e) v[e] = w[e] * (v[e] * scale);
      store8(y + c, v);
    }
  } else {
    for (unsigned c = threadIdx.x; c < a.width; c += kThreads) store(y + c, a.w[c] * (to_f32(x[c]) * scale));
  }
}

}  // namespace

#define TANDEM_RMS_NORM(name, In, Out)                                      \
  extern "C" __global__ void __launch_bounds__(kThreads) name(RmsNormArgs a) { \
    enter_grid();                                                          \
    rms_norm<In, Out>(a);                                                  \
  }
TANDEM_RMS_NORM(rms_norm_f32_f32, float, float)
TANDEM_RMS_NORM(rms_norm_f32_f16, float, half_t)
TANDEM_RMS_NORM(rms_norm_f32_bf16, float, bf16_t)
TANDEM_RMS_NORM(rms_norm_f16_f32, half_t, float)
TANDEM_RMS_NORM(rms_norm_f16_f16, half_t, half_t)
TANDEM_RMS_NORM(rms_norm_bf16_f32, bf16_t, float)
TANDEM_RMS_NORM(rms_norm_bf16_bf16, bf16_t, bf16_t)
#undef TANDEM_RMS_NORM

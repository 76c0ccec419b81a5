// LayerNorm (scorer.md §2-3): one warp per row with the row held in registers (width <= 1024, checked
// at lowering), FP32 two-pass statistics, optional bias; 4 rows per 128-thread block. Rows whose width
// is a multiple of 8 move as 8-element vectors (each lane owns chunks of 8 consecutive columns).
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr int kPerLane = 32;  // 1024 columns / 32 lanes

template <class In, class Out>
__device__ __forceinline__ void layer_norm(const LayerNormArgs& a) {
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned row = blockIdx.x * 4 + warp;
  if (row >= real_rows(a.n, a.kind)) return;  // whole warps leave together
  // INVARIANT: row < the real count <= the bucket rows lowering sized every buffer for.
  const In* x = static_cast<const In*>(a.x) + static_cast<unsigned long long>(row) * a.width;
  Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * a.width;
  const bool vec = (a.width & 7u) == 0;
  // Element i of this lane sits at column col(i): 8-wide chunks 32 lanes apart, or single columns.
  auto col = [&](int i) -> unsigned {
    return vec ? ((static_cast<unsigned>(i) >> 3) * 32u + lane) * 8u + (static_cast<unsigned>(i) & 7u)
               : lane + 32u * static_cast<unsigned>(i);
  };
  float v[kPerLane], w[kPerLane], b[kPerLane];
  // Row, scale and shift are loaded together up front: one round trip to memory before the reductions.
  if (vec) {
#pragma unroll
    for (int i = 0; i < kPerLane; i += 8) {
      float t[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tw[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tb[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (col(i) < a.width) {
        load8(x + col(i), t);
        load8(a.w + col(i), tw);
        if (a.b != nullptr) load8(a.b + col(i), tb);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        v[i + e] = t[e];
        w[i + e] = tw[e];
        b[i + e] = tb[e];
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const bool in = col(i) < a.width;
      v[i] = in ? to_f32(x[col(i)]) : 0.0f;
      w[i] = in ? a.w[col(i)] : 0.0f;
      b[i] = in && a.b != nullptr ? a.b[col(i)] : 0.0f;
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) sum += v[i];
  const float mean = warp_sum(sum) / static_cast<float>(a.width);
  float sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float d = col(i) < a.width ? v[i] - mean : 0.0f;
    sq += d * d;
  }
  const float rstd = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(a.width) + a.eps);
  if (vec) {
#pragma unroll
    for (int i = 0; i < kPerLane; i += 8) {
      const unsigned c = col(i);
      if (c >= a.width) continue;
      float r[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) r[e] = (v[i + e] - mean) * rstd * w[i + e] + b[i + e];
      store8(y + c, r);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const unsigned c = col(i);
      if (c < a.width) store(y + c, (v[i] - mean) * rstd * w[i] + b[i]);
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) layer_norm_f32_f32(LayerNormArgs a) {
  enter_grid();
  layer_norm<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(128) layer_norm_f32_f16(LayerNormArgs a) {
  enter_grid();
  layer_norm<float, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(128) layer_norm_f16_f32(LayerNormArgs a) {
  enter_grid();
  layer_norm<half_t, float>(a);
}
extern "C" __global__ void __launch_bounds__(128) layer_norm_f16_f16(LayerNormArgs a) {
  enter_grid();
  layer_norm<half_t, half_t>(a);
}

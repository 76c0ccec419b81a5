// The quantized GEMM (args.cuh QGemmArgs): codes and scales are read as stored and dequantized in
// registers, FP32 accumulation. Memory-bound by design for the drafter's few rows: each warp streams one
// output column's codes once per tile of kQGemmRows rows and serves every row of the tile from them.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

struct alignas(8) CodeWords {
  unsigned lo, hi;
};

// The 8 codes of columns 8s..8s+7 of a row, as exact floats.
__device__ __forceinline__ void decode8(const QGemmArgs& a, const unsigned char* row, unsigned s, float (&q)[8]) {
  if (a.bits == 8) {
    TK_ASSERT_ALIGNED(row + 8 * s, 8);
    const CodeWords w = reinterpret_cast<const CodeWords*>(row)[s];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      q[j] = static_cast<float>(static_cast<signed char>((w.lo >> (8 * j)) & 0xffu));
      q[4 + j] = static_cast<float>(static_cast<signed char>((w.hi >> (8 * j)) & 0xffu));
    }
  } else {
    TK_ASSERT_ALIGNED(row + 4 * s, 4);
    const unsigned w = reinterpret_cast<const unsigned*>(row)[s];
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = static_cast<float>(static_cast<int>((w >> (4 * j)) & 0xfu) - 8);
  }
}

template <class In, class Out>
__device__ __forceinline__ void qgemm(const QGemmArgs& a) {
  const unsigned rows = real_rows(a.n, a.kind);
  const unsigned lane = threadIdx.x % 32u;
  const unsigned warp = threadIdx.x / 32u;
  const unsigned steps = a.k / 8u;  // 8 codes per lane and step
  const unsigned groups = a.k / a.group;
  const unsigned row_bytes = a.bits == 8 ? a.k : a.k / 2u;
  const In* x = static_cast<const In*>(a.x);
  // Every exit below is uniform over a warp (col and r0 are), so the butterfly sums see all 32 lanes.
  for (unsigned r0 = blockIdx.y * kQGemmRows; r0 < rows; r0 += gridDim.y * kQGemmRows) {
    const unsigned tile = min_u(rows - r0, kQGemmRows);
    for (unsigned col = blockIdx.x * kQGemmWarps + warp; col < a.cols; col += gridDim.x * kQGemmWarps) {
      // INVARIANT: col < cols and r0 + tile <= the real rows, within what lowering sized the buffers for;
      // k % 32 == 0 and the buffers are 64-byte aligned, so the code words and x's 8-element loads align.
      const unsigned char* row = static_cast<const unsigned char*>(a.codes) + static_cast<unsigned long long>(col) * row_bytes;
      const unsigned short* scales = a.scales + static_cast<unsigned long long>(col) * groups;
      float acc[kQGemmRows];
#pragma unroll
      for (unsigned b = 0; b < kQGemmRows; ++b) acc[b] = 0.0f;
      for (unsigned s = lane; s < steps; s += 32u) {
        float q[8];
        decode8(a, row, s, q);
        const float scale = qgemm_scale(a, scales[(8u * s) / a.group]);
#pragma unroll
        for (unsigned b = 0; b < kQGemmRows; ++b) {
          if (b < tile) {
            float v[8];
            load8(x + static_cast<unsigned long long>(r0 + b) * a.k + 8u * s, v);
            float part = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; ++j) part += q[j] * v[j];
            acc[b] += scale * part;
          }
        }
      }
#pragma unroll
      for (unsigned b = 0; b < kQGemmRows; ++b) {
        if (b < tile) {
          const float sum = warp_sum(acc[b]);
          if (lane == 0u) {
            Out* o = static_cast<Out*>(a.out) + static_cast<unsigned long long>(r0 + b) * a.cols + col;
            const float y = qgemm_epilogue(a, sum, col);
            store(o, a.accumulate != 0u ? to_f32(*o) + y : y);
          }
        }
      }
    }
  }
}

}  // namespace

#define TK_QGEMM(name, In, Out)                                            \
  extern "C" __global__ void __launch_bounds__(256, 1) name(QGemmArgs a) { \
    enter_grid();                                                          \
    qgemm<In, Out>(a);                                                     \
  }
TK_QGEMM(qgemm_f32_f32, float, float)
TK_QGEMM(qgemm_f16_f16, half_t, half_t)
TK_QGEMM(qgemm_f16_f32, half_t, float)
TK_QGEMM(qgemm_f32_f16, float, half_t)
TK_QGEMM(qgemm_bf16_bf16, bf16_t, bf16_t)
TK_QGEMM(qgemm_bf16_f32, bf16_t, float)
TK_QGEMM(qgemm_f32_bf16, float, bf16_t)
#undef TK_QGEMM

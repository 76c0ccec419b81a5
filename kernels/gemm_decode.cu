// The decode GEMM (gemm_impl.h's determinism rule; PERF_NOTES "CUDA target"): out[m, n] = a[m, k] · w[n, k]ᵀ
// (+ bias, + out) with f16/bf16 operands and f32 accumulation on mma.sync m16n8k16, K split by (k, n) alone
// and summed in a fixed order, so a row's bits never depend on m. Each CTA streams its weights once for 32 rows.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

// Warp w of a CTA computes the 16 output columns of tile blockIdx.y · (warps / splits) + w / splits over
// K slice w % splits, for the CTA's kGemmDecodeRows rows (grid x, fastest, so the blocks of one weight
// slab run together and read it from L2 after the first). The weight tile is the mma's A (16 columns × 16
// k), the rows its B (k × 8 rows), so one weight fragment serves four groups of 8 rows. A lane loads 8
// consecutive k of its column (row g) and of column g + 8, and 8 consecutive k of its row: the first mma
// takes k 0-1 and 2-3 of each lane's 8 as the ISA's k 2t, 2t + 1 and 2t + 8, 2t + 9, the second 4-5 and
// 6-7; A and B permute K alike, so the products are the GEMM's (the fixed permutation is the same at every m).
template <class T, class Out>
TK_DEV void gemm_decode(const GemmDecodeArgs& a) {
  __shared__ float part[kGemmDecodeWarps][16][kGemmDecodeRows + 1];  // +1: no bank conflicts reading columns
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned splits = a.splits, tiles = kGemmDecodeWarps / splits;
  const unsigned rows = real_rows(a.n, a.kind);
  const unsigned row0 = blockIdx.x * kGemmDecodeRows;
  if (row0 >= rows) return;  // the whole block: before any barrier
  const unsigned here = min_u(kGemmDecodeRows, rows - row0);  // rows of this block
  const unsigned groups = (here + 7) / 8;
  const unsigned tile = blockIdx.y * tiles + warp / splits, slice = warp % splits;
  const unsigned col0 = tile * 16;
  float acc[4][4] = {};
  if (col0 < a.cols) {  // warp-uniform: the mma needs every lane
    const unsigned chunks = (a.k + 31) / 32;
    const unsigned c_begin = min_u(chunks, slice * a.slice_chunks);
    const unsigned c_end = min_u(chunks, c_begin + a.slice_chunks);
    const bool w0_ok = col0 + g < a.cols, w1_ok = col0 + g + 8 < a.cols;
    // INVARIANT: lowering checked k % 8 == 0 and 16-byte aligned operands, so each 8-element access at
    // 8t of a 32-wide chunk is aligned and lies inside its row when kk < k; rows and columns past the
    // real counts are never read.
    const T* w0 = static_cast<const T*>(a.w) + static_cast<unsigned long long>(w0_ok ? col0 + g : 0) * a.k;
    const T* w1 = static_cast<const T*>(a.w) + static_cast<unsigned long long>(w1_ok ? col0 + g + 8 : 0) * a.k;
    const T* x = static_cast<const T*>(a.a) + static_cast<unsigned long long>(row0) * a.k;
    constexpr unsigned kUnroll = 4;  // weight loads in flight per lane: 2 × kUnroll × 16 bytes
    for (unsigned c = c_begin; c < c_end; c += kUnroll) {
      U4 wa[kUnroll], wb[kUnroll];
#pragma unroll
      for (unsigned u = 0; u < kUnroll; ++u) {
        const unsigned kk = (c + u) * 32 + 8 * t;
        const bool ok = c + u < c_end && kk < a.k;
        wa[u] = load16_or_zero(w0 + kk, ok && w0_ok);
        wb[u] = load16_or_zero(w1 + kk, ok && w1_ok);
      }
#pragma unroll
      for (unsigned u = 0; u < kUnroll; ++u) {
        if (c + u >= c_end) break;  // warp-uniform
        const unsigned kk = (c + u) * 32 + 8 * t;
        const unsigned a1[4] = {wa[u].x, wb[u].x, wa[u].y, wb[u].y};
        const unsigned a2[4] = {wa[u].z, wb[u].z, wa[u].w, wb[u].w};
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
          if (j >= groups) break;  // warp-uniform
          const unsigned r = 8 * j + g;
          const U4 xv = load16_or_zero(x + static_cast<unsigned long long>(r) * a.k + kk, r < here && kk < a.k);
          const unsigned b1[2] = {xv.x, xv.y}, b2[2] = {xv.z, xv.w};
          mma_16816_t(acc[j], a1, b1, T{});
          mma_16816_t(acc[j], a2, b2, T{});
        }
      }
    }
  }
  // Bias, then the prior output, after the slices' sum: the same order for every row at every m.
  sum_slices<kGemmDecodeRows>(part, acc, groups, splits, here, a.cols, [&](unsigned r, unsigned col, float v) {
    store_gemm_output<Out>(a.out, a.cols, row0 + r, col, v, a.bias, a.accumulate);
  });
}

}  // namespace

#define TK_GEMM_DECODE(name, T, Out)                                                    \
  extern "C" __global__ void __launch_bounds__(kGemmDecodeWarps * 32) name(GemmDecodeArgs a) { \
    enter_grid();                                                                       \
    gemm_decode<T, Out>(a);                                                             \
  }
TK_GEMM_DECODE(gemm_decode_f16_f32, half_t, float)
TK_GEMM_DECODE(gemm_decode_f16_f16, half_t, half_t)
TK_GEMM_DECODE(gemm_decode_bf16_f32, bf16_t, float)
TK_GEMM_DECODE(gemm_decode_bf16_bf16, bf16_t, bf16_t)
#undef TK_GEMM_DECODE

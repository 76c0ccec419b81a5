// The quantized GEMM on tensor cores in the whole-K mapping (qgemm_tc.cuh has what both mappings share): warp w
// of a block computes tile blockIdx.y · warps + w over every K slice in turn, for the block's kQGemmTcRows rows
// (grid x). The block's 8 warps are then 8 tiles (128 columns) of the same rows, which the 7 after the first read
// from L1, where the sliced mapping's warps are the slices of one tile and read disjoint rows: at many rows the
// rows, not the codes, are most of what a launch reads from L2 (PERF_NOTES "The quantized GEMM for many rows").
// The slices meet in registers in the sliced mapping's order (the first, then each next one added), so every
// output has the sliced mapping's bits. No barriers: a warp without columns leaves.
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::qgemm_tc;

namespace {

struct WholeK {
  template <unsigned kBits, class In, class Out, bool kPacked>
  TK_DEV static void run(const QGemmTcArgs& args) {
    const QGemmArgs& a = args.q;
    TcTile tl;
    if (!tc_tile(a, blockIdx.y * kQGemmTcWarps + threadIdx.x / 32, tl) || tl.col0 >= a.cols) return;
    float total[4][4] = {};
    for (unsigned s = 0; s < args.splits; ++s) {
      float acc[4][4] = {};
      tc_slice_into<kBits, In, kPacked>(a, tl, tc_slice(args, s), acc);
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) {
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) total[j][e] = s == 0 ? acc[j][e] : total[j][e] + acc[j][e];
      }
    }
    // total[j][e] is column g (+8 for e >= 2) of the tile, row 8j + 2t + (e & 1) (tensor_core.cuh sum_slices).
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
      if (j >= tl.frags) break;
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned r = 8 * j + 2 * tl.t + (e & 1u), col = tl.col0 + tl.g + (e >= 2 ? 8u : 0u);
        if (r < tl.here && col < a.cols) store_tc_output<Out>(a, tl.row0, r, col, total[j][e]);
      }
    }
  }
};

}  // namespace

#define TK_QGEMM_TC(name, In, Out)                                                     \
  extern "C" __global__ void __launch_bounds__(kQGemmTcWarps * 32) name(QGemmTcArgs a) { \
    enter_grid();                                                                          \
    dispatch<WholeK, In, Out>(a);                                                          \
  }
TK_QGEMM_TC(qgemm_tc_whole_k_f32_f32, float, float)
TK_QGEMM_TC(qgemm_tc_whole_k_f16_f16, half_t, half_t)
TK_QGEMM_TC(qgemm_tc_whole_k_f16_f32, half_t, float)
TK_QGEMM_TC(qgemm_tc_whole_k_f32_f16, float, half_t)
TK_QGEMM_TC(qgemm_tc_whole_k_bf16_bf16, bf16_t, bf16_t)
TK_QGEMM_TC(qgemm_tc_whole_k_bf16_f32, bf16_t, float)
TK_QGEMM_TC(qgemm_tc_whole_k_f32_bf16, float, bf16_t)
#undef TK_QGEMM_TC

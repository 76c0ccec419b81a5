// The quantized GEMM on tensor cores in the sliced mapping (qgemm_tc.cuh has what both mappings share): warp w of
// a block computes tile blockIdx.y · (warps / splits) + w / splits over K slice w % splits for the block's
// kQGemmTcRows rows (grid x, fastest, so the blocks of one column slab run together and read its codes from L2
// after the first); the block's slices meet in shared memory.
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::qgemm_tc;

namespace {

// The block's slice partials, one array whatever the entry instantiates.
TK_DEV float (*slice_partials())[16][kQGemmTcRows + 1] {
  __shared__ float part[kQGemmTcWarps][16][kQGemmTcRows + 1];  // +1: no bank conflicts reading columns
  return part;
}

struct Sliced {
  template <unsigned kBits, class In, class Out, bool kPacked>
  TK_DEV static void run(const QGemmTcArgs& args) {
    const QGemmArgs& a = args.q;
    const unsigned warp = threadIdx.x / 32, splits = args.splits;
    TcTile tl;
    if (!tc_tile(a, blockIdx.y * (kQGemmTcWarps / splits) + warp / splits, tl)) return;  // the block has no rows
    float acc[4][4] = {};
    if (tl.col0 < a.cols) tc_slice_into<kBits, In, kPacked>(a, tl, tc_slice(args, warp % splits), acc);
    sum_slices<kQGemmTcRows>(slice_partials(), acc, tl.frags, splits, tl.here, a.cols,
                             [&](unsigned r, unsigned col, float v) { store_tc_output<Out>(a, tl.row0, r, col, v); });
  }
};

}  // namespace

#define TK_QGEMM_TC(name, In, Out)                                                     \
  extern "C" __global__ void __launch_bounds__(kQGemmTcWarps * 32) name(QGemmTcArgs a) { \
    enter_grid();                                                                          \
    dispatch<Sliced, In, Out>(a);                                                          \
  }
TK_QGEMM_TC(qgemm_tc_f32_f32, float, float)
TK_QGEMM_TC(qgemm_tc_f16_f16, half_t, half_t)
TK_QGEMM_TC(qgemm_tc_f16_f32, half_t, float)
TK_QGEMM_TC(qgemm_tc_f32_f16, float, half_t)
TK_QGEMM_TC(qgemm_tc_bf16_bf16, bf16_t, bf16_t)
TK_QGEMM_TC(qgemm_tc_bf16_f32, bf16_t, float)
TK_QGEMM_TC(qgemm_tc_f32_bf16, float, bf16_t)
#undef TK_QGEMM_TC

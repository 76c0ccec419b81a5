// The streaming GEMM (args.cuh GemmStreamArgs; PERF_NOTES "cuBLASLt's bits from a kernel of our own"): a decode
// step's GEMM at 1..16 rows streams each weight once and is bound by HBM, not by arithmetic. cuBLASLt runs one
// CTA per 128-column tile there (32 CTAs for n = 4,096 on 132 SMs), so it streams well below the copy rate.
// Here a block is one 16-column tile, a warp per K slice; each output is one chain of mma.sync m16n8k16 steps
// over K in natural order from a zero accumulator, the slices added in slice order and then the prior output,
// as cuBLASLt's split-K with its reduction in the compute type computes it. Whether the bits are the same is the
// hardware's to say: lowering runs both on a probe and takes this kernel only where they are (gemm_impl.h), and
// with timing on only where it is also faster.
//
// Fifth form (PERF_NOTES "The streaming GEMM, fifth form"): the fourth form's register ring of weights, each
// weight row read 64 contiguous bytes at a time (a lane loads 16 bytes, 8 k, of its row for a pair of steps; one
// shuffle with lane t ^ 2 leaves each lane 4 k of each step, a permutation within the step that the activations
// take alike and that the H100 and H200 showed gives the same bits: lanes 0..3 hold k 0-3, 8-11, 4-7, 12-15 of a
// step). The activations are no longer a second register ring: the fourth form halved that ring and ran ~2x
// slower where warps are few, so its round trips bound the chain. Each warp now copies its slice of the bucket's
// rows into shared memory once, before its chain, and the chain reads them there.
#include "prelude.cuh"

using namespace tandem::kernels;
using tandem::kernels::choice::shfl_xor_bits;

namespace {

constexpr unsigned kPairs = kGemmStreamDepth / 2;  // pairs of weight steps in flight per lane
static_assert(kGemmStreamDepth % 2 == 0, "the ring holds whole pairs of steps");

// A pair of k16 steps of the tile's rows g and g + 8 for this lane, as loaded: 8 k of each row.
struct PairLoad {
  U4 g0, g8;
};

// One step's fragment of one row for this lane: 4 k in two registers.
struct RowStep {
  unsigned lo, hi;
};

// Lane t loaded k 8t..8t+7 of the pair: lanes 0, 1 the first step's, lanes 2, 3 the second's. Each hands
// half of it to lane t ^ 2 and keeps the other half.
TK_DEV void split_pair(const U4& v, bool low_lane, RowStep& first, RowStep& second) {
  const unsigned r0 = shfl_xor_bits(low_lane ? v.z : v.x, 2), r1 = shfl_xor_bits(low_lane ? v.w : v.y, 2);
  first = low_lane ? RowStep{v.x, v.y} : RowStep{r0, r1};
  second = low_lane ? RowStep{r0, r1} : RowStep{v.z, v.w};
}

template <class T, class Out>
TK_DEV void gemm_stream(const GemmStreamArgs& a) {
  __shared__ float part[kGemmStreamWarps][16][kGemmStreamRows + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const bool low_lane = t < 2;
  const unsigned col0 = blockIdx.y * 16;  // INVARIANT: col0 < cols (grid y is the tile count)
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * 2;
  const unsigned k_begin = min_u(a.k, warp * a.slice_k), k_end = min_u(a.k, k_begin + a.slice_k);
  const unsigned steps = (k_end - k_begin) / 16;  // warp-uniform; k and slice_k are multiples of 16
  const unsigned pairs = (steps + 1) / 2;
  // Columns past the real ones read the last real column's row: an A row feeds only its own output column, which
  // is not stored. Likewise activation rows past the real ones read the last real row.
  const unsigned char* w = static_cast<const unsigned char*>(a.w);
  const unsigned char* w0 = w + min_u(col0 + g, a.cols - 1) * row_bytes + k_begin * 2ull + 16ull * t;
  const unsigned char* w8 = w + min_u(col0 + g + 8, a.cols - 1) * row_bytes + k_begin * 2ull + 16ull * t;
  // A slice of an odd step count ends on half a pair: lanes 2 and 3 would read past it (past the row at its end).
  auto load_pair = [&](unsigned p) {
    PairLoad v{};
    if (low_lane || 2 * p + 1 < steps) {
      v.g0 = *reinterpret_cast<const U4*>(w0 + 64ull * p);
      v.g8 = *reinterpret_cast<const U4*>(w8 + 64ull * p);
    }
    return v;
  };
  // The first weights go out before the kernel ahead has finished (programmatic dependent launch): they are
  // constants. Its outputs (this kernel's rows, the index) only after the wait.
  PairLoad ws[kPairs] = {};
#pragma unroll
  for (unsigned u = 0; u < kPairs; ++u) {
    if (u < pairs) ws[u] = load_pair(u);
  }
  wait_prior_grids();
  const unsigned here = min_u(real_rows(a.n, a.kind), min_u(a.rows, kGemmStreamRows));
  const unsigned groups = (here + 7) / 8;
  // The warp's slice of the real rows into its part of shared memory (rows kGemmStreamRowPad bytes longer than the
  // slice, so the 8 rows of a step's reads fall in distinct banks), in 16-byte copies, once.
  const unsigned stride = a.slice_k * 2 + kGemmStreamRowPad;
  unsigned char* xs = dynamic_smem() + warp * a.rows * stride;
  const unsigned chunks = (k_end - k_begin) / 8;  // 16-byte pieces of a row's slice
  const unsigned char* x = static_cast<const unsigned char*>(a.a) + k_begin * 2ull;
  for (unsigned c = lane; c < here * chunks; c += 32) {
    const unsigned r = c / chunks, piece = c % chunks;
    cp_async16(xs + r * stride + piece * 16, x + r * row_bytes + piece * 16ull, true);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncwarp();
  // This lane's 4 k of step s start at 16 s + 8 (t & 1) + 4 (t >> 1), as split_pair leaves the weights. Rows past
  // the real ones read the last real row: they feed only outputs that are not stored.
  const unsigned lane_k = 16u * (t & 1u) + 8u * (t >> 1);
  const unsigned char* x0 = xs + min_u(g, here - 1) * stride + lane_k;  // here > 0 wherever they are read
  const unsigned char* x1 = xs + min_u(g + 8, here - 1) * stride + lane_k;
  float acc[4][4] = {};
  auto step = [&](const RowStep& r0, const RowStep& r8, unsigned s) {
    const unsigned af[4] = {r0.lo, r8.lo, r0.hi, r8.hi};
    const U2 v0 = *reinterpret_cast<const U2*>(x0 + 32u * s);
    const unsigned b0[2] = {v0.x, v0.y};
    mma_16816_t(acc[0], af, b0, T{});
    if (groups > 1) {  // block-uniform
      const U2 v1 = *reinterpret_cast<const U2*>(x1 + 32u * s);
      const unsigned b1[2] = {v1.x, v1.y};
      mma_16816_t(acc[1], af, b1, T{});
    }
  };
  if (here > 0) {  // block-uniform
    for (unsigned base = 0; base < pairs; base += kPairs) {
#pragma unroll
      for (unsigned u = 0; u < kPairs; ++u) {
        const unsigned p = base + u;
        if (p >= pairs) break;  // warp-uniform
        RowStep a0, a8, b0, b8;
        split_pair(ws[u].g0, low_lane, a0, b0);
        split_pair(ws[u].g8, low_lane, a8, b8);
        // The slot just split is refilled with the pair kPairs ahead.
        if (p + kPairs < pairs) ws[u] = load_pair(p + kPairs);
        step(a0, a8, 2 * p);
        if (2 * p + 1 < steps) step(b0, b8, 2 * p + 1);  // warp-uniform
      }
    }
  }
  sum_slices<kGemmStreamRows>(part, acc, groups, a.splits, here, a.cols, [&](unsigned r, unsigned col, float v) {
    store_gemm_output<Out>(a.out, a.cols, r, col, v, nullptr, a.accumulate);
  });
}

}  // namespace

#define TK_GEMM_STREAM(name, T, Out)                                                               \
  extern "C" __global__ void __launch_bounds__(kGemmStreamWarps * 32) name(GemmStreamArgs a) { \
    gemm_stream<T, Out>(a);                                                                        \
  }
TK_GEMM_STREAM(gemm_stream_f16_f32, half_t, float)
TK_GEMM_STREAM(gemm_stream_f16_f16, half_t, half_t)
TK_GEMM_STREAM(gemm_stream_bf16_f32, bf16_t, float)
TK_GEMM_STREAM(gemm_stream_bf16_bf16, bf16_t, bf16_t)
#undef TK_GEMM_STREAM

// The streaming GEMM (args.cuh GemmStreamArgs; PERF_NOTES "cuBLASLt's bits from a kernel of our own"): a decode
// step's GEMM at 1..16 rows streams each weight once and is bound by HBM, not by arithmetic. cuBLASLt runs one
// CTA per 128-column tile there (32 CTAs for n = 4,096 on 132 SMs), so it streams well below the copy rate.
// Here a block is one 16-column tile, a warp per K slice; each output is one chain of mma.sync m16n8k16 steps
// over K in natural order from a zero accumulator, the slices added in slice order and then the prior output,
// as cuBLASLt's split-K with its reduction in the compute type computes it. Whether the bits are the same is the
// hardware's to say: lowering runs both on a probe and takes this kernel only where they are (gemm_impl.h).
//
// Third form (PERF_NOTES "The streaming GEMM, third form"): the chain fixes the order of the arithmetic, not of
// the loads, so each lane keeps kDepth steps of its weights in flight in registers, a ring indexed by constants
// (the loop is unrolled by its depth: no copies between slots, no barrier, no wait but the scoreboard's on the
// oldest slot), and the activations kRowDepth steps ahead from L1/L2. Within a step the 16 k are permuted alike in
// both operands (lane t holds k 4t..4t+3 in one 8-byte load), which the H200 showed gives the same bits.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kDepth = kGemmStreamDepth;  // weight steps in flight per lane
constexpr unsigned kRowDepth = 8;              // activation steps in flight per lane
static_assert(kDepth % kRowDepth == 0, "the activations' slot is the weights' slot modulo kRowDepth");

// One k16 step of a 16-row operand for this lane: rows g and g + 8 (w0, w1), k 4t..4t+3 of the step.
struct WeightStep {
  U2 lo, hi;
};

TK_DEV WeightStep load_weight_step(const unsigned char* w0, const unsigned char* w1, unsigned long long off) {
  return {*reinterpret_cast<const U2*>(w0 + off), *reinterpret_cast<const U2*>(w1 + off)};
}

template <class T, class Out>
TK_DEV void gemm_stream(const GemmStreamArgs& a) {
  __shared__ float part[kGemmStreamWarps][16][kGemmStreamRows + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned col0 = blockIdx.y * 16;  // INVARIANT: col0 < cols (grid y is the tile count)
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * 2;
  const unsigned k_begin = min_u(a.k, warp * a.slice_k), k_end = min_u(a.k, k_begin + a.slice_k);
  const unsigned steps = (k_end - k_begin) / 16;  // warp-uniform; k and slice_k are multiples of 16
  // Columns past the real ones read the last real column's row: an A row feeds only its own output column, which
  // is not stored. Likewise activation rows past the real ones read the last real row.
  const unsigned char* w = static_cast<const unsigned char*>(a.w);
  const unsigned char* w0 = w + min_u(col0 + g, a.cols - 1) * row_bytes;
  const unsigned char* w1 = w + min_u(col0 + g + 8, a.cols - 1) * row_bytes;
  const unsigned long long first = k_begin * 2ull + 8ull * t;  // this lane's byte offset of the slice's step 0
  // The first weights go out before the kernel ahead has finished (programmatic dependent launch): they are
  // constants. Its outputs (this kernel's rows, the index) only after the wait.
  WeightStep ws[kDepth] = {};
#pragma unroll
  for (unsigned u = 0; u < kDepth; ++u) {
    if (u < steps) ws[u] = load_weight_step(w0, w1, first + 32ull * u);
  }
  wait_prior_grids();
  const unsigned here = min_u(real_rows(a.n, a.kind), min_u(a.rows, kGemmStreamRows));
  const unsigned groups = (here + 7) / 8;
  const unsigned char* x = static_cast<const unsigned char*>(a.a);
  const unsigned char* x0 = x + min_u(g, here - 1) * row_bytes;      // here > 0 wherever they are read
  const unsigned char* x1 = x + min_u(g + 8, here - 1) * row_bytes;
  U2 xs[kRowDepth][2] = {};
  float acc[4][4] = {};
  if (here > 0) {  // block-uniform
#pragma unroll
    for (unsigned u = 0; u < kRowDepth; ++u) {
      if (u < steps) {
        xs[u][0] = *reinterpret_cast<const U2*>(x0 + first + 32ull * u);
        if (groups > 1) xs[u][1] = *reinterpret_cast<const U2*>(x1 + first + 32ull * u);
      }
    }
    for (unsigned base = 0; base < steps; base += kDepth) {
#pragma unroll
      for (unsigned u = 0; u < kDepth; ++u) {
        const unsigned s = base + u;
        if (s >= steps) break;  // warp-uniform
        const unsigned r = u % kRowDepth;
        const unsigned af[4] = {ws[u].lo.x, ws[u].hi.x, ws[u].lo.y, ws[u].hi.y};
        const unsigned b0[2] = {xs[r][0].x, xs[r][0].y};
        mma_16816_t(acc[0], af, b0, T{});
        if (groups > 1) {  // block-uniform
          const unsigned b1[2] = {xs[r][1].x, xs[r][1].y};
          mma_16816_t(acc[1], af, b1, T{});
        }
        // The slots just read are refilled with the steps kDepth and kRowDepth ahead.
        if (s + kDepth < steps) ws[u] = load_weight_step(w0, w1, first + 32ull * (s + kDepth));
        if (s + kRowDepth < steps) {
          xs[r][0] = *reinterpret_cast<const U2*>(x0 + first + 32ull * (s + kRowDepth));
          if (groups > 1) xs[r][1] = *reinterpret_cast<const U2*>(x1 + first + 32ull * (s + kRowDepth));
        }
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

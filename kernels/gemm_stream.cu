// The streaming GEMM (args.cuh GemmStreamArgs; PERF_NOTES "cuBLASLt's bits from a kernel of our own"): a decode
// step's GEMM at 1..16 rows streams each weight once and is bound by HBM, not by arithmetic. cuBLASLt runs one
// CTA per 128-column tile there (32 CTAs for n = 4,096 on 132 SMs), so it streams well below the copy rate.
// Here a block is one tile of a few columns, a warp per K slice; each output is one chain of mma.sync m16n8k16 steps
// over K in natural order from a zero accumulator, the slices added in slice order and then the prior output,
// as cuBLASLt's split-K with its reduction in the compute type computes it. Whether the bits are the same is the
// hardware's to say: lowering runs both on a probe and takes this kernel only where they are (gemm_impl.h), and
// with timing on only where it is also faster.
//
// Seventh form (PERF_NOTES "The streaming GEMM, seventh form"): the operands swap. The activations are the mma's
// A (16 rows) and a block's tile is 8 columns, the weights' rows its B, so a step costs a lane one 8-byte load of
// one weight row, one shared-memory read of its activation row (two at more than 8 rows) and one mma for all 16
// rows; twice the warps of the sixth form for a shape and a third of its registers in the ring. A product's bits do
// not depend on which operand is A. The sixth form's lessons stay: every load unconditional (at the slice's end the
// address is clamped to its last step, read again and never used), steady rounds addressed by constants from a
// moving pointer, no shuffle; lane t holds k 4t..4t+3 of a step in both operands (the third form's permutation
// within the step, which the H100 and H200 showed gives the same bits). Each warp stages its slice of the bucket's
// rows in shared memory once, before its chain.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kDepth = kGemmStreamDepth;  // weight steps in flight per lane

template <class T, class Out>
TK_DEV void gemm_stream(const GemmStreamArgs& a) {
  __shared__ float part[kGemmStreamWarps][kGemmStreamCols][kGemmStreamRows + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned col0 = blockIdx.y * kGemmStreamCols;  // INVARIANT: col0 < cols (grid y is the tile count)
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * 2;
  const unsigned k_begin = min_u(a.k, warp * a.slice_k), k_end = min_u(a.k, k_begin + a.slice_k);
  const unsigned steps = (k_end - k_begin) / 16;  // warp-uniform; k and slice_k are multiples of 16
  const unsigned last = steps > 0 ? steps - 1 : 0;
  // Columns past the real ones read the last real column's row: a weight row feeds only its own output column,
  // which is not stored. Likewise activation rows past the real ones read the last real row.
  const unsigned char* w =
      static_cast<const unsigned char*>(a.w) + min_u(col0 + g, a.cols - 1) * row_bytes + k_begin * 2ull + 8ull * t;
  auto load_step = [&](const unsigned char* p) { return *reinterpret_cast<const U2*>(p); };
  // The first weights go out before the kernel ahead has finished (programmatic dependent launch): they are
  // constants. Its outputs (this kernel's rows, the index) only after the wait.
  U2 ws[kDepth];
  if (steps > 0) {  // warp-uniform: a slice past k has none
#pragma unroll
    for (unsigned u = 0; u < kDepth; ++u) ws[u] = load_step(w + 32ull * min_u(u, last));
  }
  wait_prior_grids();
  allow_dependents();
  const unsigned here = min_u(real_rows(a.n, a.kind), min_u(a.rows, kGemmStreamRows));
  // The warp's slice of the real rows into its part of shared memory (rows kGemmStreamRowPad bytes longer than the
  // slice), in 16-byte copies, once.
  const unsigned stride = a.slice_k * 2 + kGemmStreamRowPad;
  unsigned char* xs = dynamic_smem() + warp * a.rows * stride;
  const unsigned chunks = steps * 2;  // 16-byte pieces of a row's slice
  const unsigned char* x = static_cast<const unsigned char*>(a.a) + k_begin * 2ull;
  for (unsigned c = lane; c < here * chunks; c += 32) {
    const unsigned r = c / chunks, piece = c % chunks;
    cp_async16(xs + r * stride + piece * 16, x + r * row_bytes + piece * 16ull, true);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncwarp();
  const bool upper = here > 8;  // block-uniform: rows 8..15 are real
  const unsigned char* x0 = xs + min_u(g, here - 1) * stride + 8 * t;  // here > 0 wherever they are read
  const unsigned char* x8 = xs + min_u(g + 8, here - 1) * stride + 8 * t;
  float acc[4] = {};
  auto step = [&](const U2& v, unsigned s) {
    const U2 r0 = *reinterpret_cast<const U2*>(x0 + 32u * s);
    const U2 r8 = upper ? *reinterpret_cast<const U2*>(x8 + 32u * s) : r0;
    const unsigned af[4] = {r0.x, r8.x, r0.y, r8.y};
    const unsigned b[2] = {v.x, v.y};
    mma_16816_t(acc, af, b, T{});
  };
  if (here > 0) {  // block-uniform
    unsigned base = 0;
    // Steady rounds: every refill (step s + kDepth) is a real step, addressed by a constant from the round's pointer.
    const unsigned char* p = w + 32ull * kDepth;
    for (; base + 2 * kDepth <= steps; base += kDepth, p += 32ull * kDepth) {
#pragma unroll
      for (unsigned u = 0; u < kDepth; ++u) {
        step(ws[u], base + u);
        ws[u] = load_step(p + 32ull * u);
      }
    }
    // The last rounds: refills past the slice read its last step again (never used).
    for (; base < steps; base += kDepth) {
#pragma unroll
      for (unsigned u = 0; u < kDepth; ++u) {
        const unsigned s = base + u;
        if (s >= steps) break;  // warp-uniform
        step(ws[u], s);
        ws[u] = load_step(w + 32ull * min_u(s + kDepth, last));
      }
    }
  }
  // The slices' sums in slice order, then the prior output (store_gemm_output). acc holds rows g, g + 8 and
  // columns 2t, 2t + 1 of the tile.
#pragma unroll
  for (unsigned e = 0; e < 4; ++e) part[warp][2 * t + (e & 1u)][g + (e >= 2 ? 8u : 0u)] = acc[e];
  __syncthreads();
  for (unsigned o = threadIdx.x; o < here * kGemmStreamCols; o += blockDim.x) {
    const unsigned r = o / kGemmStreamCols, c = o % kGemmStreamCols, col = col0 + c;
    if (col >= a.cols) continue;
    float v = part[0][c][r];
    for (unsigned s = 1; s < a.splits; ++s) v += part[s][c][r];
    store_gemm_output<Out>(a.out, a.cols, r, col, v, nullptr, a.accumulate);
  }
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

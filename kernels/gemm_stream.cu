// The streaming GEMM (args.cuh GemmStreamArgs; PERF_NOTES "cuBLASLt's bits from a kernel of our own"): a decode
// step's GEMM at 1..16 rows streams each weight once and is bound by HBM, not by arithmetic. cuBLASLt runs one
// CTA per 128-column tile there (32 CTAs for n = 4,096 on 132 SMs), so it streams well below the copy rate.
// Here a block is one 16-column tile, a warp per K slice; each output is one chain of mma.sync m16n8k16 steps
// over K in natural order from a zero accumulator, the slices added in slice order and then the prior output,
// as cuBLASLt's split-K with its reduction in the compute type computes it. Whether the bits are the same is the
// hardware's to say: lowering runs both on a probe and takes this kernel only where they are (gemm_impl.h), and
// with timing on only where it is also faster.
//
// Sixth form (PERF_NOTES "The streaming GEMM, sixth form"): Nsight Compute on the fifth form found a warp issuing
// ~40 instructions a step at ~8 cycles each, its stalls on register moves that waited for loads: a load under a
// condition (a ring slot refilled only while steps remain, a lane's half of a pair) merges with the old value, and
// the merge waits for the load. So every load here is unconditional (at the slice's end the address is clamped to
// its last step, whose bytes are read again and never used), the steady rounds address by constants from a moving
// pointer, and there is no shuffle: lane t loads 8 bytes, k 4t..4t+3 of its rows g and g + 8 for each step (the
// third form's permutation within the step, which the H100 and H200 showed gives the same bits). Each warp stages
// its slice of the bucket's rows in shared memory once (the fifth form's), in the same permutation.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kDepth = kGemmStreamDepth;  // weight steps in flight per lane

// One k16 step of the tile's rows g and g + 8 for this lane: k 4t..4t+3 of each.
struct WeightStep {
  U2 g0, g8;
};

TK_DEV WeightStep load_step(const unsigned char* w0, const unsigned char* w8, unsigned long long off) {
  return {*reinterpret_cast<const U2*>(w0 + off), *reinterpret_cast<const U2*>(w8 + off)};
}

template <class T, class Out>
TK_DEV void gemm_stream(const GemmStreamArgs& a) {
  __shared__ float part[kGemmStreamWarps][16][kGemmStreamRows + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned col0 = blockIdx.y * 16;  // INVARIANT: col0 < cols (grid y is the tile count)
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * 2;
  const unsigned k_begin = min_u(a.k, warp * a.slice_k), k_end = min_u(a.k, k_begin + a.slice_k);
  const unsigned steps = (k_end - k_begin) / 16;  // warp-uniform; k and slice_k are multiples of 16
  const unsigned last = steps > 0 ? steps - 1 : 0;
  // Columns past the real ones read the last real column's row: an A row feeds only its own output column, which
  // is not stored. Likewise activation rows past the real ones read the last real row.
  const unsigned char* w = static_cast<const unsigned char*>(a.w) + k_begin * 2ull + 8ull * t;
  const unsigned char* w0 = w + min_u(col0 + g, a.cols - 1) * row_bytes;
  const unsigned char* w8 = w + min_u(col0 + g + 8, a.cols - 1) * row_bytes;
  // The first weights go out before the kernel ahead has finished (programmatic dependent launch): they are
  // constants. Its outputs (this kernel's rows, the index) only after the wait.
  WeightStep ws[kDepth];
  if (steps > 0) {  // warp-uniform: a slice past k has none
#pragma unroll
    for (unsigned u = 0; u < kDepth; ++u) ws[u] = load_step(w0, w8, 32ull * min_u(u, last));
  }
  wait_prior_grids();
  const unsigned here = min_u(real_rows(a.n, a.kind), min_u(a.rows, kGemmStreamRows));
  const unsigned groups = (here + 7) / 8;
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
  const unsigned char* x0 = xs + min_u(g, here - 1) * stride + 8 * t;  // here > 0 wherever they are read
  const unsigned char* x8 = xs + min_u(g + 8, here - 1) * stride + 8 * t;
  float acc[4][4] = {};
  auto step = [&](const WeightStep& v, unsigned s) {
    const unsigned af[4] = {v.g0.x, v.g8.x, v.g0.y, v.g8.y};
    const U2 r0 = *reinterpret_cast<const U2*>(x0 + 32u * s);
    const unsigned b0[2] = {r0.x, r0.y};
    mma_16816_t(acc[0], af, b0, T{});
    if (groups > 1) {  // block-uniform
      const U2 r8 = *reinterpret_cast<const U2*>(x8 + 32u * s);
      const unsigned b1[2] = {r8.x, r8.y};
      mma_16816_t(acc[1], af, b1, T{});
    }
  };
  if (here > 0) {  // block-uniform
    unsigned base = 0;
    // Steady rounds: every refill (step s + kDepth) is a real step, addressed by a constant from the round's pointer.
    const unsigned char* p0 = w0 + 32ull * kDepth;
    const unsigned char* p8 = w8 + 32ull * kDepth;
    for (; base + 2 * kDepth <= steps; base += kDepth, p0 += 32ull * kDepth, p8 += 32ull * kDepth) {
#pragma unroll
      for (unsigned u = 0; u < kDepth; ++u) {
        step(ws[u], base + u);
        ws[u] = load_step(p0, p8, 32ull * u);
      }
    }
    // The last rounds: refills past the slice read its last step again (never used).
    for (; base < steps; base += kDepth) {
#pragma unroll
      for (unsigned u = 0; u < kDepth; ++u) {
        const unsigned s = base + u;
        if (s >= steps) break;  // warp-uniform
        step(ws[u], s);
        ws[u] = load_step(w0, w8, 32ull * min_u(s + kDepth, last));
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

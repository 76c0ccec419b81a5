// Packed varlen attention on CUDA cores (scorer.md §2-3) for FP32 plans: heads of 64, RoPE fused on
// load when tables are given, windows |i − j| <= w, online softmax over keys from a start fixed by the
// block's anchored tile, so a row's arithmetic never depends on the rest of the batch.
#include "prelude.cuh"

using namespace tandem::kernels;

// Grid (4 · tiles, heads), 256 threads: a block takes 16 query rows of one 64-row tile (8 warps × 2
// rows) and walks its key range 32 keys at a time through shared memory.
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kSubRows = 16;  // query rows per block
constexpr unsigned kKeyStep = 32;  // keys per shared-memory step, one per lane
constexpr unsigned kKeyPad = 68;   // floats per key row: 16-byte reads without bank conflicts

template <class In, class Out>
__device__ __forceinline__ void attention(const AttentionArgs& a) {
  alignas(16) __shared__ float qs[kSubRows][kHeadDim];
  alignas(16) __shared__ float ks[kKeyStep][kKeyPad];
  alignas(16) __shared__ float vs[kKeyStep][kHeadDim];

  const unsigned head = blockIdx.y;
  AttentionBlock blk;
  // Block-uniform exit, before any barrier: 4 blocks share a tile, 16 rows each.
  if (!attention_block(a, blockIdx.x >> 2, head, (blockIdx.x & 3) * kSubRows, kSubRows, blk)) return;
  const unsigned lo = blk.lo, hi = blk.hi, q0 = blk.q0, q1 = blk.q1;

  // Loops of a fixed trip count, unrolled, so every thread's loads are in flight at once.
#pragma unroll
  for (unsigned it = 0; it < kSubRows * 32 / kThreads; ++it) {
    const unsigned i = it * kThreads + threadIdx.x, r = i >> 5, j = i & 31;
    load_query<In>(a, blk, q0 + r, j, qs[r][j], qs[r][j + 32]);
  }

  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned r0 = warp * 2;
  bool live[2];
  unsigned w_lo[2], w_hi[2];
  float m[2], l[2], acc[2][2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const unsigned row = q0 + r0 + rr;
    live[rr] = row < q1;
    key_range(row, lo, hi, a.window, w_lo[rr], w_hi[rr]);
    m[rr] = neg_inf();
    l[rr] = 0.0f;
    acc[rr][0] = acc[rr][1] = 0.0f;
  }

  for (unsigned kb = blk.k_begin; kb < blk.k_end; kb += kKeyStep) {
    __syncthreads();  // the previous step's keys are consumed (and q is visible)
#pragma unroll
    for (unsigned it = 0; it < kKeyStep * 32 / kThreads; ++it) {
      const unsigned i = it * kThreads + threadIdx.x, r = i >> 5, j = i & 31;
      float k[2], v[2];
      load_key_value<In>(a, blk, kb + r, j, k, v);
      ks[r][j] = k[0];
      ks[r][j + 32] = k[1];
      vs[r][j] = v[0];
      vs[r][j + 32] = v[1];
    }
    __syncthreads();

    const V4* kr = reinterpret_cast<const V4*>(ks[lane]);
    const V4* qa = reinterpret_cast<const V4*>(qs[r0]);
    const V4* qb = reinterpret_cast<const V4*>(qs[r0 + 1]);
    float dot[2] = {0.0f, 0.0f};
#pragma unroll
    for (unsigned c = 0; c < kHeadDim / 4; ++c) {
      const V4 k = kr[c], x = qa[c], y = qb[c];
      dot[0] += x.x * k.x + x.y * k.y + x.z * k.z + x.w * k.w;
      dot[1] += y.x * k.x + y.y * k.y + y.z * k.z + y.w * k.w;
    }
    const unsigned key = kb + lane;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const bool visible = live[rr] && key >= w_lo[rr] && key < w_hi[rr];
      const float score = visible ? dot[rr] : neg_inf();
      const float mx = warp_max(score);
      if (mx == neg_inf()) continue;  // nothing visible in this step: the row's state stays (warp-uniform)
      const float mn = fmaxf(m[rr], mx);
      const float corr = fast_exp(m[rr] - mn);
      const float p = fast_exp(score - mn);
      l[rr] = l[rr] * corr + warp_sum(p);
      float a0 = acc[rr][0] * corr, a1 = acc[rr][1] * corr;
      for (int j = 0; j < static_cast<int>(kKeyStep); ++j) {
        const float pj = shfl(p, j);
        const V2 v = reinterpret_cast<const V2*>(vs[j])[lane];
        a0 += pj * v.x;
        a1 += pj * v.y;
      }
      acc[rr][0] = a0;
      acc[rr][1] = a1;
      m[rr] = mn;
    }
  }

  const unsigned width = a.heads * kHeadDim;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (!live[rr]) continue;  // INVARIANT: live rows are real tokens, so inside out's bucket rows
    const unsigned row = q0 + r0 + rr;
    Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * width + head * kHeadDim + 2 * lane;
    const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;  // an empty key set gives 0
    store(y, acc[rr][0] * inv);
    store(y + 1, acc[rr][1] * inv);
  }
}

}  // namespace

// At least 2 blocks per multiprocessor: the unrolled loads keep ~125 registers a thread (left to
// itself, ptxas squeezes them to 48 and spills for sm_80).
extern "C" __global__ void __launch_bounds__(kThreads, 2) attention_f32_f32(AttentionArgs a) {
  enter_grid();
  attention<float, float>(a);
}
extern "C" __global__ void __launch_bounds__(kThreads, 2) attention_f32_f16(AttentionArgs a) {
  enter_grid();
  attention<float, half_t>(a);
}
extern "C" __global__ void __launch_bounds__(kThreads, 2) attention_f16_f32(AttentionArgs a) {
  enter_grid();
  attention<half_t, float>(a);
}
extern "C" __global__ void __launch_bounds__(kThreads, 2) attention_f16_f16(AttentionArgs a) {
  enter_grid();
  attention<half_t, half_t>(a);
}

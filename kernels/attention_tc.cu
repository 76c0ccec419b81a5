// Packed varlen attention on tensor cores (scorer.md §3) for FP16 plans, whose qkv stays FP32: q, k,
// v and p are split into f16 hi + lo parts and every product is hi·hi + hi·lo + lo·hi through mma.sync
// m16n8k16 with f32 accumulators (about 22 bits, at 3× the MMA work).
#include "prelude.cuh"

using namespace tandem::kernels;

// Grid (tiles, heads), 4 warps: a block takes one anchored 64-row tile (16 rows per warp) and walks its
// key range 64 keys at a time from a start fixed by the tile, so results do not depend on the batch.
namespace {

constexpr unsigned kKeyStep = 64;
constexpr unsigned kStride = 72;  // halves per shared row: fragment reads hit 32 distinct banks

struct Split {
  unsigned short hi, lo;
};

__device__ __forceinline__ Split split(float x) {
  const unsigned short h = f2h(x);
  return {h, f2h(x - h2f(h))};
}

// INVARIANT: p is an even column of a shared row, so the pair is 4-byte aligned.
__device__ __forceinline__ unsigned ld32(const unsigned short* p) { return *reinterpret_cast<const unsigned*>(p); }

// The f16 pair of a split value, into a [row][col] shared array.
__device__ __forceinline__ void put(unsigned short (*hi)[kStride], unsigned short (*lo)[kStride], unsigned r,
                                   unsigned c, float x) {
  const Split s = split(x);
  hi[r][c] = s.hi;
  lo[r][c] = s.lo;
}

template <class Out>
__device__ __forceinline__ void attention_tc(const AttentionArgs& a) {
  // k holds q while its fragments are taken; v is stored transposed ([dim][key]) so that the B
  // fragments of P·V are two consecutive halves.
  alignas(16) __shared__ unsigned short k_hi[kKeyStep][kStride];
  alignas(16) __shared__ unsigned short k_lo[kKeyStep][kStride];
  alignas(16) __shared__ unsigned short v_hi[kHeadDim][kStride];
  alignas(16) __shared__ unsigned short v_lo[kHeadDim][kStride];

  const unsigned head = blockIdx.y;
  AttentionBlock blk;
  if (!attention_block(a, blockIdx.x, head, 0, kTileRows, blk)) return;  // block-uniform, before any barrier
  const unsigned t0 = blk.q0, lo = blk.lo, hi = blk.hi, q1 = blk.q1;

  for (unsigned i = threadIdx.x; i < kTileRows * 32; i += blockDim.x) {
    const unsigned r = i >> 5, j = i & 31;
    float x0, x1;
    load_query<float>(a, blk, t0 + r, j, x0, x1);
    put(k_hi, k_lo, r, j, x0);
    put(k_hi, k_lo, r, j + 32, x1);
  }
  __syncthreads();

  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned g = lane >> 2, t = lane & 3;  // fragment group (row) and thread in group (column pair)
  const unsigned qr = warp * 16;
  unsigned qh[4][4], ql[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const unsigned c = kk * 16 + 2 * t;
    qh[kk][0] = ld32(&k_hi[qr + g][c]);
    qh[kk][1] = ld32(&k_hi[qr + g + 8][c]);
    qh[kk][2] = ld32(&k_hi[qr + g][c + 8]);
    qh[kk][3] = ld32(&k_hi[qr + g + 8][c + 8]);
    ql[kk][0] = ld32(&k_lo[qr + g][c]);
    ql[kk][1] = ld32(&k_lo[qr + g + 8][c]);
    ql[kk][2] = ld32(&k_lo[qr + g][c + 8]);
    ql[kk][3] = ld32(&k_lo[qr + g + 8][c + 8]);
  }

  // This thread's two rows: g and g + 8 of the warp's 16 (accumulator elements 0-1 and 2-3); rows past
  // q1 see no keys.
  bool live[2];
  unsigned w_lo[2], w_hi[2];
  float m[2], l[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const unsigned row = t0 + qr + g + 8u * rr;
    live[rr] = row < q1;
    key_range(row, lo, hi, a.window, w_lo[rr], w_hi[rr]);
    if (!live[rr]) w_lo[rr] = w_hi[rr] = 0;
    m[rr] = neg_inf();
    l[rr] = 0.0f;
  }
  float o[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

  for (unsigned kb = blk.k_begin; kb < blk.k_end; kb += kKeyStep) {
    __syncthreads();  // q fragments taken / the previous step's keys consumed
    for (unsigned i = threadIdx.x; i < kKeyStep * 32; i += blockDim.x) {
      const unsigned r = i >> 5, j = i & 31;
      float k[2], v[2];
      load_key_value<float>(a, blk, kb + r, j, k, v);
      put(k_hi, k_lo, r, j, k[0]);
      put(k_hi, k_lo, r, j + 32, k[1]);
      put(v_hi, v_lo, j, r, v[0]);
      put(v_hi, v_lo, j + 32, r, v[1]);
    }
    __syncthreads();

    // S = q · kᵀ for 16 rows × 64 keys: 8 key tiles of 8, 4 steps of 16 dims.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const unsigned c = kk * 16 + 2 * t;
        const unsigned bh[2] = {ld32(&k_hi[nt * 8 + g][c]), ld32(&k_hi[nt * 8 + g][c + 8])};
        const unsigned bl[2] = {ld32(&k_lo[nt * 8 + g][c]), ld32(&k_lo[nt * 8 + g][c + 8])};
        mma_16816(s[nt], qh[kk], bh);
        mma_16816(s[nt], qh[kk], bl);
        mma_16816(s[nt], ql[kk], bh);
      }
    }

    // Mask, then the online softmax of each row (P·V below splits p, so p is not rounded here).
    online_softmax_step<false>(s, o, m, l, kb, t, w_lo, w_hi);

    // o += P · v: the score accumulators of key tiles 2kk and 2kk + 1 are exactly the A fragment of
    // key step kk, so P never leaves registers.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      Split p[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = split(s[2 * kk][e]);
        p[4 + e] = split(s[2 * kk + 1][e]);
      }
      const unsigned ah[4] = {pack_h2(p[0].hi, p[1].hi), pack_h2(p[2].hi, p[3].hi), pack_h2(p[4].hi, p[5].hi),
                              pack_h2(p[6].hi, p[7].hi)};
      const unsigned al[4] = {pack_h2(p[0].lo, p[1].lo), pack_h2(p[2].lo, p[3].lo), pack_h2(p[4].lo, p[5].lo),
                              pack_h2(p[6].lo, p[7].lo)};
      const unsigned c = kk * 16 + 2 * t;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const unsigned bh[2] = {ld32(&v_hi[nt * 8 + g][c]), ld32(&v_hi[nt * 8 + g][c + 8])};
        const unsigned bl[2] = {ld32(&v_lo[nt * 8 + g][c]), ld32(&v_lo[nt * 8 + g][c + 8])};
        mma_16816(o[nt], ah, bh);
        mma_16816(o[nt], ah, bl);
        mma_16816(o[nt], al, bh);
      }
    }
  }

  const unsigned width = a.heads * kHeadDim;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (!live[rr]) continue;  // INVARIANT: live rows are real tokens, so inside out's bucket rows
    const unsigned row = t0 + qr + g + 8u * rr;
    Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * width + head * kHeadDim;
    const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;  // an empty key set gives 0
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      store(y + nt * 8 + 2 * t, o[nt][2 * rr] * inv);
      store(y + nt * 8 + 2 * t + 1, o[nt][2 * rr + 1] * inv);
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) attention_tc_f32_f32(AttentionArgs a) {
  enter_grid();
  attention_tc<float>(a);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_f32_f16(AttentionArgs a) {
  enter_grid();
  attention_tc<half_t>(a);
}

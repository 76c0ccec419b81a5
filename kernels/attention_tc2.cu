// Packed varlen attention on tensor cores, FlashAttention-2 style (scorer.md §3), for FP16 plans whose
// qkv stays FP32. Scores keep about 22 bits: q and k are split into f16 hi + lo and S = qh·kh + qh·kl +
// ql·kh (mma.sync m16n8k16, f32 accumulators). RoPE is applied as q and k are loaded.
#include "prelude.cuh"

using namespace tandem::kernels;

// P·V: with kSplitPV, p and v are split too (three products, kime's precision, for FP32 outputs and
// the tc2split entry); without it P·V is ph·vh alone, p rounded to f16 in the row sum as well (so the
// output stays a weighted mean of the values): the values' 2^-11 rounding is then the added error, as
// large as the FP16 output's own, for a third of the MMAs and half the value traffic.
//
// A block of 4 warps takes one anchored 64-row tile of one head (16 query rows per warp; grid (heads,
// tiles), tiles striding over the grid when there are more than blocks) and walks the tile's key range
// 64 keys at a time from a start fixed by the tile, so a row's result never depends on the batch. Key
// and value rows, and the keys' cos/sin rows, reach shared memory through cp.async (two stages, where
// the next step loads while this one computes, or one, which lets more blocks share a multiprocessor;
// see the entries at the end), where each thread rewrites one row in place as RoPE'd f16
// hi and lo halves; ldmatrix feeds the MMAs. Shared rows are 272 (144) bytes apart, so the 8 rows of an
// ldmatrix or of 8 lanes' 16-byte accesses fall in distinct banks.
namespace {

constexpr unsigned kKeys = 64;                 // keys per step
constexpr unsigned kRowBytes = kTc2RowBytes;   // a staged row: 64 FP32, then 64 f16 hi and 64 lo
constexpr unsigned kLoBytes = 16;              // lo of 8 dimensions follows their hi (convert_row)
constexpr unsigned kTrigBytes = kTc2TrigBytes; // a staged cos or sin row: 32 FP32
constexpr unsigned kValues = kKeys * kRowBytes;                // offsets in a stage: value rows,
constexpr unsigned kCos = 2 * kKeys * kRowBytes;               // cos rows,
constexpr unsigned kSin = kCos + kKeys * kTrigBytes;           // sin rows
constexpr unsigned kStageBytes = kSin + kKeys * kTrigBytes;
static_assert(kStageBytes == kTc2StageBytes, "args.cuh sizes the launch's shared memory");
static_assert(kTc2Threads == 2 * kKeys, "one converting thread per staged row");

// Starts the copies of keys kb .. kb + 63 into `stage` (rows past k_end become zeros): 16 chunks of 16
// bytes per key or value row, consecutive threads on consecutive chunks of a row; with RoPE also the
// keys' cos and sin rows (8 chunks each), which are consecutive rows of the tables.
// INVARIANT: kb < k_end, so every source row read is a real token of the tile's sequence, and its
// position p0 + (key − lo) is below the tables' positions (the bucket's tokens).
__device__ __forceinline__ void load_step(const AttentionArgs& a, const AttentionBlock& t, unsigned kb,
                                          unsigned char* stage) {
  const float* qkv = static_cast<const float*>(a.qkv);
#pragma unroll
  for (unsigned i = 0; i < 2 * kKeys * 16 / kTc2Threads; ++i) {
    const unsigned c = i * kTc2Threads + threadIdx.x;
    const unsigned row = c >> 4, chunk = c & 15u;
    const unsigned key = kb + (row & (kKeys - 1));
    const bool real = key < t.k_end;
    const unsigned col = (row < kKeys ? t.k_col : t.v_col) + chunk * 4;
    cp_async16(stage + row * kRowBytes + chunk * 16,
               qkv + static_cast<unsigned long long>(real ? key : kb) * t.ld + col, real);
  }
  if (a.cos != nullptr) {
    const unsigned long long p = t.position(kb);  // the step's first key's
#pragma unroll
    for (unsigned i = 0; i < 2 * kKeys * 8 / kTc2Threads; ++i) {
      const unsigned c = i * kTc2Threads + threadIdx.x;
      const unsigned row = (c >> 3) & (kKeys - 1), chunk = c & 7u;
      const bool sin = c >= kKeys * 8;
      const bool real = kb + row < t.k_end;
      const float* table = sin ? a.sin : a.cos;
      cp_async16(stage + (sin ? kSin : kCos) + row * kTrigBytes + chunk * 16,
                 table + (p + (real ? row : 0)) * 32u + chunk * 4, real);
    }
  }
  cp_async_commit();
}

// This thread's staged row (threads 0-63: keys, 64-127: values), RoPE'd when it is a key and tables
// are given, rewritten in place as f16: the 16 bytes at 32·c hold hi of dimensions 8c .. 8c + 7 and the
// 16 bytes after them lo (value rows without kSplitPV: hi only). Dimensions 8q .. 8q + 7 and their RoPE
// partners 8q + 32 .. 8q + 39 come from exactly the 64 bytes their halves replace, so each step only
// touches bytes it has read. Rows past k_end are zeros and stay zeros.
template <bool kSplitPV>
__device__ __forceinline__ void convert_row(bool rope, unsigned char* stage) {
  const bool key_row = threadIdx.x < kKeys;
  U4* r = reinterpret_cast<U4*>(stage + threadIdx.x * kRowBytes);
  const V4* cs = reinterpret_cast<const V4*>(stage + kCos + threadIdx.x * kTrigBytes);
  const V4* sn = reinterpret_cast<const V4*>(stage + kSin + threadIdx.x * kTrigBytes);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const U4 u[4] = {r[2 * q], r[2 * q + 1], r[2 * q + 8], r[2 * q + 9]};
    float x[8], y[8];  // dimensions 8q + e and 8q + 32 + e
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      x[4 * h] = bits_float(u[h].x);
      x[4 * h + 1] = bits_float(u[h].y);
      x[4 * h + 2] = bits_float(u[h].z);
      x[4 * h + 3] = bits_float(u[h].w);
      y[4 * h] = bits_float(u[2 + h].x);
      y[4 * h + 1] = bits_float(u[2 + h].y);
      y[4 * h + 2] = bits_float(u[2 + h].z);
      y[4 * h + 3] = bits_float(u[2 + h].w);
    }
    if (rope && key_row) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const V4 c = cs[2 * q + h], s = sn[2 * q + h];
        rotate_pair(x[4 * h], y[4 * h], c.x, s.x);
        rotate_pair(x[4 * h + 1], y[4 * h + 1], c.y, s.y);
        rotate_pair(x[4 * h + 2], y[4 * h + 2], c.z, s.z);
        rotate_pair(x[4 * h + 3], y[4 * h + 3], c.w, s.w);
      }
    }
    if (kSplitPV || key_row) {
      SplitPair sx[4], sy[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sx[e] = split_pair(x[2 * e], x[2 * e + 1]);
        sy[e] = split_pair(y[2 * e], y[2 * e + 1]);
      }
      r[2 * q] = U4{sx[0].hi, sx[1].hi, sx[2].hi, sx[3].hi};
      r[2 * q + 1] = U4{sx[0].lo, sx[1].lo, sx[2].lo, sx[3].lo};
      r[2 * q + 8] = U4{sy[0].hi, sy[1].hi, sy[2].hi, sy[3].hi};
      r[2 * q + 9] = U4{sy[0].lo, sy[1].lo, sy[2].lo, sy[3].lo};
    } else {
      r[2 * q] = U4{pack_f2h2(x[0], x[1]), pack_f2h2(x[2], x[3]), pack_f2h2(x[4], x[5]), pack_f2h2(x[6], x[7])};
      r[2 * q + 8] = U4{pack_f2h2(y[0], y[1]), pack_f2h2(y[2], y[3]), pack_f2h2(y[4], y[5]), pack_f2h2(y[6], y[7])};
    }
  }
}

// The A fragments (hi and lo) of this thread's two query rows: rows g and g + 8 of the warp's 16, RoPE'd
// and scaled, zeros past q1. x[2c + e] holds column 8c + 2t + e, so column j's RoPE partner j + 32 is
// x index + 8 and both are this thread's.
__device__ __forceinline__ void load_query_fragments(const AttentionArgs& a, const AttentionBlock& t, unsigned row0,
                                                     unsigned (&qh)[4][4], unsigned (&ql)[4][4]) {
  const unsigned tq = threadIdx.x & 3u;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const unsigned row = row0 + 8u * rr;
    float x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = 0.0f;
    if (row < t.q1) {
      // INVARIANT: row is a real token of the tile's sequence; the 8-byte loads sit at even columns.
      const float* src =
          static_cast<const float*>(a.qkv) + static_cast<unsigned long long>(row) * t.ld + t.q_col + 2 * tq;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const V2 v = *reinterpret_cast<const V2*>(src + 8 * c);
        x[2 * c] = v.x;
        x[2 * c + 1] = v.y;
      }
      if (a.cos != nullptr) {
        const unsigned long long p = t.position(row);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const V2 cs = *reinterpret_cast<const V2*>(a.cos + p * 32u + 8 * c + 2 * tq);
          const V2 sn = *reinterpret_cast<const V2*>(a.sin + p * 32u + 8 * c + 2 * tq);
          rotate_pair(x[2 * c], x[2 * c + 8], cs.x, sn.x);
          rotate_pair(x[2 * c + 1], x[2 * c + 9], cs.y, sn.y);
        }
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) x[i] *= a.scale;
    }
    // Fragment kk covers columns 16kk .. 16kk + 15: pairs c = 2kk (a0/a1) and c = 2kk + 1 (a2/a3).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const SplitPair s0 = split_pair(x[4 * kk], x[4 * kk + 1]), s1 = split_pair(x[4 * kk + 2], x[4 * kk + 3]);
      qh[kk][rr] = s0.hi;
      ql[kk][rr] = s0.lo;
      qh[kk][2 + rr] = s1.hi;
      ql[kk][2 + rr] = s1.lo;
    }
  }
}

// acc += hi·hi + hi·lo + lo·hi.
__device__ __forceinline__ void mma3(float (&acc)[4], const unsigned (&ah)[4], const unsigned (&al)[4],
                                     const unsigned (&bh)[2], const unsigned (&bl)[2]) {
  mma_16816(acc, ah, bh);
  mma_16816(acc, ah, bl);
  mma_16816(acc, al, bh);
}

// kStages 2: the next step's rows load while this one computes; 1: they load after it, in half the shared
// memory, so that more blocks fit a multiprocessor and hide each other's latency instead.
template <class Out, bool kSplitPV, unsigned kStages = 2>
__device__ __forceinline__ void attention_tc2(const AttentionArgs& a) {
  static_assert(kStages == 1 || kStages == 2, "one or two stages");
  unsigned char* smem = dynamic_smem();
  const unsigned head = blockIdx.x;  // heads fastest: the blocks with tiles come first in launch order
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
  const unsigned g = lane >> 2, tq = lane & 3u;       // fragment row group and column pair
  const unsigned mi = lane >> 3, mr = lane & 7u;      // ldmatrix: which matrix's row this lane gives
  const unsigned tiles = a.n[kHeaderTiles];

  for (unsigned tile = blockIdx.y; tile < tiles; tile += gridDim.y) {  // block-uniform
    AttentionBlock t{};
    (void)attention_block(a, tile, head, 0, kTileRows, t);  // true: tile < tiles, and its first row is real
    const unsigned steps = (t.k_end - t.k_begin + kKeys - 1) / kKeys;
    __syncthreads();  // the previous tile's last step is consumed before stage 0 refills
    load_step(a, t, t.k_begin, smem);

    unsigned qh[4][4], ql[4][4];
    const unsigned row0 = t.q0 + warp * 16 + g;
    load_query_fragments(a, t, row0, qh, ql);

    unsigned w_lo[2], w_hi[2];  // each row's visible keys; none for rows past q1
    float m[2], l[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const unsigned row = row0 + 8u * rr;
      key_range(row, t.lo, t.hi, a.window, w_lo[rr], w_hi[rr]);
      if (row >= t.q1) w_lo[rr] = w_hi[rr] = 0;
      m[rr] = neg_inf();
      l[rr] = 0.0f;
    }
    float o[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

    for (unsigned step = 0; step < steps; ++step) {
      const unsigned kb = t.k_begin + step * kKeys;
      unsigned char* stage = smem + (kStages == 2 ? (step & 1u) * kStageBytes : 0u);
      cp_async_wait<0>();
      __syncthreads();  // this step's rows have landed for every thread; the other stage is consumed
      if (kStages == 2 && step + 1 < steps) load_step(a, t, kb + kKeys, smem + ((step + 1) & 1u) * kStageBytes);
      convert_row<kSplitPV>(a.cos != nullptr, stage);
      __syncthreads();
      const unsigned char* ks = stage;
      const unsigned char* vs = stage + kValues;

      // S = q · kᵀ for the warp's 16 rows × 64 keys (8 key tiles of 8; 4 steps of 16 dimensions).
      float s[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          // Matrices: keys 16p (+8 for matrices 2, 3) × dimensions 16kk (+8 for matrices 1, 3), whose
          // 8 hi halves sit at 32 bytes per 8 dimensions.
          const unsigned char* at = ks + (16u * p + (mi >> 1) * 8u + mr) * kRowBytes + (2u * kk + (mi & 1u)) * 32u;
          unsigned bh[4], bl[4];
          ldmatrix_x4(bh, at);
          ldmatrix_x4(bl, at + kLoBytes);
          const unsigned bh0[2] = {bh[0], bh[1]}, bl0[2] = {bl[0], bl[1]};
          const unsigned bh1[2] = {bh[2], bh[3]}, bl1[2] = {bl[2], bl[3]};
          mma3(s[2 * p], qh[kk], ql[kk], bh0, bl0);
          mma3(s[2 * p + 1], qh[kk], ql[kk], bh1, bl1);
        }
      }

      // Mask, then the online softmax of each row. Unsplit, P·V weighs the values by p rounded to f16:
      // the row sum takes the same p, so the output is their exactly weighted mean.
      online_softmax_step<!kSplitPV>(s, o, m, l, kb, tq, w_lo, w_hi);

      // o += P · v: the score accumulators of key tiles 2kk and 2kk + 1 are the A fragment of key step
      // kk, so P never leaves registers; v's B fragments come transposed out of its row-major rows.
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const SplitPair p0 = split_pair(s[2 * kk][0], s[2 * kk][1]), p1 = split_pair(s[2 * kk][2], s[2 * kk][3]);
        const SplitPair p2 = split_pair(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        const SplitPair p3 = split_pair(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        const unsigned ah[4] = {p0.hi, p1.hi, p2.hi, p3.hi}, al[4] = {p0.lo, p1.lo, p2.lo, p3.lo};
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          // Matrices: keys 16kk (+8 for matrices 1, 3) × dimensions 16np (+8 for matrices 2, 3).
          const unsigned char* at = vs + (16u * kk + (mi & 1u) * 8u + mr) * kRowBytes + (2u * np + (mi >> 1)) * 32u;
          unsigned bh[4];
          ldmatrix_x4_trans(bh, at);
          const unsigned bh0[2] = {bh[0], bh[1]}, bh1[2] = {bh[2], bh[3]};
          if (kSplitPV) {
            unsigned bl[4];
            ldmatrix_x4_trans(bl, at + kLoBytes);
            const unsigned bl0[2] = {bl[0], bl[1]}, bl1[2] = {bl[2], bl[3]};
            mma3(o[2 * np], ah, al, bh0, bl0);
            mma3(o[2 * np + 1], ah, al, bh1, bl1);
          } else {
            mma_16816(o[2 * np], ah, bh0);
            mma_16816(o[2 * np + 1], ah, bh1);
          }
        }
      }
      if (kStages == 1 && step + 1 < steps) {
        __syncthreads();  // every warp is done with this step's rows
        load_step(a, t, kb + kKeys, smem);
      }
    }

    const unsigned width = a.heads * kHeadDim;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const unsigned row = row0 + 8u * rr;
      if (row >= t.q1) continue;  // INVARIANT: rows below q1 are real tokens, inside out's bucket rows
      Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row) * width + head * kHeadDim + 2 * tq;
      const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;  // an empty key set gives 0
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) store2(y + nt * 8, o[nt][2 * rr] * inv, o[nt][2 * rr + 1] * inv);
    }
  }
}

}  // namespace

// The split-P·V entries: two stages and two blocks per multiprocessor (up to 255 registers a thread;
// split P·V needs more than 168), 2 × 106.5 KB of shared memory.
extern "C" __global__ void __launch_bounds__(kTc2Threads, 2) attention_tc2_f32_f32(AttentionArgs a) {
  enter_grid();
  attention_tc2<float, true>(a);
}
// The FP16 plans' kernel: one stage and 3 blocks per multiprocessor (at most 168 registers a thread, no
// spills), since two blocks leave one warp per scheduler and the steps' dependent chains exposed (Nsight
// Compute: an issue every 4.4 cycles). On the H200 this took W3's attention from 4.61 to 3.56 ms and the
// serving batch's from 3.10 to 2.38 ms (engine/cuda/PERF_NOTES.md, run 5).
extern "C" __global__ void __launch_bounds__(kTc2Threads, 3) attention_tc2_f32_f16(AttentionArgs a) {
  enter_grid();
  attention_tc2<half_t, false, 1>(a);
}
extern "C" __global__ void __launch_bounds__(kTc2Threads, 2) attention_tc2s_f32_f16(AttentionArgs a) {
  enter_grid();
  attention_tc2<half_t, true>(a);
}

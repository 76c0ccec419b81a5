// The quantized GEMM on tensor cores with a block's rows shared by its warps (args.cuh QGemmSharedArgs): packed
// codes (qgemm_layout.h), 16-bit rows, up to kQGemmSharedRows real rows (a draft block). qgemm_tc's warps are
// the K slices of one 16-column tile, so each loads its own copy of its slice's rows: 3.8x the code bytes from
// L2 at 16 rows (PERF_NOTES, issue 14). Here a block's warps are 8 tiles of one slice: the block copies the
// slice's rows into shared memory once, a word (16 / bits chunks) at a time, kStages words ahead (cp.async),
// and every warp reads them from there. Each warp's products and their order are qgemm_tc's (the packed loop
// at 2 fragments), and the slices meet across blocks in slice order, so the bits are qgemm_tc's.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kStages = 4;  // words of rows in flight or in use

template <unsigned kBits, class In, class Out>
TK_DEV void qgemm_shared(const QGemmSharedArgs& args) {
  using T = In;
  static_assert(sizeof(In) == 2);
  constexpr unsigned kPer = 16 / kBits;               // chunks a code word holds: a stage's width
  constexpr unsigned kPieces = kPer * 4;              // 16-byte pieces of one row in a stage (8 elements each)
  // A staged row, padded by 64 bytes: a 16-byte load's 8-lane phase reads two rows (g, g + 1), 4 pieces each, so
  // with rows 64 bytes apart modulo 128 the phase covers all 32 banks once.
  constexpr unsigned kRowBytes = kPieces * 16 + 64;
  constexpr unsigned kCopies = kQGemmSharedRows * kPieces;  // pieces a stage copies: 256 (int4) or 128 (int8)
  static_assert(kCopies <= kQGemmTcWarps * 32);
  alignas(16) __shared__ unsigned char ring[kStages][kQGemmSharedRows * kRowBytes];
  __shared__ unsigned last_block;
  const QGemmArgs& a = args.q;
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // INVARIANT: lowering runs this kernel only for buckets of at most kQGemmSharedRows rows, with qgemm_tc's
  // checks (k, group, alignment) and the slices rounded to whole words.
  const unsigned rows = min_u(real_rows(a.n, a.kind), kQGemmSharedRows);
  const unsigned col0 = (blockIdx.x * kQGemmTcWarps + warp) * 16, slice = blockIdx.y;
  const unsigned chunks = a.k / 32, per_group = a.group / 32, groups = a.k / a.group;
  const unsigned c_begin = min_u(chunks, slice * args.slice_chunks);
  const unsigned c_end = min_u(chunks, c_begin + args.slice_chunks);
  const unsigned words = (c_end - c_begin) / kPer;
  const bool active = col0 < a.cols;  // warp-uniform; every warp copies rows and meets the barriers
  const In* x = static_cast<const In*>(a.x);
  // Thread i copies piece i % kPieces of row i / kPieces of a word (zeros past the real rows).
  const auto stage = [&](unsigned w) {
    if (threadIdx.x < kCopies) {
      const unsigned r = threadIdx.x / kPieces, p = threadIdx.x % kPieces;
      const bool ok = r < rows;
      const In* src = x + static_cast<unsigned long long>(ok ? r : 0u) * a.k + (c_begin + w * kPer) * 32 + p * 8;
      cp_async16(&ring[w % kStages][r * kRowBytes + p * 16], src, ok);
    }
  };
#pragma unroll
  for (unsigned w = 0; w + 1 < kStages; ++w) {
    if (w < words) stage(w);
    cp_async_commit();  // one group a word, empty past the slice: the wait below counts groups
  }

  float acc[2][4] = {};
  const unsigned col_a = min_u(col0 + g, a.cols - 1), col_b = min_u(col0 + g + 8, a.cols - 1);
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * kBits / 8;
  const U4* code_a = reinterpret_cast<const U4*>(static_cast<const unsigned char*>(a.codes) + col_a * row_bytes) +
                     (c_begin / kPer) * 4 + t;
  const U4* code_b = reinterpret_cast<const U4*>(static_cast<const unsigned char*>(a.codes) + col_b * row_bytes) +
                     (c_begin / kPer) * 4 + t;
  const unsigned short* scales_a = a.scales + static_cast<unsigned long long>(col_a) * groups;
  const unsigned short* scales_b = a.scales + static_cast<unsigned long long>(col_b) * groups;
  U4 word_a = {0u, 0u, 0u, 0u}, word_b = {0u, 0u, 0u, 0u};
  float sum[2][4] = {};
  unsigned group = c_begin / per_group;
  unsigned flush = min_u(c_end, (group + 1) * per_group);  // the chunk that ends it
  float sa = 0.0f, sb = 0.0f, na = 0.0f, nb = 0.0f;
  if (active && words > 0) {
    word_a = code_a[0];
    word_b = code_b[0];
    sa = qgemm_scale(a, scales_a[group]);
    sb = qgemm_scale(a, scales_b[group]);
    if (group + 1 < groups) {
      na = qgemm_scale(a, scales_a[group + 1]);
      nb = qgemm_scale(a, scales_b[group + 1]);
    }
  }
  for (unsigned w = 0; w < words; ++w) {
    cp_async_wait<kStages - 2>();  // word w has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's; and word w - 1's slot, reused below, is read
    if (w + kStages - 1 < words) stage(w + kStages - 1);
    cp_async_commit();
    if (!active) continue;
    U4 next_a = word_a, next_b = word_b;  // the next word's codes, in flight while this one's chunks run
    if (w + 1 < words) {
      next_a = code_a[4 * (w + 1)];
      next_b = code_b[4 * (w + 1)];
    }
    const unsigned wa[4] = {word_a.x, word_a.y, word_a.z, word_a.w}, wb[4] = {word_b.x, word_b.y, word_b.z, word_b.w};
    const unsigned char* staged = ring[w % kStages];
#pragma unroll
    for (unsigned u = 0; u < kPer; ++u) {
      const unsigned cc = c_begin + w * kPer + u;
      U4 rows_here[2];  // row 8j + g's 8 elements at k 32u + 8t of the word
#pragma unroll
      for (unsigned j = 0; j < 2; ++j) {
        rows_here[j] = *reinterpret_cast<const U4*>(staged + (8 * j + g) * kRowBytes + (4 * u + t) * 16);
      }
      packed_chunk<kBits, T, 2>(wa, wb, u, rows_here, sum);
      if (cc + 1 == flush) {  // warp-uniform: the group (or its part in this slice) is done
        end_group(acc, sum, sa, sb);
        if (flush < c_end) next_group(a, scales_a, scales_b, groups, per_group, c_end, group, flush, sa, sb, na, nb);
      }
    }
    word_a = next_a;
    word_b = next_b;
  }
  cp_async_wait<0>();

  // acc[j][e] is row 8j + 2t + (e & 1), column col0 + g (+ 8 for e >= 2): qgemm_tc's C fragments.
  const auto emit = [&](unsigned r, unsigned col, float v) {
    const float y = qgemm_epilogue(a, v, col);
    // INVARIANT: r < the real rows <= the bucket rows of out; col < cols.
    Out* p = static_cast<Out*>(a.out) + static_cast<unsigned long long>(r) * a.cols + col;
    store(p, a.accumulate != 0u ? to_f32(*p) + y : y);
  };
  if (args.splits == 1) {
    if (!active) return;
#pragma unroll
    for (unsigned j = 0; j < 2; ++j) {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned r = 8 * j + 2 * t + (e & 1u), col = col0 + g + (e >= 2 ? 8u : 0u);
        if (r < rows && col < a.cols) emit(r, col, acc[j][e]);
      }
    }
    return;
  }
  // This block's slice of its 8 tiles, then the count; the last block of the column group sums every slice.
  float* mine = args.partials + static_cast<unsigned long long>(slice) * kQGemmSharedRows * a.cols;
  if (active) {
#pragma unroll
    for (unsigned j = 0; j < 2; ++j) {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned r = 8 * j + 2 * t + (e & 1u), col = col0 + g + (e >= 2 ? 8u : 0u);
        if (r < rows && col < a.cols) mine[static_cast<unsigned long long>(r) * a.cols + col] = acc[j][e];
      }
    }
  }
  fence_device();
  __syncthreads();
  if (threadIdx.x == 0) last_block = count_in(&args.counters[blockIdx.x]) == args.splits - 1 ? 1u : 0u;
  __syncthreads();
  if (last_block == 0u) return;
  fence_device();
  constexpr unsigned kWidth = kQGemmTcWarps * 16;
  const unsigned first = blockIdx.x * kWidth;
  for (unsigned o = threadIdx.x; o < rows * kWidth; o += blockDim.x) {
    const unsigned r = o / kWidth, col = first + o % kWidth;
    if (col >= a.cols) continue;
    const unsigned long long at = static_cast<unsigned long long>(r) * a.cols + col;
    float v = load_l2(args.partials + at);
    for (unsigned s = 1; s < args.splits; ++s) {
      v += load_l2(args.partials + static_cast<unsigned long long>(s) * kQGemmSharedRows * a.cols + at);
    }
    emit(r, col, v);
  }
  if (threadIdx.x == 0) args.counters[blockIdx.x] = 0u;  // for the next launch (graph replays included)
}

template <class In, class Out>
TK_DEV void qgemm_shared_entry(const QGemmSharedArgs& a) {
  if (a.q.bits == 8) {
    qgemm_shared<8, In, Out>(a);
  } else {
    qgemm_shared<4, In, Out>(a);
  }
}

}  // namespace

#define TK_QGEMM_SHARED(name, In, Out)                                                           \
  extern "C" __global__ void __launch_bounds__(kQGemmTcWarps * 32) name(QGemmSharedArgs a) { \
    qgemm_shared_entry<In, Out>(a);                                                              \
  }
TK_QGEMM_SHARED(qgemm_shared_f16_f16, half_t, half_t)
TK_QGEMM_SHARED(qgemm_shared_f16_f32, half_t, float)
TK_QGEMM_SHARED(qgemm_shared_bf16_bf16, bf16_t, bf16_t)
TK_QGEMM_SHARED(qgemm_shared_bf16_f32, bf16_t, float)
#undef TK_QGEMM_SHARED

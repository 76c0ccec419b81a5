// The streaming GEMM (args.cuh GemmStreamArgs; PERF_NOTES "cuBLASLt's bits from a kernel of our own"): a decode
// step's GEMM at 1..16 rows streams each weight once and is bound by HBM, not by arithmetic. cuBLASLt runs one
// CTA per 128-column tile there (32 CTAs for n = 4,096 on 132 SMs), so it streams well below the copy rate.
// Here a block is one 16-column tile, a warp per K slice; each output is one chain of mma.sync m16n8k16 steps
// over K in natural order from a zero accumulator, the slices added in slice order and then the prior output,
// as cuBLASLt's split-K with its reduction in the compute type computes it. Whether the bits are the same is the
// hardware's to say: lowering runs both on a probe and takes this kernel only where they are (gemm_impl.h).
//
// The chain fixes the order of the arithmetic, not of the loads: a warp keeps kGemmStreamRing - 1 stages of 128 k
// (4 KB of weights each) in flight through cp.async into its ring in shared memory, so the bytes in flight do not
// cost registers, and ldmatrix gives the mma its fragments at the ISA's own k positions.
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kStageK = 16 * kGemmStreamSteps;  // k per stage
constexpr unsigned kChunks = kStageK * 2 / 16;       // 16-byte chunks per row and stage
constexpr unsigned kRing = kGemmStreamRing;
static_assert(kRing >= 3, "the loop waits for kRing - 2 groups: a ring of 2 would read a stage still loading");

struct StreamSlice {
  const unsigned char* w;  // the tile's first weight row (its columns' rows of w are k elements apart)
  const unsigned char* x;  // the first activation row
  unsigned long long row_bytes;
  unsigned rows;   // real weight rows of the tile (columns of out)
  unsigned k_begin, k_end;
  unsigned stages;  // of the slice
  unsigned stage_bytes;
  unsigned char* base;
};

// Starts the copies of stage s's weights into its slot: 16 rows of kChunks chunks, lanes on consecutive chunks
// of a row; rows past the tile's real columns and k past the slice become zeros.
TK_DEV void load_weights(const StreamSlice& z, unsigned s, unsigned lane) {
  if (s >= z.stages) return;
  unsigned char* dst = z.base + (s % kRing) * z.stage_bytes;
  const unsigned kb = z.k_begin + s * kStageK;
#pragma unroll
  for (unsigned i = 0; i < 16 * kChunks / 32; ++i) {
    const unsigned c = i * 32 + lane, row = c / kChunks, chunk = c % kChunks;
    const unsigned kk = kb + 8 * chunk;
    const bool real = row < z.rows && kk < z.k_end;
    // INVARIANT: a real chunk lies inside its weight row (k_end <= k, a multiple of 16).
    cp_async16(dst + row * kGemmStreamRowBytes + chunk * 16, z.w + (real ? row * z.row_bytes + kk * 2ull : 0), real);
  }
}

// Starts the copies of stage s's activations for the `here` real rows (rows past them are never read into an
// output that is stored).
TK_DEV void load_rows(const StreamSlice& z, unsigned s, unsigned here, unsigned lane) {
  if (s >= z.stages) return;
  unsigned char* dst = z.base + (s % kRing) * z.stage_bytes + 16 * kGemmStreamRowBytes;
  const unsigned kb = z.k_begin + s * kStageK;
  for (unsigned c = lane; c < here * kChunks; c += 32) {
    const unsigned row = c / kChunks, chunk = c % kChunks;
    const unsigned kk = kb + 8 * chunk;
    const bool real = kk < z.k_end;
    cp_async16(dst + row * kGemmStreamRowBytes + chunk * 16, z.x + (real ? row * z.row_bytes + kk * 2ull : 0), real);
  }
}

template <class T, class Out>
TK_DEV void gemm_stream(const GemmStreamArgs& a) {
  __shared__ float part[kGemmStreamWarps][16][kGemmStreamRows + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned col0 = blockIdx.y * 16;
  StreamSlice z;
  z.row_bytes = static_cast<unsigned long long>(a.k) * 2;
  z.w = static_cast<const unsigned char*>(a.w) + col0 * z.row_bytes;
  z.x = static_cast<const unsigned char*>(a.a);
  z.rows = min_u(16, a.cols - col0);  // INVARIANT: col0 < cols (grid y is the tile count)
  z.k_begin = min_u(a.k, warp * a.slice_k);
  z.k_end = min_u(a.k, z.k_begin + a.slice_k);
  z.stages = (z.k_end - z.k_begin + kStageK - 1) / kStageK;
  z.stage_bytes = (16 + a.stage_rows) * kGemmStreamRowBytes;
  z.base = dynamic_smem() + warp * kRing * z.stage_bytes;
  // The first stages' weights go out before the kernel ahead has finished (programmatic dependent launch): they
  // are constants. Its outputs (this kernel's rows, the index) only after the wait. Group s holds stage s's rows
  // (and group 0 all the early weights), so waiting for group s finds stage s whole.
  for (unsigned s = 0; s + 1 < kRing; ++s) load_weights(z, s, lane);
  wait_prior_grids();
  const unsigned here = min_u(real_rows(a.n, a.kind), min_u(a.stage_rows, kGemmStreamRows));
  const unsigned groups = (here + 7) / 8;
  for (unsigned s = 0; s + 1 < kRing; ++s) {
    load_rows(z, s, here, lane);
    cp_async_commit();
  }
  // ldmatrix row addresses: matrices (columns 0-7 | 8-15) x (k 0-7 | 8-15) give the A fragment; (rows 0-7 | 8-15)
  // x (k 0-7 | 8-15) the B fragments of both 8-row groups. Rows past the stage's read its last row: they feed
  // only outputs of rows that are not stored.
  const unsigned mi = lane / 8, mr = lane % 8;
  const unsigned a_off = (mr + 8 * (mi & 1u)) * kGemmStreamRowBytes + 16 * (mi >> 1);
  const unsigned b_off = min_u(mr + 8 * (mi >> 1), a.stage_rows - 1) * kGemmStreamRowBytes + 16 * (mi & 1u);
  float acc[4][4] = {};
  for (unsigned s = 0; s < z.stages && here > 0; ++s) {  // block-uniform
    cp_async_wait<kRing - 2>();
    __syncwarp();  // every lane's copies of stage s landed; every lane is done with the slot refilled next
    load_weights(z, s + kRing - 1, lane);
    load_rows(z, s + kRing - 1, here, lane);
    cp_async_commit();
    const unsigned char* ws = z.base + (s % kRing) * z.stage_bytes;
    const unsigned char* xs = ws + 16 * kGemmStreamRowBytes;
    const unsigned kb = z.k_begin + s * kStageK;
#pragma unroll
    for (unsigned u = 0; u < kGemmStreamSteps; ++u) {
      if (kb + 16 * u >= z.k_end) break;  // warp-uniform: a slice's last stage may be partial
      unsigned af[4], bf[4];
      ldmatrix_x4(af, ws + a_off + 32 * u);
      ldmatrix_x4(bf, xs + b_off + 32 * u);
      const unsigned b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
      mma_16816_t(acc[0], af, b0, T{});
      if (groups > 1) mma_16816_t(acc[1], af, b1, T{});  // warp-uniform
    }
  }
  cp_async_wait<0>();  // nothing left in flight at exit (the ring's tail groups are empty)
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

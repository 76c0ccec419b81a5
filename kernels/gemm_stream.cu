// The streaming GEMM (args.cuh GemmStreamArgs; PERF_NOTES "cuBLASLt's bits from a kernel of our own"): a decode
// step's GEMM at 1..16 rows streams each weight once and is bound by HBM, not by arithmetic. cuBLASLt runs one
// CTA per 128-column tile there (32 CTAs for n = 4,096 on 132 SMs), so it streams well below the copy rate.
// This kernel gives each warp one 16-column tile and one K slice and keeps 16 of its weight loads in flight;
// each output is one chain of mma.sync m16n8k16 steps over K in natural order from a zero accumulator, the
// slices added in slice order and then the prior output, as cuBLASLt's split-K with its reduction in the
// compute type computes it. Whether the bits are the same is the hardware's to say: lowering runs both on a
// probe and takes this kernel only where they are (gemm_impl.h).
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

constexpr unsigned kStepsInFlight = 8;  // k16 steps of weights per batch; two batches in flight per lane

struct StepA {
  unsigned r[4];  // the mma's A fragment: (column g, k lo), (g + 8, k lo), (g, k hi), (g + 8, k hi)
};

// The weights of one k16 step at k0 for this lane's two columns (pointers null past the real columns).
// exact: k 2t, 2t + 1 and 2t + 8, 2t + 9 of the step, as the ISA numbers them; else k 4t..4t + 3 in one
// 8-byte load (a permutation within the step that the activations take alike).
template <class T>
TK_DEV StepA load_step_a(const T* w0, const T* w1, unsigned k0, unsigned t, bool exact) {
  StepA s{};
  if (exact) {
    if (w0 != nullptr) {
      s.r[0] = *reinterpret_cast<const unsigned*>(w0 + k0 + 2 * t);
      s.r[2] = *reinterpret_cast<const unsigned*>(w0 + k0 + 8 + 2 * t);
    }
    if (w1 != nullptr) {
      s.r[1] = *reinterpret_cast<const unsigned*>(w1 + k0 + 2 * t);
      s.r[3] = *reinterpret_cast<const unsigned*>(w1 + k0 + 8 + 2 * t);
    }
    return s;
  }
  if (w0 != nullptr) {
    const U2 v = *reinterpret_cast<const U2*>(w0 + k0 + 4 * t);
    s.r[0] = v.x, s.r[2] = v.y;
  }
  if (w1 != nullptr) {
    const U2 v = *reinterpret_cast<const U2*>(w1 + k0 + 4 * t);
    s.r[1] = v.x, s.r[3] = v.y;
  }
  return s;
}

// The activations of one k16 step for row x (null: a padding row of the fragment), as load_step_a lays K out.
template <class T>
TK_DEV void load_step_b(const T* x, unsigned k0, unsigned t, bool exact, unsigned (&b)[2]) {
  b[0] = b[1] = 0u;
  if (x == nullptr) return;
  if (exact) {
    b[0] = *reinterpret_cast<const unsigned*>(x + k0 + 2 * t);
    b[1] = *reinterpret_cast<const unsigned*>(x + k0 + 8 + 2 * t);
  } else {
    const U2 v = *reinterpret_cast<const U2*>(x + k0 + 4 * t);
    b[0] = v.x, b[1] = v.y;
  }
}

template <class T, class Out>
TK_DEV void gemm_stream(const GemmStreamArgs& a) {
  __shared__ float part[kGemmStreamWarps][16][kGemmStreamRows + 1];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned splits = a.splits, tiles = kGemmStreamWarps / splits;
  const unsigned tile = blockIdx.y * tiles + warp / splits, slice = warp % splits;
  const unsigned col0 = tile * 16;
  const bool exact = a.exact != 0u;
  const unsigned k_begin = min_u(a.k, slice * a.slice_k), k_end = min_u(a.k, k_begin + a.slice_k);
  // INVARIANT: lowering checked k % 16 == 0 and 16-byte aligned operands; columns past the real count are
  // never read (their fragments are zeros).
  const T* w = static_cast<const T*>(a.w);
  const T* w0 = col0 + g < a.cols ? w + static_cast<unsigned long long>(col0 + g) * a.k : nullptr;
  const T* w1 = col0 + g + 8 < a.cols ? w + static_cast<unsigned long long>(col0 + g + 8) * a.k : nullptr;
  // The first batch of weights goes out before the kernel ahead has finished (launched with programmatic
  // dependent launch): they are constants. Its outputs (this kernel's rows, the index) only after the wait.
  StepA cur[kStepsInFlight], next[kStepsInFlight];
#pragma unroll
  for (unsigned u = 0; u < kStepsInFlight; ++u) {
    const unsigned k0 = k_begin + 16 * u;
    cur[u] = k0 < k_end ? load_step_a(w0, w1, k0, t, exact) : StepA{};
  }
  wait_prior_grids();
  const unsigned here = min_u(real_rows(a.n, a.kind), kGemmStreamRows);
  const unsigned groups = (here + 7) / 8;
  float acc[4][4] = {};
  if (col0 < a.cols && here > 0) {  // warp-uniform: the mma needs every lane
    // Rows past the real count are never read (their fragments are zeros).
    const T* x0 = g < here ? static_cast<const T*>(a.a) + static_cast<unsigned long long>(g) * a.k : nullptr;
    const T* x1 = g + 8 < here ? static_cast<const T*>(a.a) + static_cast<unsigned long long>(g + 8) * a.k : nullptr;
    for (unsigned kb = k_begin; kb < k_end; kb += 16 * kStepsInFlight) {
      // The next batch's weights go out before this batch's mma chain runs.
#pragma unroll
      for (unsigned u = 0; u < kStepsInFlight; ++u) {
        const unsigned k0 = kb + 16 * (kStepsInFlight + u);
        next[u] = k0 < k_end ? load_step_a(w0, w1, k0, t, exact) : StepA{};
      }
#pragma unroll
      for (unsigned u = 0; u < kStepsInFlight; ++u) {
        const unsigned k0 = kb + 16 * u;
        if (k0 >= k_end) break;  // warp-uniform
        unsigned b[2];
        load_step_b(x0, k0, t, exact, b);
        mma_16816_t(acc[0], cur[u].r, b, T{});
        if (groups > 1) {  // warp-uniform
          load_step_b(x1, k0, t, exact, b);
          mma_16816_t(acc[1], cur[u].r, b, T{});
        }
      }
#pragma unroll
      for (unsigned u = 0; u < kStepsInFlight; ++u) cur[u] = next[u];
    }
  }
  sum_slices<kGemmStreamRows>(part, acc, groups, splits, here, a.cols, [&](unsigned r, unsigned col, float v) {
    // INVARIANT: r < the real rows <= the bucket rows of out; col < cols.
    Out* y = static_cast<Out*>(a.out) + static_cast<unsigned long long>(r) * a.cols + col;
    if (a.accumulate != 0u) v += to_f32(*y);
    store(y, v);
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

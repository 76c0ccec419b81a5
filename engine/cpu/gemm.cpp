// The blocked CPU GEMM (gemm_impl.h): register tiles of MR rows × 16 columns, A blocked to stay in L2,
// one copy per SIMD level. The k loop is never split, so sums keep one order for every output.
#include "engine/cpu/gemm_impl.h"

#include <algorithm>
#include <cstring>

namespace tandem::cpu {

PackedMatrix PackedMatrix::pack(const float* w, uint32_t n, uint32_t k) {
  PackedMatrix p;
  p.n = n;
  p.k = k;
  p.data.assign(size_t{p.panels()} * k * kPanel, 0.0f);
  for (uint32_t col = 0; col < n; ++col) {
    float* dst = p.data.data() + size_t{col / kPanel} * k * kPanel + col % kPanel;
    const float* src = w + size_t{col} * k;
    for (uint32_t kk = 0; kk < k; ++kk) dst[size_t{kk} * kPanel] = src[kk];
  }
  return p;
}

namespace {

struct GemmJob {
  const float* a;
  const PackedMatrix* w;
  const float* bias;
  ir::Epilogue epilogue;
  Mat out;
  size_t n;           // output columns: out's width, w's first n columns (at most w.n)
  size_t panels;      // panels covering them
  size_t block_rows;  // rows per A block
  size_t groups;      // panel groups per A block
};

constexpr size_t kGroupPanels = 4;         // panels one task covers (64 columns)
constexpr size_t kBlockFloats = 64 * 1024;  // A block size aimed at L2 (256 KiB)

// MR rows of a times panel p, then the epilogue into out.
template <int L, int MR>
[[gnu::always_inline]] inline void tile(const GemmJob& job, size_t m, size_t p) {
  using V = typename FloatVec<L>::Type;
  constexpr int kVecs = static_cast<int>(kPanel) / L;
  const size_t k = job.w->k;
  const size_t lda = k;
  const float* __restrict a = job.a + m * lda;
  const float* __restrict w = job.w->data.data() + p * k * kPanel;
  V acc[MR][kVecs];
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < kVecs; ++v) acc[i][v] = V{};
  }
  for (size_t kk = 0; kk < k; ++kk) {
    V wv[kVecs];
    for (int v = 0; v < kVecs; ++v) std::memcpy(&wv[v], w + kk * kPanel + static_cast<size_t>(v) * L, sizeof(V));
    for (int i = 0; i < MR; ++i) {
      const float av = a[static_cast<size_t>(i) * lda + kk];
      for (int v = 0; v < kVecs; ++v) acc[i][v] += av * wv[v];
    }
  }
  const size_t col0 = p * kPanel;
  const size_t cols = std::min<size_t>(kPanel, job.n - col0);
  const float* bias = job.bias == nullptr ? nullptr : job.bias + col0;
  for (int i = 0; i < MR; ++i) {
    float sum[kPanel];
    for (int v = 0; v < kVecs; ++v) std::memcpy(sum + static_cast<size_t>(v) * L, &acc[i][v], sizeof(V));
    if (bias != nullptr) {
      for (size_t j = 0; j < cols; ++j) sum[j] += bias[j];
    }
    float* o = job.out.row(m + static_cast<size_t>(i)) + col0;
    switch (job.epilogue) {
      case ir::Epilogue::kNone:
        for (size_t j = 0; j < cols; ++j) o[j] = sum[j];
        break;
      case ir::Epilogue::kGelu:
        for (size_t j = 0; j < cols; ++j) o[j] = gelu(sum[j]);
        break;
      case ir::Epilogue::kRelu:
        for (size_t j = 0; j < cols; ++j) o[j] = std::max(0.0f, sum[j]);
        break;
      case ir::Epilogue::kAccumulate:
        for (size_t j = 0; j < cols; ++j) o[j] += sum[j];
        break;
    }
  }
}

// The last rows of a block, fewer than MR: a tile of exactly that many rows so the panel is read once.
template <int L, int MR>
[[gnu::always_inline]] inline void tail(const GemmJob& job, size_t m, size_t p, size_t rows) {
  if constexpr (MR > 1) {
    if (rows == MR - 1) return tile<L, MR - 1>(job, m, p);
    return tail<L, MR - 1>(job, m, p, rows);
  }
}

template <int L>
[[gnu::always_inline]] inline void gemm_tasks(const GemmJob& job, size_t begin, size_t end) {
  constexpr int kMr = L == 16 ? 8 : (L == 8 ? 6 : 3);
  for (size_t t = begin; t < end; ++t) {
    const size_t m0 = t / job.groups * job.block_rows;
    const size_t m1 = std::min<size_t>(job.out.rows, m0 + job.block_rows);
    const size_t p0 = t % job.groups * kGroupPanels;
    const size_t p1 = std::min<size_t>(job.panels, p0 + kGroupPanels);
    for (size_t p = p0; p < p1; ++p) {
      size_t m = m0;
      for (; m + kMr <= m1; m += kMr) tile<L, kMr>(job, m, p);
      if (m < m1) tail<L, kMr>(job, m, p, m1 - m);
    }
  }
}

TANDEM_CPU_ISA_VARIANTS(run_gemm_tasks, gemm_tasks, (const GemmJob& job, size_t begin, size_t end),
                        (job, begin, end))

}  // namespace

void gemm(const Exec& ex, Mat a, const PackedMatrix& w, const float* bias, ir::Epilogue epilogue, Mat out) {
  if (out.rows == 0) return;
  // INVARIANT: out.width <= w.n (a Gemm of w's first rows: ir::Gemm::first_rows, checked by ir::validate).
  GemmJob job{a.data, &w, bias, epilogue, out, out.width, (size_t{out.width} + kPanel - 1) / kPanel, 0, 0};
  // A whole number of 24-row units (a multiple of every MR) keeps blocks aligned to full tiles.
  job.block_rows = std::clamp<size_t>(kBlockFloats / std::max<size_t>(1, w.k) / 24 * 24, 24, 480);
  job.groups = (job.panels + kGroupPanels - 1) / kGroupPanels;
  const size_t blocks = (out.rows + job.block_rows - 1) / job.block_rows;
  const auto fn = run_gemm_tasks_for(ex.isa);
  ex.pool.parallel_for(blocks * job.groups, 1, [&](size_t begin, size_t end) { fn(job, begin, end); });
}

}  // namespace tandem::cpu

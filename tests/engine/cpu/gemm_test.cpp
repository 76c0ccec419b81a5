// GEMM on the CPU backend: every epilogue, with and without bias, against a naive f64 product, on
// shapes that leave partial panels and row tiles; and the same bits for any row count, thread count
// and SIMD level.
#include <gtest/gtest.h>

#include "engine/cpu/gemm_impl.h"
#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

struct GemmCase {
  uint32_t m, k, n;
  ir::Epilogue epilogue;
  bool bias;
};

// Builds out = epilogue(a · wᵀ + b) for an m-row batch (one sequence) and returns (case, a, w, b, init).
struct GemmData {
  std::vector<float> a, w, b, init;
};

GemmData make_data(const GemmCase& c, uint32_t seed) {
  return {random_values(size_t{c.m} * c.k, seed), random_values(size_t{c.n} * c.k, seed + 1, 0.3f),
          random_values(c.n, seed + 2), random_values(size_t{c.m} * c.n, seed + 3)};
}

// The first n columns of each row of a [rows, width] matrix.
std::vector<float> first_columns(const std::vector<float>& m, uint32_t rows, uint32_t width, uint32_t n) {
  std::vector<float> out;
  for (uint32_t i = 0; i < rows; ++i) {
    out.insert(out.end(), m.begin() + size_t{i} * width, m.begin() + size_t{i} * width + n);
  }
  return out;
}

// With first_rows > 0: out is the product with w's first first_rows rows only (w keeps its c.n rows).
std::vector<float> run_gemm(const GemmCase& c, const GemmData& d, size_t threads, Isa isa, uint32_t first_rows = 0) {
  OpCase oc;
  oc.add_sequence(c.m);
  const ir::Val a = oc.input("a", c.k, d.a);
  const ir::WeightId w = oc.weight("w", {c.n, c.k}, d.w);
  const uint32_t n = first_rows != 0 ? first_rows : c.n;
  std::optional<ir::WeightId> b;
  if (c.bias) b = oc.weight("b", {n}, std::vector<float>(d.b.begin(), d.b.begin() + n));
  ir::Val out;
  if (c.epilogue == ir::Epilogue::kAccumulate) {
    out = oc.input("out", n, first_columns(d.init, c.m, c.n, n));
  } else {
    out = oc.graph.add_val(ir::Rows::kTokens, n, "out");
  }
  oc.graph.add_op(ir::Gemm{a, w, b, c.epilogue, out, first_rows != 0});
  oc.graph.add_output("out", out);
  Runner runner(oc.graph, oc.weights, threads, isa);
  ir::Outputs outs = runner.run(oc.batch);
  return outs.values.empty() ? std::vector<float>{} : outs.values[0].data;
}

std::vector<double> naive(const GemmCase& c, const GemmData& d) {
  std::vector<double> out(size_t{c.m} * c.n);
  for (uint32_t i = 0; i < c.m; ++i) {
    for (uint32_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (uint32_t kk = 0; kk < c.k; ++kk) s += double{d.a[size_t{i} * c.k + kk]} * d.w[size_t{j} * c.k + kk];
      if (c.bias) s += d.b[j];
      double& o = out[size_t{i} * c.n + j];
      switch (c.epilogue) {
        case ir::Epilogue::kNone: o = s; break;
        case ir::Epilogue::kGelu: o = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0))); break;
        case ir::Epilogue::kRelu: o = std::max(0.0, s); break;
        case ir::Epilogue::kAccumulate: o = d.init[size_t{i} * c.n + j] + s; break;
      }
    }
  }
  return out;
}

TEST(CpuGemm, MatchesNaiveProduct) {
  uint32_t seed = 1;
  for (ir::Epilogue ep : {ir::Epilogue::kNone, ir::Epilogue::kGelu, ir::Epilogue::kRelu, ir::Epilogue::kAccumulate}) {
    for (GemmCase c : {GemmCase{0, 8, 16, ep, true}, GemmCase{1, 1, 1, ep, false}, GemmCase{1, 64, 33, ep, true},
                       GemmCase{7, 300, 17, ep, true}, GemmCase{37, 129, 100, ep, false},
                       GemmCase{130, 40, 70, ep, true}}) {
      const GemmData d = make_data(c, seed++);
      const std::vector<float> got = run_gemm(c, d, 2, best_isa());
      expect_near(got, naive(c, d), 2e-5,
                  fmt::format("gemm m={} k={} n={} epilogue={} bias={}", c.m, c.k, c.n, static_cast<int>(ep), c.bias));
    }
  }
}

TEST(CpuGemm, RowBitsIndependentOfRowsThreadsAndSimdLevel) {
  // Row i of a tall product must equal the same row computed alone and at another offset.
  const GemmCase tall{301, 200, 45, ir::Epilogue::kGelu, true};
  const GemmData d = make_data(tall, 99);
  const std::vector<float> reference = run_gemm(tall, d, 1, Isa::kBase);
  for (Isa isa : supported_isas()) {
    for (size_t threads : {1, 2, 3}) {
      EXPECT_TRUE(same_bits(run_gemm(tall, d, threads, isa), reference))
          << "threads " << threads << ", " << to_string(isa);
    }
  }
  for (uint32_t row : {0u, 5u, 150u, 300u}) {
    GemmCase one = tall;
    one.m = 1;
    GemmData d1 = d;
    d1.a.assign(d.a.begin() + size_t{row} * tall.k, d.a.begin() + size_t{row + 1} * tall.k);
    for (Isa isa : supported_isas()) {
      const std::vector<float> alone = run_gemm(one, d1, 1, isa);
      const std::vector<float> want(reference.begin() + size_t{row} * tall.n,
                                    reference.begin() + size_t{row + 1} * tall.n);
      EXPECT_TRUE(same_bits(alone, want)) << "row " << row << " alone, " << to_string(isa);
    }
  }
}

// A draft vocabulary over a head: the product with w's first rows (ir::Gemm::first_rows) is, bit for bit, the
// first columns of the whole product, for widths inside a panel, on a panel's edge and past a task's panels.
TEST(CpuGemm, FirstRowsAreTheWholeProductsFirstColumns) {
  for (ir::Epilogue ep : {ir::Epilogue::kNone, ir::Epilogue::kAccumulate}) {
    const GemmCase c{9, 70, 150, ep, true};
    const GemmData d = make_data(c, 31);
    const std::vector<float> whole = run_gemm(c, d, 2, best_isa());
    for (uint32_t n : {1u, 15u, 16u, 17u, 64u, 65u, 149u}) {
      const std::vector<float> got = run_gemm(c, d, 2, best_isa(), n);
      ASSERT_EQ(got.size(), size_t{c.m} * n);
      EXPECT_TRUE(same_bits(got, first_columns(whole, c.m, c.n, n)))
          << "first " << n << " rows of 150, epilogue " << static_cast<int>(ep);
    }
  }
}

TEST(CpuGemm, PackingPadsPartialPanels) {
  const std::vector<float> w = random_values(size_t{19} * 5, 7);
  const PackedMatrix p = PackedMatrix::pack(w.data(), 19, 5);
  ASSERT_EQ(p.panels(), 2u);
  ASSERT_EQ(p.data.size(), size_t{2} * 5 * kPanel);
  for (uint32_t col = 0; col < 32; ++col) {
    for (uint32_t kk = 0; kk < 5; ++kk) {
      const float got = p.data[(size_t{col / kPanel} * 5 + kk) * kPanel + col % kPanel];
      EXPECT_EQ(got, col < 19 ? w[size_t{col} * 5 + kk] : 0.0f) << col << "," << kk;
    }
  }
}

}  // namespace
}  // namespace tandem::cpu::testing

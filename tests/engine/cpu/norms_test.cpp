// LayerNorm, RMSNorm and per-head RMSNorm on the CPU backend against naive f64 versions, at 0, 1 and
// several rows, with rows of very different scale.
#include <gtest/gtest.h>

#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

// Rows with offsets and scales that a one-pass f32 variance would get wrong.
std::vector<float> rows_of_many_scales(uint32_t rows, uint32_t width, uint32_t seed) {
  std::vector<float> x = random_values(size_t{rows} * width, seed);
  for (uint32_t r = 0; r < rows; ++r) {
    const float scale = 1.0f + static_cast<float>(r), offset = 100.0f * static_cast<float>(r);
    for (uint32_t i = 0; i < width; ++i) x[size_t{r} * width + i] = x[size_t{r} * width + i] * scale + offset;
  }
  return x;
}

std::vector<double> naive_layer_norm(const std::vector<float>& x, uint32_t width, const std::vector<float>& w,
                                     const std::vector<float>* b, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / width; ++r) {
    double mean = 0, var = 0;
    for (uint32_t i = 0; i < width; ++i) mean += x[r * width + i];
    mean /= width;
    for (uint32_t i = 0; i < width; ++i) var += (x[r * width + i] - mean) * (x[r * width + i] - mean);
    var /= width;
    for (uint32_t i = 0; i < width; ++i) {
      out[r * width + i] = (x[r * width + i] - mean) / std::sqrt(var + eps) * w[i] + (b ? (*b)[i] : 0.0);
    }
  }
  return out;
}

std::vector<double> naive_rms(const std::vector<float>& x, uint32_t width, const std::vector<float>& w, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / width; ++r) {
    double sq = 0;
    for (uint32_t i = 0; i < width; ++i) sq += double{x[r * width + i]} * x[r * width + i];
    const double scale = 1.0 / std::sqrt(sq / width + eps);
    for (uint32_t i = 0; i < width; ++i) out[r * width + i] = x[r * width + i] * scale * w[i];
  }
  return out;
}

TEST(CpuNorms, LayerNormWithAndWithoutBias) {
  for (uint32_t rows : {0u, 1u, 9u}) {
    for (bool bias : {false, true}) {
      const uint32_t width = 96;
      OpCase oc;
      oc.add_sequence(rows);
      const std::vector<float> x = rows_of_many_scales(rows, width, rows + 1);
      const std::vector<float> w = random_values(width, 5), b = random_values(width, 6);
      const ir::Val in = oc.input("x", width, x);
      const ir::WeightId wid = oc.weight("w", {width}, w);
      std::optional<ir::WeightId> bid;
      if (bias) bid = oc.weight("b", {width}, b);
      const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, width, "y");
      oc.graph.add_op(ir::LayerNorm{in, wid, bid, 1e-5f, out});
      oc.graph.add_output("y", out);
      Runner runner(oc.graph, oc.weights, 2, best_isa());
      const ir::Outputs o = runner.run(oc.batch);
      ASSERT_EQ(o.values.size(), 1u);
      EXPECT_EQ(o.values[0].rows, rows);
      expect_near(o.values[0].data, naive_layer_norm(x, width, w, bias ? &b : nullptr, 1e-5), 1e-6,
                  fmt::format("layer norm rows={} bias={}", rows, bias));
    }
  }
}

TEST(CpuNorms, RmsNormAndHeadRmsNorm) {
  for (uint32_t rows : {0u, 1u, 6u}) {
    const uint32_t heads = 3, head_dim = 32, width = heads * head_dim;
    OpCase oc;
    oc.add_sequence(rows);
    const std::vector<float> x = rows_of_many_scales(rows, width, 40 + rows);
    const std::vector<float> w = random_values(width, 8), hw = random_values(head_dim, 9);
    const ir::Val in = oc.input("x", width, x);
    const ir::Val y = oc.graph.add_val(ir::Rows::kTokens, width, "y");
    oc.graph.add_op(ir::RmsNorm{in, oc.weight("w", {width}, w), 1e-6f, y});
    const ir::Val z = oc.input("z", width, x);
    oc.graph.add_op(ir::HeadRmsNorm{z, oc.weight("hw", {head_dim}, hw), heads, head_dim, 1e-6f, 0});
    oc.graph.add_output("y", y);
    oc.graph.add_output("z", z);
    Runner runner(oc.graph, oc.weights, 2, best_isa());
    const ir::Outputs o = runner.run(oc.batch);
    ASSERT_EQ(o.values.size(), 2u);
    expect_near(o.values[0].data, naive_rms(x, width, w, 1e-6), 1e-6, fmt::format("rms norm rows={}", rows));
    // Per head: the same RMSNorm over each head_dim slice with the shared head weight.
    expect_near(o.values[1].data, naive_rms(x, head_dim, hw, 1e-6), 1e-6, fmt::format("head rms norm rows={}", rows));
  }
}

}  // namespace
}  // namespace tandem::cpu::testing

// Row-wise ops on the CPU backend against naive f64 versions: Embed, RoPE at batch start positions,
// GeGLU, SwiGLU, AddType, Input, Tap and DFlash 2's dynamic convolution, at 0, 1 and several rows.
#include <gtest/gtest.h>

#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

ir::Outputs run_once(const OpCase& oc, size_t threads = 2) {
  Runner runner(oc.graph, oc.weights, threads, best_isa());
  return runner.run(oc.batch);
}

TEST(CpuElementwise, EmbedCopiesTableRowsExactly) {
  for (uint32_t len : {0u, 1u, 9u}) {
    OpCase oc;
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < len; ++i) ids.push_back((i * 7 + 3) % 11);
    oc.batch.add_sequence(ids, {}, 0);
    const std::vector<float> table = random_values(11 * 6, 1);
    const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, 6, "e");
    oc.graph.add_op(ir::Embed{oc.weight("table", {11, 6}, table), out});
    oc.graph.add_output("e", out);
    const ir::Outputs o = run_once(oc);
    std::vector<float> want;
    for (uint32_t id : ids) want.insert(want.end(), table.begin() + id * 6, table.begin() + id * 6 + 6);
    EXPECT_TRUE(same_bits(o.values.at(0).data, want)) << len;
  }
}

TEST(CpuElementwise, RopeAtBatchStartPositionsLeavesOtherColumns) {
  OpCase oc;
  const std::vector<uint32_t> lengths = {3, 0, 4, 1};
  const std::vector<uint32_t> starts = {5, 9, 100, 0};
  for (size_t s = 0; s < lengths.size(); ++s) {
    oc.add_sequence(lengths[s]);
    oc.batch.start.push_back(starts[s]);
  }
  const uint32_t width = 40, col = 8, heads = 2, hd = 16;
  const std::vector<float> x = random_values(size_t{oc.batch.tokens()} * width, 2);
  const ir::Val v = oc.input("x", width, x);
  oc.graph.add_op(ir::Rope{v, col, heads, hd, 1e6f});
  oc.graph.add_output("x", v);
  const ir::Outputs o = run_once(oc);
  std::vector<double> want(x.begin(), x.end());
  size_t row = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (uint32_t i = 0; i < lengths[s]; ++i, ++row) {
      for (uint32_t f = 0; f < hd / 2; ++f) {
        const float inv = 1.0f / std::pow(1e6f, static_cast<float>(2 * f) / static_cast<float>(hd));
        const double angle = static_cast<float>(starts[s] + i) * inv;
        for (uint32_t h = 0; h < heads; ++h) {
          const size_t at = row * width + col + h * hd;
          const double a = x[at + f], b = x[at + f + hd / 2];
          want[at + f] = a * std::cos(angle) - b * std::sin(angle);
          want[at + f + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
        }
      }
    }
  }
  expect_near(o.values.at(0).data, want, 1e-6, "rope");
  for (size_t r = 0; r < row; ++r) {
    for (uint32_t c = 0; c < col; ++c) EXPECT_EQ(o.values[0].data[r * width + c], x[r * width + c]);
  }
}

TEST(CpuElementwise, GatedUnits) {
  for (uint32_t rows : {0u, 1u, 7u}) {
    OpCase oc;
    oc.add_sequence(rows);
    const uint32_t inner = 19;
    const std::vector<float> x = random_values(size_t{rows} * 2 * inner, 3, 2.0f);
    const ir::Val in = oc.input("x", 2 * inner, x);
    const ir::Val g = oc.graph.add_val(ir::Rows::kTokens, inner, "geglu");
    const ir::Val s = oc.graph.add_val(ir::Rows::kTokens, inner, "swiglu");
    oc.graph.add_op(ir::GeGlu{in, g});
    oc.graph.add_op(ir::SwiGlu{in, s});
    oc.graph.add_output("geglu", g);
    oc.graph.add_output("swiglu", s);
    const ir::Outputs o = run_once(oc);
    std::vector<double> want_g, want_s;
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t i = 0; i < inner; ++i) {
        const double a = x[size_t{r} * 2 * inner + i], b = x[size_t{r} * 2 * inner + inner + i];
        want_g.push_back(0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))) * b);
        want_s.push_back(a / (1.0 + std::exp(-a)) * b);
      }
    }
    expect_near(o.values.at(0).data, want_g, 1e-6, "geglu");
    expect_near(o.values.at(1).data, want_s, 1e-6, "swiglu");
  }
}

TEST(CpuElementwise, AddTypeAddsEachSequencesRow) {
  OpCase oc;
  const std::vector<uint32_t> lengths = {2, 0, 3};
  const std::vector<uint8_t> types = {2, 1, 0};
  for (size_t s = 0; s < lengths.size(); ++s) oc.add_sequence(lengths[s], {}, types[s]);
  const uint32_t w = 5;
  const std::vector<float> h = random_values(size_t{oc.batch.tokens()} * w, 4);
  const std::vector<float> table = random_values(3 * w, 5);
  const ir::Val v = oc.input("h", w, h);
  oc.graph.add_op(ir::AddType{v, oc.weight("types", {3, w}, table)});
  oc.graph.add_output("h", v);
  const ir::Outputs o = run_once(oc);
  std::vector<float> want = h;
  size_t row = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (uint32_t i = 0; i < lengths[s]; ++i, ++row) {
      for (uint32_t c = 0; c < w; ++c) want[row * w + c] += table[types[s] * w + c];
    }
  }
  EXPECT_TRUE(same_bits(o.values.at(0).data, want));
}

TEST(CpuElementwise, InputAndTapCopyRowsExactly) {
  for (uint32_t rows : {0u, 1u, 5u}) {
    OpCase oc;
    oc.add_sequence(rows);
    oc.graph.feature_width = 4;
    oc.batch.features = random_values(size_t{rows} * 4, 6);
    const ir::Val in = oc.graph.add_val(ir::Rows::kTokens, 4, "features");
    oc.graph.add_op(ir::Input{in});
    const std::vector<float> joined = random_values(size_t{rows} * 11, 7);
    const ir::Val out = oc.input("joined", 11, joined);
    oc.graph.add_op(ir::Tap{in, out, 6});
    oc.graph.add_output("features", in);
    oc.graph.add_output("joined", out);
    const ir::Outputs o = run_once(oc);
    EXPECT_TRUE(same_bits(o.values.at(0).data, oc.batch.features));
    std::vector<float> want = joined;
    want.resize(size_t{rows} * 11);
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t c = 0; c < 4; ++c) want[size_t{r} * 11 + 6 + c] = oc.batch.features[size_t{r} * 4 + c];
    }
    EXPECT_TRUE(same_bits(o.values.at(1).data, want));
  }
}

TEST(CpuElementwise, DynamicConvolutionStaysInsideEachSequence) {
  const std::vector<uint32_t> lengths = {4, 0, 1, 6};
  const uint32_t w = 12, group = 4, groups = w / group;
  for (uint32_t taps : {1u, 2u, 3u}) {
    for (uint32_t stage : {0u, 1u}) {
      for (ir::Epilogue ep : {ir::Epilogue::kNone, ir::Epilogue::kAccumulate}) {
        OpCase oc;
        for (uint32_t len : lengths) oc.add_sequence(len);
        const uint32_t t = oc.batch.tokens(), dw = 2 * taps * groups;
        const std::vector<float> x = random_values(size_t{t} * w, 8), d = random_values(size_t{t} * dw, 9),
                                 base = random_values(size_t{2} * taps * w, 10),
                                 init = random_values(size_t{t} * w, 11);
        const ir::Val xv = oc.input("x", w, x), dv = oc.input("d", dw, d);
        const ir::Val out = ep == ir::Epilogue::kAccumulate ? oc.input("out", w, init)
                                                             : oc.graph.add_val(ir::Rows::kTokens, w, "out");
        oc.graph.add_op(ir::DynConv{xv, dv, oc.weight("base", {2, taps, w}, base), stage, taps, group, ep, out});
        oc.graph.add_output("out", out);
        const ir::Outputs o = run_once(oc);
        std::vector<double> want(size_t{t} * w, 0.0);
        size_t r0 = 0;
        for (uint32_t len : lengths) {
          for (uint32_t i = 0; i < len; ++i) {
            for (uint32_t c = 0; c < w; ++c) {
              double y = 0;
              for (uint32_t tau = 0; tau < taps && tau <= i; ++tau) {
                const size_t k = size_t{stage} * taps + tau;
                y += (base[k * w + c] + d[(r0 + i) * dw + k * groups + c / group]) * x[(r0 + i - tau) * w + c];
              }
              want[(r0 + i) * w + c] = (ep == ir::Epilogue::kAccumulate ? init[(r0 + i) * w + c] : 0.0) + y;
            }
          }
          r0 += len;
        }
        expect_near(o.values.at(0).data, want, 1e-6, fmt::format("dyn_conv taps={} stage={}", taps, stage));
      }
    }
  }
}

}  // namespace
}  // namespace tandem::cpu::testing

// PickRows and ActFeatures on the CPU backend against scorer.md §2 written out in f64: sequences
// with 0, 1, tied and several markers, and an empty sequence.
#include <gtest/gtest.h>

#include <iterator>
#include <set>

#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

struct Question {
  uint32_t len;
  std::vector<uint32_t> markers;
};

TEST(CpuScorerOps, PickRowsAndActFeatures) {
  const std::vector<Question> qs = {{5, {1, 3}}, {0, {}}, {4, {}}, {1, {0}}, {8, {2, 4, 5, 6, 7}}, {3, {0, 2}}};
  OpCase oc;
  for (const Question& q : qs) oc.add_sequence(q.len, q.markers);
  const uint32_t d = 6, t = oc.batch.tokens();
  const std::vector<float> h = random_values(size_t{t} * d, 1);
  std::vector<float> scores = random_values(t, 2, 3.0f);
  scores[oc.batch.cu[5] + 0] = scores[oc.batch.cu[5] + 2] = 0.75f;  // the last question's two logits tie
  const ir::Val hv = oc.input("h", d, h), sv = oc.input("scores", 1, scores);
  const ir::Val gathered = oc.graph.add_val(ir::Rows::kPicks, d, "gathered");
  const ir::Val logits = oc.graph.add_val(ir::Rows::kPicks, 1, "logits");
  const ir::Val feats = oc.graph.add_val(ir::Rows::kSeqs, d + 4, "features");
  oc.graph.add_op(ir::PickRows{hv, gathered});
  oc.graph.add_op(ir::PickRows{sv, logits});
  oc.graph.add_op(ir::ActFeatures{hv, logits, feats});
  oc.graph.add_output("gathered", gathered);
  oc.graph.add_output("features", feats);
  Runner runner(oc.graph, oc.weights, 2, best_isa());
  const ir::Outputs o = runner.run(oc.batch);
  ASSERT_EQ(o.values.size(), 2u);

  std::vector<float> want_gather;
  std::vector<double> want_feats;
  for (size_t s = 0; s < qs.size(); ++s) {
    const size_t r0 = oc.batch.cu[s];
    std::vector<double> z;
    for (uint32_t m : qs[s].markers) {
      want_gather.insert(want_gather.end(), h.begin() + (r0 + m) * d, h.begin() + (r0 + m + 1) * d);
      z.push_back(scores[r0 + m]);
    }
    for (uint32_t c = 0; c < d; ++c) want_feats.push_back(qs[s].len > 0 ? h[r0 * d + c] : 0.0);
    const size_t k = z.size(), kf = std::max<size_t>(k, 2);
    double top1 = 0, top2 = 0, entropy = 0;
    if (k > 0) {
      const double mx = *std::max_element(z.begin(), z.end());
      double sum = 0;
      for (double v : z) sum += std::exp(v - mx);
      std::vector<double> q;
      for (double v : z) q.push_back(std::exp(v - mx) / sum);
      std::multiset<double> sorted(q.begin(), q.end());
      top1 = *sorted.rbegin();
      top2 = k > 1 ? *std::next(sorted.rbegin()) : 0.0;
      for (double p : q) entropy -= p * std::log(std::max(p, 1e-9));
      entropy /= std::log(static_cast<double>(kf));
    }
    want_feats.insert(want_feats.end(), {top1, top1 - top2, entropy, static_cast<double>(kf) / 255.0});
  }
  EXPECT_TRUE(same_bits(o.values[0].data, want_gather));
  expect_near(o.values[1].data, want_feats, 1e-7, "act features");
  // Spot checks of the rules themselves: no markers → zeros and 2/255; one marker → margin 1, entropy 0;
  // a tie at the top → margin 0.
  const std::vector<float>& f = o.values[1].data;
  const size_t stride = d + 4;
  EXPECT_EQ(f[2 * stride + d], 0.0f);
  EXPECT_FLOAT_EQ(f[2 * stride + d + 3], 2.0f / 255.0f);
  EXPECT_EQ(f[1 * stride + 0], 0.0f);
  EXPECT_FLOAT_EQ(f[3 * stride + d], 1.0f);
  EXPECT_FLOAT_EQ(f[3 * stride + d + 1], 1.0f);
  EXPECT_EQ(f[3 * stride + d + 2], 0.0f);
  EXPECT_FLOAT_EQ(f[4 * stride + d + 3], 5.0f / 255.0f);
  EXPECT_EQ(f[5 * stride + d + 1], 0.0f);
}

}  // namespace
}  // namespace tandem::cpu::testing

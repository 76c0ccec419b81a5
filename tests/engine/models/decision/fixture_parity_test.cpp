// Parity with the reference made by tools/make_decision_fixture.py (HF ModernBERT + PyTorch head, f64):
// every logit and act value within 1e-4 relative to max(1, |ref|) and every argmax equal. The fixture
// is required: a missing tests/fixtures/decision-tiny or tests/fixtures/decision/reference.json fails the
// test.
// Where the reference's top two logits are closer than twice the tolerance (the fixture has options
// tied to 1e-9, below f32 resolution), the pick must instead be one of the reference's tied best.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/decision/decision_model.h"

namespace tandem::models::decision {
namespace {

constexpr const char* kReference = TANDEM_SOURCE_DIR "/tests/fixtures/decision/reference.json";

constexpr double kTolerance = 1e-4;

size_t argmax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The gap between the best and the second-best value (infinite with one value).
double top_margin(const std::vector<double>& v) {
  const size_t best = argmax(v);
  double second = -INFINITY;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != best) second = std::max(second, v[i]);
  }
  return v[best] - second;
}

TEST(DecisionFixture, CpuMatchesTheHfReference) {
  auto ref = io::read_json_file(kReference);
  ASSERT_TRUE(ref.ok()) << "the decision fixture is missing (run tools/make_decision_fixture.py): "
                        << ref.error().message();
  const nlohmann::json& j = *ref;
  auto model = DecisionModel::load(std::string(TANDEM_SOURCE_DIR) + "/" + j.at("model").get<std::string>());
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto backend = cpu::make_cpu_backend(0);
  auto scorer = Scorer::create(**model, *backend, ir::BucketTable::defaults());
  ASSERT_TRUE(scorer.ok()) << scorer.error().message();
  const nlohmann::json& batches = j.at("batches");
  ASSERT_GE(batches.size(), 50u);
  size_t questions = 0, values = 0, near_ties = 0;
  double worst = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    const nlohmann::json& seqs = batches[b].at("sequences");
    ir::Batch batch;
    for (const nlohmann::json& s : seqs) {
      batch.add_sequence(s.at("ids").get<std::vector<uint32_t>>(), s.at("markers").get<std::vector<uint32_t>>(),
                         s.at("qtype").get<uint8_t>());
    }
    auto out = (*scorer)->score(batch);
    ASSERT_TRUE(out.ok()) << "batch " << b << ": " << out.error().message();
    for (size_t s = 0; s < seqs.size(); ++s, ++questions) {
      const auto want_logits = seqs[s].at("logits").get<std::vector<double>>();
      const auto want_act = seqs[s].at("act").get<std::vector<double>>();
      ASSERT_EQ(want_logits.size(), batch.pcu[s + 1] - batch.pcu[s]) << "batch " << b << " sequence " << s;
      ASSERT_EQ(want_act.size(), 2u);
      std::vector<double> got(out->logits.begin() + batch.pcu[s], out->logits.begin() + batch.pcu[s + 1]);
      got.push_back(out->act[s][0]);
      got.push_back(out->act[s][1]);
      std::vector<double> want = want_logits;
      want.insert(want.end(), want_act.begin(), want_act.end());
      for (size_t i = 0; i < want.size(); ++i, ++values) {
        const double err = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
        worst = std::max(worst, err);
        const bool logit = i < want_logits.size();
        EXPECT_LE(err, kTolerance) << "batch " << b << " sequence " << s << (logit ? " logit " : " act ")
                                   << (logit ? i : i - want_logits.size()) << ": got " << got[i] << ", want "
                                   << want[i];
      }
      if (!want_logits.empty()) {
        const size_t pick = argmax(std::vector<double>(got.begin(), got.end() - 2));
        const size_t want_pick = argmax(want_logits);
        const double tie = 2 * kTolerance * std::max(1.0, std::abs(want_logits[want_pick]));
        if (top_margin(want_logits) > tie) {
          EXPECT_EQ(pick, want_pick) << "batch " << b << " sequence " << s;
        } else {
          ++near_ties;
          EXPECT_LE(want_logits[want_pick] - want_logits[pick], tie) << "batch " << b << " sequence " << s;
        }
      }
    }
  }
  std::printf("decision fixture: %zu batches, %zu questions, %zu values, worst relative error %.3e, "
              "%zu near-tied picks\n", batches.size(), questions, values, worst, near_ties);
}

}  // namespace
}  // namespace tandem::models::decision

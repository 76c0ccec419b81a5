// The Scorer on the CPU backend against the compat model written out in plain f64 (random tiny
// checkpoint, rounds over several buckets), its errors, calibrate(), and the backend factory.
#include <gtest/gtest.h>

#include <set>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/decision/decision_model.h"
#include "tests/engine/models/decision/decision_test_util.h"
#include "tests/engine/models/decision/reference_model.h"

namespace tandem::models::decision::testing {
namespace {

struct Question {
  std::vector<uint32_t> ids, markers;
  uint8_t qtype = 0;
};

Question random_question(std::mt19937& rng, uint32_t vocab, uint32_t max_len) {
  Question q;
  const uint32_t len = rng() % 8 == 0 ? 0 : 1 + static_cast<uint32_t>(rng() % max_len);
  for (uint32_t i = 0; i < len; ++i) q.ids.push_back(5 + static_cast<uint32_t>(rng() % (vocab - 5)));
  const uint32_t k = std::min<uint32_t>(len, static_cast<uint32_t>(rng() % 6));
  std::vector<uint32_t> positions(len);
  for (uint32_t i = 0; i < len; ++i) positions[i] = i;
  std::shuffle(positions.begin(), positions.end(), rng);
  q.markers.assign(positions.begin(), positions.begin() + k);
  std::sort(q.markers.begin(), q.markers.end());
  for (uint32_t m : q.markers) q.ids[m] = 4;
  q.qtype = static_cast<uint8_t>(rng() % 3);
  return q;
}

bool close(double got, double want) { return std::abs(got - want) <= 1e-4 * std::max(1.0, std::abs(want)); }

TEST(DecisionScorer, MatchesPlainF64ModelOverSeveralBuckets) {
  const std::vector<io::HostTensor> tensors = tiny_tensors();
  auto model = DecisionModel::from_parts(to_source(tensors), tiny_encoder(), tiny_laya());
  ASSERT_TRUE(model.ok()) << model.error().message();
  const Reference ref(*to_source(tensors), tiny_encoder(), tiny_laya());
  auto backend = cpu::make_cpu_backend(2);
  auto scorer = Scorer::create(**model, *backend, ir::BucketTable::defaults());
  ASSERT_TRUE(scorer.ok()) << scorer.error().message();
  std::mt19937 rng(7);
  std::set<uint32_t> buckets;
  for (int round = 0; round < 12; ++round) {
    ir::Batch batch;
    std::vector<Question> qs;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      qs.push_back(random_question(rng, 97, round % 3 == 0 ? 70 : 20));
      batch.add_sequence(qs.back().ids, qs.back().markers, qs.back().qtype);
    }
    buckets.insert(ir::BucketTable::defaults().smallest("compat", batch.tokens(), batch.seqs(),
                                                        batch.num_picks())->tokens);
    auto out = (*scorer)->score(batch);
    ASSERT_TRUE(out.ok()) << out.error().message();
    ASSERT_EQ(out->logits.size(), batch.num_picks());
    ASSERT_EQ(out->act.size(), batch.seqs());
    for (size_t s = 0; s < qs.size(); ++s) {
      const Reference::Out want = ref.forward(qs[s].ids, qs[s].markers, qs[s].qtype);
      for (size_t m = 0; m < want.logits.size(); ++m) {
        EXPECT_PRED2(close, out->logits[batch.pcu[s] + m], want.logits[m]) << "round " << round << " seq " << s;
      }
      EXPECT_PRED2(close, out->act[s][0], want.act[0]) << "round " << round << " seq " << s;
      EXPECT_PRED2(close, out->act[s][1], want.act[1]) << "round " << round << " seq " << s;
    }
  }
  EXPECT_GE(buckets.size(), 2u);
}

TEST(DecisionScorer, RejectsBadBatchesAndBatchesPastEveryBucket) {
  auto model = DecisionModel::from_parts(to_source(tiny_tensors()), tiny_encoder(), tiny_laya());
  ASSERT_TRUE(model.ok());
  auto table = ir::BucketTable::parse("compat 16 2 4\ncompat 32 4 8\n", "test buckets");
  ASSERT_TRUE(table.ok());
  auto backend = cpu::make_cpu_backend(1);
  auto scorer = Scorer::create(**model, *backend, *table);
  ASSERT_TRUE(scorer.ok());

  ir::Batch big;
  big.add_sequence(std::vector<uint32_t>(33, 7), {0}, 0);
  auto too_big = (*scorer)->score(big);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().kind(), ErrorKind::kCapacity);

  ir::Batch bad;
  bad.add_sequence({1, 200, 2}, {1}, 0);
  auto out_of_vocab = (*scorer)->score(bad);
  ASSERT_FALSE(out_of_vocab.ok());
  EXPECT_NE(out_of_vocab.error().message().find("ids[1] = 200"), std::string::npos)
      << out_of_vocab.error().message();

  ir::Batch empty;
  auto nothing = (*scorer)->score(empty);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->logits.empty());

  ASSERT_TRUE((*scorer)->warm_up().ok());
  EXPECT_GT((*scorer)->plan_bytes(), 0u);
  EXPECT_GT((*scorer)->weight_bytes(), 0u);

  auto no_stage = ir::BucketTable::parse("state 64 8 0\n", "test buckets");
  ASSERT_TRUE(no_stage.ok());
  EXPECT_FALSE(Scorer::create(**model, *backend, *no_stage).ok());
}

// A job told to stop while the scorer warms up leaves at the next bucket, not after all of them.
TEST(DecisionScorer, WarmUpStopsBetweenBuckets) {
  auto model = DecisionModel::from_parts(to_source(tiny_tensors()), tiny_encoder(), tiny_laya());
  ASSERT_TRUE(model.ok());
  auto table = ir::BucketTable::parse("compat 16 2 4\ncompat 32 4 8\n", "test buckets");
  ASSERT_TRUE(table.ok());
  auto backend = cpu::make_cpu_backend(1);
  auto scorer = Scorer::create(**model, *backend, *table);
  ASSERT_TRUE(scorer.ok());
  int asked = 0;
  Status stopped = (*scorer)->warm_up([&] { return ++asked > 1; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().kind(), ErrorKind::kCancelled);
  EXPECT_EQ(stopped.error().message(), "stopped while lowering the scorer plans (1 of 2 ready)");
  const size_t one = (*scorer)->plan_bytes();
  EXPECT_GT(one, 0u);
  ASSERT_TRUE((*scorer)->warm_up().ok());
  EXPECT_GT((*scorer)->plan_bytes(), one);
}

TEST(DecisionScorer, CalibrateIsTemperedSoftmax) {
  const std::vector<float> z = {1.0f, 2.0f, -0.5f};
  const std::vector<float> p = calibrate(z, 2.0f);
  double sum = 0;
  for (double e : {std::exp(0.5), std::exp(1.0), std::exp(-0.25)}) sum += e;
  EXPECT_FLOAT_EQ(p[0], static_cast<float>(std::exp(0.5) / sum));
  EXPECT_FLOAT_EQ(p[1], static_cast<float>(std::exp(1.0) / sum));
  EXPECT_FLOAT_EQ(p[2], static_cast<float>(std::exp(-0.25) / sum));
  EXPECT_TRUE(calibrate({}, 1.0f).empty());
  // Huge logits do not overflow.
  const std::vector<float> big = calibrate(std::vector<float>{1000.0f, 999.0f}, 1.0f);
  EXPECT_FLOAT_EQ(big[0], static_cast<float>(1.0 / (1.0 + std::exp(-1.0))));
}

TEST(DecisionScorer, CalibrateStatementIsTemperedSigmoid) {
  EXPECT_FLOAT_EQ(calibrate_statement(0.0f, 1.7f), 0.5f);
  EXPECT_FLOAT_EQ(calibrate_statement(3.0f, 2.0f), static_cast<float>(1.0 / (1.0 + std::exp(-1.5))));
  EXPECT_FLOAT_EQ(calibrate_statement(-3.0f, 2.0f), static_cast<float>(1.0 / (1.0 + std::exp(1.5))));
  // Huge logits saturate without overflow or NaN.
  EXPECT_EQ(calibrate_statement(1e30f, 1.0f), 1.0f);
  EXPECT_EQ(calibrate_statement(-1e30f, 1.0f), 0.0f);
}

TEST(DecisionScorer, ProbabilitiesAnswerOneOptionNoulWithASigmoid) {
  auto model = DecisionModel::from_parts(to_source(tiny_tensors()), tiny_encoder(), tiny_laya());
  ASSERT_TRUE(model.ok()) << model.error().message();
  const DecisionModel& m = **model;
  const std::vector<float> one = {0.8f};
  const float t = m.temperature(kNoul, 1);
  EXPECT_EQ(m.probabilities(kNoul, one), std::vector<float>{calibrate_statement(0.8f, t)});
  EXPECT_FLOAT_EQ(m.probabilities(kNoul, one)[0], static_cast<float>(1.0 / (1.0 + std::exp(-0.8 / t))));
  // Other shapes keep the tempered softmax: one choice option is certain, two noul options share.
  EXPECT_EQ(m.probabilities(0, one), std::vector<float>{1.0f});
  const std::vector<float> two = {0.8f, -0.2f};
  EXPECT_EQ(m.probabilities(kNoul, two), calibrate(two, m.temperature(kNoul, 2)));
  EXPECT_EQ(m.probabilities(0, two), calibrate(two, m.temperature(0, 2)));
  EXPECT_TRUE(m.probabilities(kNoul, {}).empty());
}

}  // namespace
}  // namespace tandem::models::decision::testing

// Determinism of the decision model on the CPU backend (scorer.md §5): every question alone, inside
// random batches, with 1, 2 or 3 threads, and alone again after other work gives the same bits.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/decision/decision_model.h"
#include "tests/engine/models/decision/decision_test_util.h"

namespace tandem::models::decision::testing {
namespace {

struct Question {
  std::vector<uint32_t> ids, markers;
  uint8_t qtype = 0;
};

struct Bits {
  std::vector<float> logits;
  std::array<float, 2> act{};
  bool operator==(const Bits& o) const {
    return logits.size() == o.logits.size() &&
           (logits.empty() || std::memcmp(logits.data(), o.logits.data(), logits.size() * sizeof(float)) == 0) &&
           std::memcmp(act.data(), o.act.data(), sizeof(act)) == 0;
  }
};

std::vector<Bits> score(Scorer& scorer, const std::vector<const Question*>& qs) {
  ir::Batch batch;
  for (const Question* q : qs) batch.add_sequence(q->ids, q->markers, q->qtype);
  auto out = scorer.score(batch);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message());
  std::vector<Bits> bits(qs.size());
  if (!out.ok()) return bits;
  for (size_t s = 0; s < qs.size(); ++s) {
    bits[s].logits.assign(out->logits.begin() + batch.pcu[s], out->logits.begin() + batch.pcu[s + 1]);
    bits[s].act = out->act[s];
  }
  return bits;
}

TEST(DecisionDeterminism, SameBitsAloneInBatchesAndForAnyThreadCount) {
  auto model = DecisionModel::from_parts(to_source(tiny_tensors()), tiny_encoder(), tiny_laya());
  ASSERT_TRUE(model.ok()) << model.error().message();
  std::mt19937 rng(11);
  std::vector<Question> pool(24);
  for (Question& q : pool) {
    const uint32_t len = static_cast<uint32_t>(rng() % 60);
    for (uint32_t i = 0; i < len; ++i) q.ids.push_back(5 + static_cast<uint32_t>(rng() % 90));
    for (uint32_t i = 0; i < len; i += 1 + static_cast<uint32_t>(rng() % 15)) q.markers.push_back(i);
    q.qtype = static_cast<uint8_t>(rng() % 3);
  }
  std::vector<std::unique_ptr<ir::Backend>> backends;
  std::vector<std::unique_ptr<Scorer>> scorers;
  for (size_t threads : {1, 2, 3}) {
    backends.push_back(cpu::make_cpu_backend(threads));
    auto s = Scorer::create(**model, *backends.back(), ir::BucketTable::defaults());
    ASSERT_TRUE(s.ok());
    scorers.push_back(std::move(s).value());
  }
  std::vector<Bits> alone;
  for (const Question& q : pool) alone.push_back(score(*scorers[0], {&q})[0]);
  for (int round = 0; round < 20; ++round) {
    std::vector<const Question*> batch;
    const size_t n = 1 + rng() % 12;
    for (size_t i = 0; i < n; ++i) batch.push_back(&pool[rng() % pool.size()]);
    Scorer& scorer = *scorers[static_cast<size_t>(round) % scorers.size()];
    const std::vector<Bits> got = score(scorer, batch);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(got[i] == alone[static_cast<size_t>(batch[i] - pool.data())])
          << "round " << round << ", position " << i << ", " << (round % 3) + 1 << " threads";
    }
  }
  for (size_t i = 0; i < pool.size(); ++i) EXPECT_TRUE(score(*scorers[2], {&pool[i]})[0] == alone[i]) << i;
}

}  // namespace
}  // namespace tandem::models::decision::testing

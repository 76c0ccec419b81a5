// Lossless at temperature 0 (dflash.md §1.6): for 100 random prompts, block sizes 2, 4, 8 and 16, and
// random v1 and v2 drafters, speculative output equals plain greedy decoding of the target token for
// token, with all requests in shared rounds and each alone. Random targets and drafters reject most
// drafts, so every round crops the KV cache: this is the test that catches cache bugs.
#include <gtest/gtest.h>

#include "tests/engine/spec/harness.h"

namespace tandem::spec {
namespace {

using tandem::testing::Rand;

std::vector<RequestParams> random_requests(uint32_t n, uint32_t vocab, uint64_t seed) {
  Rand r(seed);
  std::vector<RequestParams> out(n);
  for (RequestParams& p : out) {
    p.prompt.resize(1 + r.below(12));
    for (uint32_t& id : p.prompt) id = r.below(vocab - 1);  // the last id is the drafter's mask
    p.max_tokens = 1 + r.below(24);
    if (r.below(4) == 0) p.stop_ids = {r.below(vocab - 1), r.below(vocab - 1)};
  }
  return out;
}

class LosslessGreedyTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LosslessGreedyTest, SpeculativeEqualsPlainGreedyBatchedAndAlone) {
  const uint32_t version = GetParam();
  const tandem::testing::TinyTarget target = tandem::testing::random_target({}, 101);
  tandem::testing::DrafterShape shape;
  shape.version = version;
  shape.mask = 47;
  const tandem::testing::TinyDrafter drafter = tandem::testing::random_drafter(target.cfg, shape, 102);
  const std::vector<RequestParams> params = random_requests(100, 48, 103);
  testing::Harness h = testing::make_harness(target, &drafter, 100, 64);
  ASSERT_TRUE(h.drafter);
  const std::vector<Request> plain = testing::run_alone(h, params, false, {});
  uint32_t accepted = 0, rounds = 0, full = 0;
  for (uint32_t block : {2u, 4u, 8u, 16u}) {
    GenerateOptions opt;
    opt.block = block;
    const std::vector<Request> batched = testing::run_batched(h, params, true, opt);
    const std::vector<Request> alone = testing::run_alone(h, params, true, opt);
    ASSERT_EQ(batched.size(), params.size());
    ASSERT_EQ(alone.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(testing::generated(batched[i]), testing::generated(plain[i])) << "block " << block << ", prompt " << i;
      ASSERT_EQ(testing::generated(alone[i]), testing::generated(plain[i])) << "block " << block << ", prompt " << i;
      EXPECT_EQ(batched[i].finish, plain[i].finish) << "block " << block << ", prompt " << i;
      EXPECT_EQ(batched[i].accept_lengths, alone[i].accept_lengths) << "block " << block << ", prompt " << i;
      EXPECT_EQ(batched[i].drafted, batched[i].rounds * (block - 1));
      accepted += batched[i].accepted;
      rounds += batched[i].rounds;
      for (uint32_t len : batched[i].accept_lengths) full += len == block;
    }
  }
  // The comparison only means something if drafts were accepted somewhere and rejected mostly.
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, rounds);
  RecordProperty("accepted", static_cast<int>(accepted));
  RecordProperty("rounds", static_cast<int>(rounds));
  RecordProperty("full_blocks", static_cast<int>(full));
}

INSTANTIATE_TEST_SUITE_P(Drafters, LosslessGreedyTest, ::testing::Values(1u, 2u),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

TEST(LosslessGreedy, PlainDecodingIsTheSameBatchedAndAlone) {
  const tandem::testing::TinyTarget target = tandem::testing::random_target({}, 101);
  const std::vector<RequestParams> params = random_requests(40, 48, 104);
  testing::Harness h = testing::make_harness(target, nullptr, 40, 64);
  const std::vector<Request> batched = testing::run_batched(h, params, false, {});
  const std::vector<Request> alone = testing::run_alone(h, params, false, {});
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(testing::generated(batched[i]), testing::generated(alone[i])) << "prompt " << i;
    const auto& g = batched[i].generated();
    // Stops exactly at max_tokens or at the first stop id, which is kept.
    if (batched[i].finish == Finish::kLength) {
      EXPECT_EQ(g.size(), params[i].max_tokens);
    } else {
      ASSERT_EQ(batched[i].finish, Finish::kStop);
      const auto& stops = params[i].stop_ids;
      EXPECT_NE(std::find(stops.begin(), stops.end(), g.back()), stops.end());
    }
    for (size_t j = 0; j + 1 < g.size(); ++j) {
      const auto& stops = params[i].stop_ids;
      EXPECT_EQ(std::find(stops.begin(), stops.end(), g[j]), stops.end()) << "prompt " << i << " token " << j;
    }
  }
}

}  // namespace
}  // namespace tandem::spec

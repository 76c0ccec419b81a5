// The benchmarks' replay drafter (bench/spec_replay): with the real v1 and v2 drafters' settle and block
// runs under it, every round's acceptance length is the schedule's (so the measured mean is the chosen
// one: 1, 3, 6.5 and B), the output is plain greedy decoding token for token, and a replay of the wrong
// continuation still decodes losslessly (the target decides), accepting less.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "bench/spec_replay/replay.h"
#include "tests/engine/spec/harness.h"

namespace tandem::spec {
namespace {

using bench::ReplaySchedule;
using tandem::testing::Rand;

constexpr uint32_t kBlock = 8, kVocab = 48, kMask = 47, kRequests = 5;

std::vector<RequestParams> prompts(uint32_t max_tokens, uint64_t seed) {
  Rand r(seed);
  std::vector<RequestParams> out(kRequests);
  for (RequestParams& p : out) {
    p.prompt.resize(2 + r.below(10));
    for (uint32_t& id : p.prompt) id = r.below(kVocab - 1);  // the last id is the drafter's mask
    p.max_tokens = max_tokens;
  }
  return out;
}

// Prefill, then rounds of settle, the real draft, the replay's rewrite and verify until every request ends.
std::vector<Request> run_replay(testing::Harness& h, const std::vector<RequestParams>& params,
                                const std::vector<std::vector<uint32_t>>& continuations,
                                const ReplaySchedule& schedule, uint32_t& diverged) {
  std::vector<Request> requests;
  for (size_t i = 0; i < params.size(); ++i) {
    auto r = make_request(params[i], static_cast<uint32_t>(i), kVocab);
    EXPECT_TRUE(r.ok()) << r.error().message();
    requests.push_back(std::move(r).value());
  }
  std::vector<Request*> active;
  for (Request& r : requests) active.push_back(&r);
  Status st = prefill(*h.target, active);
  std::vector<Draft> drafts;
  std::vector<std::vector<uint32_t>> cont(continuations);
  diverged = 0;
  while (st.ok() && !active.empty()) {
    st = settle(*h.drafter, active);
    if (st.ok()) st = draft(*h.drafter, active, kBlock, VerifyMode::kMatch, drafts);
    if (st.ok()) {
      auto d = bench::replay_drafts(schedule, active, cont, kVocab, drafts);
      if (!d.ok()) {
        st = d.error();
        break;
      }
      diverged += *d;
    }
    if (st.ok()) st = verify(*h.target, active, drafts, VerifyMode::kMatch, false);
    // Drop finished requests with their continuations, keeping the two lists aligned.
    size_t k = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      if (!active[i]->active()) continue;
      active[k] = active[i];
      cont[k] = cont[i];
      ++k;
    }
    active.resize(k);
    cont.resize(k);
  }
  EXPECT_TRUE(st.ok()) << st.error().message();
  return requests;
}

class ReplayTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ReplayTest, AcceptsTheScheduleAndDecodesPlainGreedy) {
  const tandem::testing::TinyTarget target = tandem::testing::random_target({}, 201);
  tandem::testing::DrafterShape shape;
  shape.version = GetParam();
  shape.mask = kMask;
  shape.block = kBlock;
  const tandem::testing::TinyDrafter drafter = tandem::testing::random_drafter(target.cfg, shape, 202);
  testing::Harness h = testing::make_harness(target, &drafter, kRequests, 96);
  ASSERT_TRUE(h.drafter);
  for (double mean : {1.0, 3.0, 6.5, double{kBlock}}) {
    SCOPED_TRACE(::testing::Message() << "acceptance " << mean);
    // Four rounds commit floor(4 · mean) tokens after the prefill's one: every request ends in round 4.
    const auto max_tokens = static_cast<uint32_t>(1 + std::floor(4 * mean));
    const std::vector<RequestParams> params = prompts(max_tokens, 203);
    const std::vector<Request> plain = testing::run_batched(h, params, false, {});
    auto cont = bench::greedy_continuations(*h.target, params, max_tokens + kBlock);
    ASSERT_TRUE(cont.ok()) << cont.error().message();
    auto schedule = ReplaySchedule::make(mean, kBlock);
    ASSERT_TRUE(schedule.ok()) << schedule.error().message();
    uint32_t diverged = 0;
    const std::vector<Request> replay = run_replay(h, params, *cont, *schedule, diverged);
    ASSERT_EQ(replay.size(), params.size());
    EXPECT_EQ(diverged, 0u);
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(testing::generated(replay[i]), testing::generated(plain[i])) << "request " << i;
      ASSERT_EQ(replay[i].rounds, 4u) << "request " << i;
      const std::vector<uint32_t>& lengths = replay[i].accept_lengths;
      for (uint32_t k = 0; k < 4; ++k) EXPECT_EQ(lengths[k], schedule->length(k)) << "request " << i << " round " << k;
      const double measured = std::accumulate(lengths.begin(), lengths.end(), 0.0) / static_cast<double>(lengths.size());
      EXPECT_EQ(measured, mean) << "request " << i;
    }
  }
}

TEST_P(ReplayTest, AWrongContinuationStillDecodesLosslessly) {
  const tandem::testing::TinyTarget target = tandem::testing::random_target({}, 201);
  tandem::testing::DrafterShape shape;
  shape.version = GetParam();
  shape.mask = kMask;
  shape.block = kBlock;
  const tandem::testing::TinyDrafter drafter = tandem::testing::random_drafter(target.cfg, shape, 202);
  testing::Harness h = testing::make_harness(target, &drafter, kRequests, 96);
  ASSERT_TRUE(h.drafter);
  const std::vector<RequestParams> params = prompts(30, 204);
  // Each request replays the next one's continuation: the target refuses what its own picks contradict.
  auto cont = bench::greedy_continuations(*h.target, params, 30 + kBlock);
  ASSERT_TRUE(cont.ok()) << cont.error().message();
  std::rotate(cont->begin(), cont->begin() + 1, cont->end());
  auto schedule = ReplaySchedule::make(double{kBlock}, kBlock);
  ASSERT_TRUE(schedule.ok());
  const std::vector<Request> plain = testing::run_batched(h, params, false, {});
  uint32_t diverged = 0;
  const std::vector<Request> replay = run_replay(h, params, *cont, *schedule, diverged);
  uint32_t full = 0, rounds = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(testing::generated(replay[i]), testing::generated(plain[i])) << "request " << i;
    for (uint32_t len : replay[i].accept_lengths) full += len == kBlock;
    rounds += replay[i].rounds;
  }
  EXPECT_GT(diverged, 0u);
  EXPECT_LT(full, rounds);
}

INSTANTIATE_TEST_SUITE_P(Drafters, ReplayTest, ::testing::Values(1u, 2u),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

TEST(ReplaySchedule, AlternatesLengthsAroundAFractionalMean) {
  auto s = ReplaySchedule::make(6.5, 16);
  ASSERT_TRUE(s.ok());
  std::vector<uint32_t> got;
  for (uint32_t k = 0; k < 6; ++k) got.push_back(s->length(k));
  EXPECT_EQ(got, (std::vector<uint32_t>{6, 7, 6, 7, 6, 7}));
  auto q = ReplaySchedule::make(3.25, 8);
  ASSERT_TRUE(q.ok());
  got.clear();
  for (uint32_t k = 0; k < 8; ++k) got.push_back(q->length(k));
  EXPECT_EQ(got, (std::vector<uint32_t>{3, 3, 3, 4, 3, 3, 3, 4}));
  auto b = ReplaySchedule::make(16.0, 16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->length(0), 16u);
  EXPECT_EQ(b->length(7), 16u);
}

TEST(ReplaySchedule, RefusesAnAcceptanceOutsideTheBlock) {
  auto low = ReplaySchedule::make(0.5, 16);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().message(), "replay acceptance 0.5 must be in [1, 16] (the block size)");
  auto high = ReplaySchedule::make(9.0, 8);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.error().message(), "replay acceptance 9 must be in [1, 8] (the block size)");
  auto nan = ReplaySchedule::make(std::nan(""), 8);
  EXPECT_FALSE(nan.ok());
}

TEST(ReplayDrafts, RefusesAContinuationTooShortForTheRound) {
  auto s = ReplaySchedule::make(3.0, 4);
  ASSERT_TRUE(s.ok());
  auto r = make_request({{5, 6, 7}, 8, {}, {}}, 2, kVocab);
  ASSERT_TRUE(r.ok());
  r->tokens.push_back(9);  // prefilled: the bonus token at position 3
  r->start = 3;
  Request* ptr = &*r;
  std::vector<std::vector<uint32_t>> cont{{9, 10, 11}};  // positions 3..5; the round drafts 4..6
  std::vector<Draft> drafts(1);
  auto d = bench::replay_drafts(*s, {&ptr, 1}, cont, kVocab, drafts);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(),
            "replay of slot 2: the round drafts positions up to 6 but the continuation ends at 5");
}

}  // namespace
}  // namespace tandem::spec

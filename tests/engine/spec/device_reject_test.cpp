// Rejection sampling on the target's backend (graph.h RejectSample, issue 10) against the host rule, on
// the CPU backend, where both run engine/ir/reject.h: with the drafter's proposals left where its block
// run wrote them (spec::draft under TapRoute::kDevice: v1 samples its drafts in the block graph, v2's
// walk already does) and the verdict read from the target's ids, every request commits exactly the host
// path's tokens (proposals fetched, logits on the host), v1 and v2, with and without a top-p nucleus,
// and both kinds of verify outcome happen. A draft call larger than one block run is refused by name.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/ir/reject.h"
#include "tests/engine/spec/harness.h"

namespace tandem::spec {
namespace {

constexpr uint32_t kVocab = 8, kBlock = 4, kRequests = 48, kMaxTokens = 7;
const std::vector<uint32_t> kPrompt = {3, 1, 4};

struct Outcome {
  std::vector<std::vector<uint32_t>> tokens;
  uint32_t drafted = 0, accepted = 0;
};

// kRequests seeds through prefill, then rounds of draft, verify and settle (device proposals or host ones).
Outcome run(testing::Harness& h, SamplingParams sampling, TapRoute proposals) {
  std::vector<Request> reqs;
  for (uint32_t i = 0; i < kRequests; ++i) {
    SamplingParams sp = sampling;
    sp.seed = 1000 + i;
    auto r = make_request({kPrompt, kMaxTokens, {}, sp}, i, kVocab);
    EXPECT_TRUE(r.ok());
    reqs.push_back(std::move(r).value());
  }
  std::vector<Request*> active;
  for (Request& r : reqs) active.push_back(&r);
  EXPECT_TRUE(prefill(*h.target, active).ok());
  EXPECT_TRUE(settle(*h.drafter, active).ok());
  std::vector<Draft> drafts;
  for (int round = 0; round < 16 && !active.empty(); ++round) {
    Status st = draft(*h.drafter, active, kBlock, VerifyMode::kReject, drafts, proposals);
    EXPECT_TRUE(st.ok()) << st.error().message();
    if (!st.ok()) break;
    for (const Draft& d : drafts) {
      // Device proposals never come to the host; host ones always do.
      EXPECT_EQ(d.device.empty(), proposals == TapRoute::kHost);
      EXPECT_EQ(d.proposals.empty(), proposals == TapRoute::kDevice);
    }
    st = verify(*h.target, active, drafts, VerifyMode::kReject, false);
    EXPECT_TRUE(st.ok()) << st.error().message();
    if (!st.ok()) break;
    EXPECT_TRUE(settle(*h.drafter, active).ok());
    active.erase(std::remove_if(active.begin(), active.end(), [](const Request* r) { return !r->active(); }),
                 active.end());
  }
  EXPECT_TRUE(active.empty());
  Outcome out;
  for (const Request& r : reqs) {
    out.tokens.push_back(testing::generated(r));
    out.drafted += r.drafted;
    out.accepted += r.accepted;
  }
  return out;
}

struct Case {
  uint32_t version;
  SamplingParams sampling;
};

class DeviceReject : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceReject, CommitsTheHostRulesTokens) {
  tandem::testing::TargetShape ts;
  ts.vocab = kVocab;
  const auto target = tandem::testing::random_target(ts, 301);
  tandem::testing::DrafterShape ds;
  ds.version = GetParam().version;
  ds.mask = kVocab - 1;
  ds.top_k = 3;
  const auto drafter = tandem::testing::random_drafter(target.cfg, ds, 302);
  testing::Harness h = testing::make_harness(target, &drafter, kRequests, 16, /*host_logits=*/true);
  const Outcome device = run(h, GetParam().sampling, TapRoute::kDevice);
  const Outcome host = run(h, GetParam().sampling, TapRoute::kHost);
  ASSERT_EQ(device.tokens.size(), kRequests);
  for (uint32_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(device.tokens[i].size(), kMaxTokens) << "request " << i;
    EXPECT_EQ(device.tokens[i], host.tokens[i]) << "request " << i;
  }
  EXPECT_EQ(device.accepted, host.accepted);
  EXPECT_GT(device.accepted, 0u);
  EXPECT_LT(device.accepted, device.drafted);
}

INSTANTIATE_TEST_SUITE_P(Drafters, DeviceReject,
                         ::testing::Values(Case{1, {1.0f, 1.0f, 0}}, Case{1, {0.7f, 0.8f, 0}},
                                           Case{2, {1.0f, 1.0f, 0}}, Case{2, {0.7f, 0.8f, 0}}),
                         [](const auto& p) {
                           return "v" + std::to_string(p.param.version) +
                                  (p.param.sampling.top_p < 1.0f ? "_top_p" : "_full");
                         });

// Proposals stay valid only until the block plan runs again, so a call must fit one block run.
TEST(DeviceRejectLimits, ADraftLargerThanOneBlockRunIsRefused) {
  tandem::testing::TargetShape ts;
  ts.vocab = kVocab;
  const auto target = tandem::testing::random_target(ts, 301);
  tandem::testing::DrafterShape ds;
  ds.mask = kVocab - 1;
  const auto drafter = tandem::testing::random_drafter(target.cfg, ds, 302);
  const uint32_t most = 64;  // the embedded table's drafter buckets hold 64 blocks of 4 rows
  testing::Harness h = testing::make_harness(target, &drafter, most + 1, 16, /*host_logits=*/true);
  ASSERT_EQ(h.drafter->block_seqs(kBlock), most);
  std::vector<Request> reqs;
  for (uint32_t i = 0; i <= most; ++i) reqs.push_back(*make_request({kPrompt, 4, {}, {1.0f, 1.0f, i}}, i, kVocab));
  std::vector<Request*> ptrs;
  for (Request& r : reqs) ptrs.push_back(&r);
  ASSERT_TRUE(prefill(*h.target, ptrs).ok());
  ASSERT_TRUE(settle(*h.drafter, ptrs).ok());
  std::vector<Draft> drafts;
  const Status st = draft(*h.drafter, ptrs, kBlock, VerifyMode::kReject, drafts, TapRoute::kDevice);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("draft at most 64 at a time"), std::string::npos) << st.error().message();
  // The host route has no such limit.
  EXPECT_TRUE(draft(*h.drafter, ptrs, kBlock, VerifyMode::kReject, drafts, TapRoute::kHost).ok());
}

}  // namespace
}  // namespace tandem::spec

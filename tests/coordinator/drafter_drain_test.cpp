// Draining a drafter rank (coordinator/drafter_admin.h) over in-process target and drafter ranks running
// the shipped models/pylm with models/pylm-dflash: one of two drafters drained while its requests decode
// hands their contexts to the other as they are (counted, nothing rebuilt), every completion still equals
// plain decoding (greedy and seeded), the moved requests speculate on, the drained rank ends holding no
// context and later requests never draft on it; the refusals (not a drafter, unknown rank, twice, the
// last drafter in service) name the rank; forcing the last one out leaves its requests decoding plainly
// (degraded) until it is put back in service.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "coordinator/scheduler_metrics.h"
#include "tests/coordinator/round_job.h"

namespace tandem::coordinator {
namespace {

using namespace test;

// Long requests, greedy and seeded, that are still decoding when the test drains.
std::vector<GenerationRequest> long_requests(size_t n) {
  auto reqs = mixed_requests(n, 120);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].stop_ids.clear();
    reqs[i].speculative = true;
    reqs[i].sampling = i % 2 == 0 ? ir::SamplingParams{} : ir::SamplingParams{0.8f, 1.0f, 500 + i};
  }
  return reqs;
}

// Submits `reqs` and returns once each has had `events` events (its prefill and some rounds).
std::vector<std::shared_ptr<Outcome>> submit_and_wait_rounds(RoundScheduler& s, const std::vector<GenerationRequest>& reqs,
                                                             size_t events) {
  std::vector<std::shared_ptr<Outcome>> outs;
  for (const auto& g : reqs) outs.push_back(submit(s, g));
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  for (auto& o : outs) {
    for (;;) {
      {
        std::lock_guard lock(o->mutex);
        if (o->event_sizes.size() >= events || o->finished) break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "a request never got " << events << " events";
        return outs;
      }
      std::this_thread::sleep_for(2ms);
    }
  }
  return outs;
}

void expect_plain(const std::vector<std::shared_ptr<Outcome>>& outs, const std::vector<GenerationRequest>& reqs,
                  const std::string& what) {
  const auto want = plain_decoding(reqs);
  for (size_t i = 0; i < outs.size(); ++i) {
    wait(*outs[i]);
    EXPECT_EQ(outs[i]->tokens, want[i].tokens) << what << ": request " << i;
    EXPECT_EQ(outs[i]->last.finish, expected_finish(want[i].finish)) << what << ": request " << i;
  }
}

const DrafterView& drafter(const std::vector<DrafterView>& all, int rank) {
  for (const DrafterView& d : all) {
    if (d.rank == rank) return d;
  }
  static const DrafterView none;
  ADD_FAILURE() << "no drafter rank " << rank;
  return none;
}

ApiError refusal(const std::variant<DrainView, ApiError>& answer) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(answer)) << "accepted";
  return std::holds_alternative<ApiError>(answer) ? std::get<ApiError>(answer) : ApiError{};
}

TEST(DrafterDrain, ContextsMoveToTheOtherDrafterAndOutputStaysExact) {
  GenJob job(deployment(0, 4, 2));  // target rank 1, drafter ranks 2 and 3
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  RoundScheduler& s = job.scheduler();
  const auto reqs = long_requests(4);
  auto outs = submit_and_wait_rounds(s, reqs, 3);

  auto answer = s.drain(2, false);
  ASSERT_TRUE(std::holds_alternative<DrainView>(answer)) << std::get<ApiError>(answer).message;
  const DrainView& v = std::get<DrainView>(answer);
  EXPECT_EQ(v.target, 1);
  EXPECT_EQ(v.state, DrainState::kDraining);
  EXPECT_EQ(v.moving, 2u) << "the four requests were spread over both drafters";
  EXPECT_EQ(v.to, std::vector<int>{3});
  // Refusals while it drains.
  ApiError e = refusal(s.drain(2, false));
  EXPECT_EQ(e.status, 409u);
  EXPECT_EQ(e.message, "rank 2 (drafter, cpu) is draining already");
  e = refusal(s.drain(3, false));
  EXPECT_EQ(e.status, 409u);
  EXPECT_EQ(e.param, "rank");
  EXPECT_EQ(e.message.rfind("rank 3 (drafter, cpu) is the last drafter in service of rank 1 (target, cpu)", 0), 0u)
      << e.message;
  e = refusal(s.drain(1, false));
  EXPECT_EQ(e.status, 400u);
  EXPECT_EQ(e.message, "rank 1 (target, cpu) is not a drafter rank; only drafter ranks are drained");
  e = refusal(s.drain(4, true));
  EXPECT_EQ(e.status, 400u);
  EXPECT_EQ(e.message, "no rank 4 in this job (ranks 0..3)");
  EXPECT_EQ(refusal(s.undrain(3)).status, 409u);

  expect_plain(outs, reqs, "drained mid-load");
  const auto t = s.targets();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].drain_moves, 2u);
  EXPECT_EQ(t[0].handoffs, 2u) << "a context was rebuilt instead of handed over";
  EXPECT_EQ(t[0].moves, 0u);
  EXPECT_GT(t[0].moved_accepted, 0u) << "the moved requests did not speculate on their new drafter";
  const auto d = s.drafters();
  EXPECT_EQ(drafter(d, 2).drain, DrainState::kDrained);
  EXPECT_EQ(drafter(d, 2).slots_used, 0u);
  EXPECT_EQ(drafter(d, 2).drains, 1u);
  EXPECT_EQ(drafter(d, 3).drain, DrainState::kServing);
  EXPECT_EQ(s.problem(), "") << "a drained drafter beside one in service is no problem";
  const auto out = s.out_of_service();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rank, 2);
  EXPECT_EQ(out[0].state, DrainState::kDrained);

  // Later requests speculate on rank 3 only: rank 2 never reports a context again.
  const auto later = long_requests(3);
  std::vector<std::shared_ptr<Outcome>> more;
  for (const auto& g : later) more.push_back(submit(s, g));
  expect_plain(more, later, "after the drain");
  uint32_t accepted = 0;
  for (const auto& o : more) accepted += o->last.stats.accepted;
  EXPECT_GT(accepted, 0u);
  EXPECT_EQ(drafter(s.drafters(), 2).slots_used, 0u);
  const std::string m = render_scheduler_metrics(s);
  for (const char* line : {"tandem_gen_drafter_service{rank=\"2\",target=\"1\",state=\"drained\"} 1\n",
                           "tandem_gen_drafter_service{rank=\"3\",target=\"1\",state=\"serving\"} 1\n",
                           "tandem_gen_drafter_drains_total{rank=\"2\",target=\"1\"} 1\n",
                           "tandem_gen_drafter_drain_moves_total{rank=\"1\"} 2\n",
                           "tandem_gen_drafter_handoffs_total{rank=\"1\"} 2\n",
                           "tandem_gen_drafter_slots_used{rank=\"2\",target=\"1\"} 0\n"}) {
    EXPECT_NE(m.find(line), std::string::npos) << line << m;
  }

  auto back = s.undrain(2);
  ASSERT_TRUE(std::holds_alternative<DrainView>(back));
  EXPECT_EQ(std::get<DrainView>(back).state, DrainState::kServing);
  EXPECT_EQ(drafter(s.drafters(), 2).drain, DrainState::kServing);
  EXPECT_TRUE(s.out_of_service().empty());
  EXPECT_EQ(refusal(s.undrain(2)).message, "rank 2 (drafter, cpu) is in service (not drained)");
}

TEST(DrafterDrain, ForcingOutTheLastDrafterLeavesItsRequestsPlain) {
  GenJob job(deployment(0, 3, 1));  // target rank 1, drafter rank 2
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  RoundScheduler& s = job.scheduler();
  const auto reqs = long_requests(3);
  auto outs = submit_and_wait_rounds(s, reqs, 3);
  EXPECT_EQ(refusal(s.drain(2, false)).status, 409u);
  auto answer = s.drain(2, true);
  ASSERT_TRUE(std::holds_alternative<DrainView>(answer)) << std::get<ApiError>(answer).message;
  EXPECT_EQ(std::get<DrainView>(answer).moving, 3u);
  EXPECT_TRUE(std::get<DrainView>(answer).to.empty());
  expect_plain(outs, reqs, "forced out");
  EXPECT_EQ(s.problem(), "rank 2 (drafter, cpu) is drained: rank 1 (target, cpu) decodes its requests without it");
  EXPECT_EQ(drafter(s.drafters(), 2).slots_used, 0u);
  EXPECT_EQ(s.targets()[0].handoffs, 0u);

  auto plain = long_requests(1);
  plain[0].max_tokens = 24;
  auto o = submit(s, plain[0]);
  expect_plain({o}, plain, "while drained");
  EXPECT_EQ(o->last.stats.drafted, 0u) << "a request drafted on a drained drafter";

  ASSERT_TRUE(std::holds_alternative<DrainView>(s.undrain(2)));
  EXPECT_EQ(s.problem(), "");
  o = submit(s, plain[0]);
  expect_plain({o}, plain, "back in service");
  EXPECT_GT(o->last.stats.drafted, 0u) << "the drafter back in service did not draft";
}

}  // namespace
}  // namespace tandem::coordinator

// The round scheduler (coordinator/round_scheduler.h) over in-process generator ranks running the
// shipped models/pylm with models/pylm-dflash: concurrent requests through submit() equal plain decoding
// (spec::generate without a drafter, what `tandem generate` runs) token for token, greedy and seeded,
// with continuous batching past the slots, two target ranks, per-request `speculative: false` and a
// draft-length schedule; cancellation frees every slot on the rank; the admission limits answer 400/429.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "coordinator/scheduler_metrics.h"
#include "engine/io/safetensors.h"
#include "tests/coordinator/round_job.h"

namespace tandem::coordinator {
namespace {

using namespace test;

// Backend bytes of a checkpoint's tensors as FP32 (what the CPU backend uploads at least), from its
// safetensors header.
uint64_t f32_bytes(const std::string& dir) {
  auto st = io::SafetensorsFile::open(dir + "/model.safetensors");
  EXPECT_TRUE(st.ok()) << st.error().message();
  if (!st.ok()) return 0;
  uint64_t elements = 0;
  for (const auto& name : (*st)->names()) elements += (*st)->tensor(name)->numel();
  return elements * sizeof(float);
}

// KV bytes of `slots` slots of `capacity` positions over a config's layers (K and V, FP32).
uint64_t kv_bytes(const io::Qwen3Config& c, uint32_t slots, uint32_t capacity) {
  return uint64_t{slots} * capacity * c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim * sizeof(float);
}

TEST(RoundScheduler, GenerationRanksReportTheirMemory) {
  auto tcfg = io::load_qwen3_config(kTarget + "/config.json");
  auto dcfg = io::load_dflash_config(kDrafter + "/config.json");
  ASSERT_TRUE(tcfg.ok() && dcfg.ok());
  const uint64_t target_kv = kv_bytes(*tcfg, 3, 512), drafter_kv = kv_bytes(dcfg->layers, 3, 512);
  const uint64_t target_w = f32_bytes(kTarget), drafter_w = f32_bytes(kDrafter);
  ASSERT_GT(target_w, 0u);
  ASSERT_GT(drafter_w, 0u);
  auto d = deployment(1, 3, 1);  // rank 1 a generator, rank 2 a target, rank 3 its drafter
  for (config::Rank& r : d.ranks) {
    if (r.role == config::Role::kDrafter) r.target = 2;
  }
  GenJob job(d);
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  std::map<int, worker::Ready> info;
  for (const RankView& v : job.ranks().view()) info[v.rank] = v.info;
  EXPECT_EQ(info[1].state_bytes, target_kv + drafter_kv);
  EXPECT_EQ(info[2].state_bytes, target_kv);
  EXPECT_EQ(info[3].state_bytes, drafter_kv);
  EXPECT_GE(info[1].weight_bytes, target_w + drafter_w);
  EXPECT_GE(info[2].weight_bytes, target_w);
  EXPECT_GE(info[3].weight_bytes, drafter_w);
  EXPECT_LT(info[3].weight_bytes, info[1].weight_bytes);
  // The warm-up (generation.warm_up, on by default) lowered each rank's round plans before it was ready.
  EXPECT_GT(info[2].plan_bytes, 0u);
  EXPECT_GT(info[3].plan_bytes, 0u);
  EXPECT_GT(info[1].plan_bytes, info[3].plan_bytes);
}

TEST(RoundScheduler, WithoutTheWarmUpNoPlanIsLoweredBeforeTheFirstRound) {
  auto d = deployment(1, 3);
  d.generation.warm_up = false;
  GenJob job(d);
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  for (const RankView& v : job.ranks().view()) {
    if (v.rank == 1) {
      EXPECT_EQ(v.info.plan_bytes, 0u);
    }
  }
  expect_lossless(job.scheduler(), mixed_requests(3, 8));
}

TEST(RoundScheduler, ConcurrentRequestsEqualPlainDecodingPastTheSlots) {
  GenJob job(deployment(1, 3));
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  EXPECT_EQ(job.scheduler().vocab(), 6144u);
  EXPECT_EQ(job.scheduler().max_context(), 512u - 8 - 1);
  expect_lossless(job.scheduler(), mixed_requests(10, 40));
  const auto t = job.scheduler().targets();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].slots, 3u);
  EXPECT_EQ(t[0].slots_used, 0u);
  EXPECT_EQ(t[0].rank_slots_used, 0u);
  EXPECT_GT(t[0].rounds, 10u);
  EXPECT_EQ(job.scheduler().decoding(), 0u);
}

TEST(RoundScheduler, TwoTargetRanksShareTheLoad) {
  GenJob job(deployment(2, 2));
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  expect_lossless(job.scheduler(), mixed_requests(8, 24));
  const auto t = job.scheduler().targets();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_GT(t[0].tokens, 0u);
  EXPECT_GT(t[1].tokens, 0u);
}

TEST(RoundScheduler, TargetAndDrafterRanksOverTheDataPlane) {
  GenJob job(deployment(0, 3, 1));
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  expect_lossless(job.scheduler(), mixed_requests(7, 32));
  const auto t = job.scheduler().targets();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_GT(t[0].bytes_moved, 0u) << "no tap rows crossed the data plane";
  EXPECT_GT(t[0].drafter_us, 0u);
  EXPECT_GE(t[0].wait_us, t[0].drafter_us);
  // Overlap (on by default): the drafter guessed the next rounds and some came true.
  EXPECT_GT(t[0].guesses, 0u);
  EXPECT_GT(t[0].guesses_used, 0u);
  EXPECT_LE(t[0].guesses_used, t[0].guesses);
  const std::string m = render_scheduler_metrics(job.scheduler());
  EXPECT_NE(m.find(fmt::format("tandem_gen_guesses_total{{rank=\"1\"}} {}\n", t[0].guesses)), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("tandem_gen_guesses_used_total{{rank=\"1\"}} {}\n", t[0].guesses_used)),
            std::string::npos)
      << m;
  const auto d = job.scheduler().drafters();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].rank, 2);
  EXPECT_EQ(d[0].target, 1);
  EXPECT_FALSE(d[0].dead);
  EXPECT_EQ(job.scheduler().problem(), "");
}

// generation.overlap: false: every round waits for its drafts, no guess is made; the same tokens.
TEST(RoundScheduler, TargetAndDrafterRanksWithoutOverlap) {
  config::Deployment d = deployment(0, 3, 1);
  d.generation.overlap = false;
  GenJob job(d);
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  expect_lossless(job.scheduler(), mixed_requests(7, 32));
  const auto t = job.scheduler().targets();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_GT(t[0].accepted, 0u);
  EXPECT_EQ(t[0].guesses, 0u);
  EXPECT_EQ(t[0].guesses_used, 0u);
}

// Cancelled requests free their drafter context too: after two cancels and one finished request, the
// drafter rank holds only that one (its last round's figure), and the metrics say so.
TEST(RoundScheduler, CancelFreesTheDrafterContext) {
  GenJob job(deployment(0, 3, 1));
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  auto reqs = mixed_requests(3, 200);
  for (auto& r : reqs) {
    r.stop_ids.clear();
    r.speculative = true;
    r.sampling = {};
  }
  std::shared_ptr<GenerationHandle> h0, h1;
  auto cancel_after_two = [](std::shared_ptr<GenerationHandle>* h) {
    return [h](Outcome& o) {
      if (o.event_sizes.size() == 3 && o.last.finish == GenerationFinish::kNone) (*h)->cancel();
    };
  };
  auto o0 = submit(job.scheduler(), reqs[0], &h0, cancel_after_two(&h0));
  auto o1 = submit(job.scheduler(), reqs[1], &h1, cancel_after_two(&h1));
  wait(*o0);
  wait(*o1);
  EXPECT_EQ(o0->last.finish, GenerationFinish::kCancelled);
  EXPECT_EQ(o1->last.finish, GenerationFinish::kCancelled);
  reqs[2].max_tokens = 24;
  auto o2 = submit(job.scheduler(), reqs[2]);
  wait(*o2);
  EXPECT_EQ(o2->tokens, plain_decoding({reqs[2]})[0].tokens);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline && job.scheduler().targets()[0].rank_slots_used != 0) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(job.scheduler().targets()[0].rank_slots_used, 0u);
  ASSERT_EQ(job.scheduler().drafters().size(), 1u);
  EXPECT_EQ(job.scheduler().drafters()[0].slots_used, 1u) << "the cancelled requests' contexts are still held";
  const std::string m = render_scheduler_metrics(job.scheduler());
  EXPECT_NE(m.find("tandem_gen_kv_slots_used{rank=\"1\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_gen_kv_slots{rank=\"1\"} 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_gen_drafter_slots_used{rank=\"2\",target=\"1\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_gen_drafter_up{rank=\"2\",target=\"1\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_gen_queue_requests 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_gen_round_seconds_total{rank=\"1\",phase=\"verify\"}"), std::string::npos) << m;
  // The CPU backend has no device: nothing is copied to a host (cuda_served_round_test counts the GPU's).
  EXPECT_NE(m.find("tandem_gen_device_to_host_bytes_total{rank=\"1\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tandem_gen_drafter_device_to_host_bytes_total{rank=\"1\"} 0\n"), std::string::npos) << m;
}

TEST(RoundScheduler, TwoDraftersShareTheirTarget) {
  GenJob job(deployment(0, 4, 2));
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  expect_lossless(job.scheduler(), mixed_requests(6, 24));
}

TEST(RoundScheduler, DraftScheduleTurnsSpeculationOffAtLargeBatches) {
  config::Deployment d = deployment(1, 4);
  // One or two requests: blocks of 4; three and more: plain decoding.
  d.generation.draft_schedule = {{1, 4}, {3, 0}};
  GenJob job(d);
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  auto reqs = mixed_requests(4, 30);
  // They finish one after another, so the batch shrinks to 2 and 1 and speculation comes back.
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].speculative = true;
    reqs[i].stop_ids.clear();
    reqs[i].max_tokens = 8 + 16 * static_cast<uint32_t>(i);
  }
  const auto want = plain_decoding(reqs);
  std::vector<std::shared_ptr<Outcome>> outs;
  for (const auto& g : reqs) outs.push_back(submit(job.scheduler(), g));
  for (size_t i = 0; i < reqs.size(); ++i) {
    wait(*outs[i]);
    EXPECT_EQ(outs[i]->tokens, want[i].tokens) << "request " << i;
    // Drafts of 3 (block 4) when it drafted at all.
    EXPECT_LE(outs[i]->last.stats.accepted_per_position.size(), 3u);
  }
  // All four decode together at first (plain), so some rounds drafted nothing.
  uint32_t rounds = 0, drafted = 0;
  for (const auto& o : outs) {
    rounds += o->last.stats.rounds;
    drafted += o->last.stats.drafted;
  }
  EXPECT_LT(drafted, rounds * 3);
  EXPECT_GT(drafted, 0u) << "the last requests decoding alone should draft";
}

TEST(RoundScheduler, CancelFreesTheSlotsOnTheRank) {
  GenJob job(deployment(1, 2));
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  auto reqs = mixed_requests(4, 200);
  for (auto& r : reqs) r.stop_ids.clear();  // long: they are still decoding when cancelled
  // 0 cancels itself from its callback after its second event; 1 runs to the end; 2 waits in the queue
  // behind them and is cancelled there; 3 is cancelled from the test thread while decoding.
  std::shared_ptr<GenerationHandle> h0, h2, h3;
  std::atomic<bool> three_decoding{false};
  auto o0 = submit(job.scheduler(), reqs[0], &h0, [&h0](Outcome& o) {
    if (o.event_sizes.size() == 2 && o.last.finish == GenerationFinish::kNone) h0->cancel();
  });
  auto o1 = submit(job.scheduler(), reqs[1]);
  auto o2 = submit(job.scheduler(), reqs[2], &h2);
  h2->cancel();
  wait(*o0);
  EXPECT_EQ(o0->last.finish, GenerationFinish::kCancelled);
  EXPECT_EQ(o2->done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(o2->last.finish, GenerationFinish::kCancelled);
  EXPECT_TRUE(o2->tokens.empty());
  auto o3 = submit(job.scheduler(), reqs[3], &h3, [&three_decoding](Outcome&) { three_decoding = true; });
  while (!three_decoding) std::this_thread::sleep_for(1ms);
  h3->cancel();
  wait(*o3);
  EXPECT_EQ(o3->last.finish, GenerationFinish::kCancelled);
  wait(*o1);
  EXPECT_EQ(o1->last.finish, GenerationFinish::kLength);
  EXPECT_EQ(o1->tokens, plain_decoding({reqs[1]})[0].tokens);
  // A cancelled request's tokens so far are a prefix of its plain decoding.
  const auto want0 = plain_decoding({reqs[0]})[0].tokens;
  ASSERT_LT(o0->tokens.size(), want0.size());
  EXPECT_TRUE(std::equal(o0->tokens.begin(), o0->tokens.end(), want0.begin()));
  // The releases reach the rank with the next round: nothing holds a slot there afterwards.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline &&
         (job.scheduler().targets()[0].rank_slots_used != 0 || job.scheduler().decoding() != 0)) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(job.scheduler().decoding(), 0u);
  EXPECT_EQ(job.scheduler().targets()[0].rank_slots_used, 0u);
  h0->cancel();  // after the end: nothing happens
}

TEST(RoundScheduler, AdmissionLimits) {
  config::Deployment d = deployment(1, 1);
  d.generation.max_queue_requests = 2;
  GenJob job(d);
  ASSERT_TRUE(job.ready().ok()) << job.ready().error().message();
  RoundScheduler& s = job.scheduler();
  GenerationRequest empty;
  auto r = s.submit(empty, {});
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400u);
  EXPECT_EQ(std::get<ApiError>(r).message, "the prompt holds no tokens");
  GenerationRequest bad_id;
  bad_id.prompt = {1, 6144};
  r = s.submit(bad_id, {});
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).message, "prompt[1]: token id 6144 is outside the vocabulary of 6144");
  EXPECT_EQ(std::get<ApiError>(r).param, "prompt");
  // Too long for a slot: failed alone, the rank goes on.
  GenerationRequest too_long;
  too_long.prompt = eval_prompts()[0];
  too_long.max_tokens = 400;
  auto o = submit(s, too_long);
  wait(*o);
  EXPECT_EQ(o->last.finish, GenerationFinish::kFailed);
  ASSERT_TRUE(o->last.error.has_value());
  EXPECT_EQ(o->last.error->status, 400u);
  EXPECT_EQ(o->last.error->message,
            "a prompt of 171 tokens and max_tokens 400 exceed the 503 positions rank 1 (generator, cpu) holds per "
            "request");
  // A full queue: one decoding, two waiting, the fourth refused with 429.
  auto reqs = mixed_requests(3, 60);
  std::vector<std::shared_ptr<Outcome>> outs;
  outs.push_back(submit(s, reqs[0]));
  while (s.decoding() == 0) std::this_thread::sleep_for(1ms);
  outs.push_back(submit(s, reqs[1]));
  outs.push_back(submit(s, reqs[2]));
  r = s.submit(reqs[0], {});
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 429u);
  EXPECT_EQ(std::get<ApiError>(r).message,
            "the generation queue is full (2 requests waiting, generation.max_queue_requests)");
  for (auto& out : outs) wait(*out);
}

}  // namespace
}  // namespace tandem::coordinator

// The round scheduler (coordinator/round_scheduler.h) over in-process generator ranks running the
// shipped models/pylm with models/pylm-dflash: concurrent requests through submit() equal plain decoding
// (spec::generate without a drafter, what `tandem generate` runs) token for token, greedy and seeded,
// with continuous batching past the slots, two target ranks, per-request `speculative: false` and a
// draft-length schedule; cancellation frees every slot on the rank; the admission limits answer 400/429.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "coordinator/control_plane.h"
#include "coordinator/scheduler_metrics.h"
#include "coordinator/round_scheduler.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/io/hf_config.h"
#include "engine/io/safetensors.h"
#include "engine/spec/spec.h"
#include "worker/worker.h"

namespace tandem::coordinator {
namespace {

using namespace std::chrono_literals;

const std::string kTarget = TANDEM_SOURCE_DIR "/models/pylm";
const std::string kDrafter = TANDEM_SOURCE_DIR "/models/pylm-dflash";
constexpr uint32_t kEos = 0;  // models/pylm's eos_token_id

std::vector<std::vector<uint32_t>> eval_prompts() {
  auto ev = io::read_json_file(kDrafter + "/eval.json");
  EXPECT_TRUE(ev.ok()) << ev.error().message();
  if (!ev.ok()) return {};
  return ev->at("prompts").get<std::vector<std::vector<uint32_t>>>();
}

// `generators` generator ranks, or with `split` one target rank (rank 1) and `split` drafter ranks.
config::Deployment deployment(int generators, uint32_t slots, int split = 0) {
  config::Deployment d;
  d.origin = "test.yaml";
  d.ranks.push_back(config::Rank{config::Role::kCoordinator, {}});
  for (int i = 0; i < generators; ++i) {
    config::Rank r{config::Role::kGenerator, {}};
    r.backend.threads = 1;
    d.ranks.push_back(r);
  }
  if (split > 0) {
    config::Rank t{config::Role::kTarget, {}};
    t.backend.threads = 1;
    d.ranks.push_back(t);
    for (int i = 0; i < split; ++i) {
      config::Rank r{config::Role::kDrafter, {}};
      r.backend.threads = 1;
      r.target = 1;
      d.ranks.push_back(r);
    }
  }
  d.models[config::Role::kTarget] = config::Model{"pylm", kTarget, "", ""};
  d.models[config::Role::kDrafter] = config::Model{"pylm-dflash", kDrafter, "", ""};
  d.generation.slots = slots;
  d.generation.kv_capacity = 512;
  d.generation.block_size = 8;
  d.health.heartbeat_ms = 50;
  d.health.dead_after_ms = 5000;
  d.health.startup_timeout_s = 120;
  return d;
}

// A coordinator (this thread, then a "serve" thread) and generator ranks on threads, over one
// in-process world.
class GenJob {
 public:
  explicit GenJob(config::Deployment deployment) : d_(std::move(deployment)) {
    const int size = static_cast<int>(d_.ranks.size());
    world_ = worker::make_local_world(size);
    for (int r = 1; r < size; ++r) {
      auto topo = worker::Topology::make(d_, r, size);
      EXPECT_TRUE(topo.ok());
      workers_.push_back(std::async(std::launch::async, [this, r, topo = std::move(topo).value()] {
        // One factory per rank, made on its thread from its own Topology.
        worker::RankFactory factory = worker::generation_rank_factory(d_, topo);
        return worker::run_worker(*world_[static_cast<size_t>(r)], topo, d_.health, factory);
      }));
    }
    auto topo = worker::Topology::make(d_, 0, size);
    EXPECT_TRUE(topo.ok());
    topo_.emplace(std::move(topo).value());
    ranks_ = std::make_unique<RankTable>(*topo_, 4);
    control_ = std::make_unique<ControlPlane>(*world_[0], *topo_, d_.health, *ranks_, metrics_);
    scheduler_ = std::make_unique<RoundScheduler>(d_, *topo_, outbox_);
    control_->set_round_events(scheduler_.get());
    ready_ = control_->wait_ready(stop_);
    if (ready_.ok()) serve_ = std::thread([this] { control_->serve(outbox_, stop_); });
  }
  ~GenJob() {
    stop_ = true;
    if (serve_.joinable()) serve_.join();
    scheduler_->stop(unavailable("the test is over"));
    EXPECT_TRUE(control_->shutdown_workers(10s));
    for (auto& w : workers_) EXPECT_EQ(w.get(), 0);
  }
  const Status& ready() const { return ready_; }
  RoundScheduler& scheduler() { return *scheduler_; }
  const RankTable& ranks() const { return *ranks_; }

 private:
  config::Deployment d_;
  std::vector<std::unique_ptr<worker::Transport>> world_;
  std::vector<std::future<int>> workers_;
  std::optional<worker::Topology> topo_;
  Metrics metrics_;
  std::unique_ptr<RankTable> ranks_;
  std::unique_ptr<ControlPlane> control_;
  worker::BlockingQueue<Dispatch> outbox_;
  std::unique_ptr<RoundScheduler> scheduler_;
  std::atomic<bool> stop_{false};
  Status ready_ = ok_status();
  std::thread serve_;
};

// What one request received: every event's tokens in order, and the final event.
struct Outcome {
  std::mutex mutex;
  std::vector<uint32_t> tokens;
  std::vector<size_t> event_sizes;
  GenerationEvent last;
  std::promise<void> done;
  bool finished = false;
};

std::shared_ptr<Outcome> submit(RoundScheduler& s, GenerationRequest req,
                                std::shared_ptr<GenerationHandle>* handle = nullptr,
                                std::function<void(Outcome&)> on_event = {}) {
  auto out = std::make_shared<Outcome>();
  auto r = s.submit(std::move(req), [out, on_event](const GenerationEvent& ev) {
    std::lock_guard lock(out->mutex);
    EXPECT_FALSE(out->finished) << "an event after the final one";
    out->tokens.insert(out->tokens.end(), ev.tokens.begin(), ev.tokens.end());
    out->event_sizes.push_back(ev.tokens.size());
    out->last = ev;
    if (on_event) on_event(*out);
    if (ev.finish != GenerationFinish::kNone) {
      out->finished = true;
      out->done.set_value();
    }
  });
  if (auto* h = std::get_if<std::shared_ptr<GenerationHandle>>(&r)) {
    if (handle) *handle = *h;
  } else {
    ADD_FAILURE() << "refused: " << std::get<ApiError>(r).message;
    out->finished = true;
    out->done.set_value();
  }
  return out;
}

void wait(Outcome& o) {
  ASSERT_EQ(o.done.get_future().wait_for(300s), std::future_status::ready) << "the request never finished";
}

struct Plain {
  std::vector<uint32_t> tokens;
  spec::Finish finish = spec::Finish::kNone;
};

// Plain decoding of each request alone: the reference every completion must equal.
std::vector<Plain> plain_decoding(const std::vector<GenerationRequest>& reqs) {
  auto backend = cpu::make_cpu_backend(1);
  auto target = models::qwen3::Target::open(*backend, kTarget, {{}, 1, 512, nullptr});
  EXPECT_TRUE(target.ok()) << target.error().message();
  std::vector<Plain> out;
  for (const GenerationRequest& g : reqs) {
    auto r = spec::make_request({g.prompt, g.max_tokens, g.stop_ids, g.sampling}, 0, (*target)->vocab());
    EXPECT_TRUE(r.ok());
    std::vector<spec::Request> one{std::move(r).value()};
    Status s = spec::generate(**target, nullptr, one, {});
    EXPECT_TRUE(s.ok()) << s.error().message();
    out.push_back({std::vector<uint32_t>(one[0].generated().begin(), one[0].generated().end()), one[0].finish});
  }
  return out;
}

GenerationFinish expected_finish(spec::Finish f) {
  return f == spec::Finish::kStop ? GenerationFinish::kStop : GenerationFinish::kLength;
}

std::vector<GenerationRequest> mixed_requests(size_t n, uint32_t max_tokens) {
  const auto prompts = eval_prompts();
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < n; ++i) {
    GenerationRequest g;
    g.prompt = prompts[i % prompts.size()];
    if (i >= prompts.size()) g.prompt.resize(g.prompt.size() / 2);  // a different prompt again
    g.max_tokens = max_tokens;
    g.stop_ids = {kEos};
    if (i % 3 == 1) g.sampling = {0.8f, 0.95f, 1000 + i};
    if (i % 4 == 3) g.speculative = false;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

void expect_lossless(RoundScheduler& s, const std::vector<GenerationRequest>& reqs) {
  const auto want = plain_decoding(reqs);
  std::vector<std::shared_ptr<Outcome>> outs;
  for (const auto& g : reqs) outs.push_back(submit(s, g));
  uint32_t accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    wait(*outs[i]);
    EXPECT_EQ(outs[i]->tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(outs[i]->last.finish, expected_finish(want[i].finish)) << "request " << i;
    const SpeculativeStats& st = outs[i]->last.stats;
    if (!reqs[i].speculative) {
      EXPECT_EQ(st.drafted, 0u) << "request " << i << " asked for plain decoding";
    }
    accepted += st.accepted;
    uint32_t per_position = 0;
    for (uint32_t a : st.accepted_per_position) per_position += a;
    EXPECT_EQ(per_position, st.accepted) << "request " << i;
    // One event per round at most: a round commits accepted + 1 tokens.
    EXPECT_LE(outs[i]->event_sizes.size(), st.rounds + 2) << "request " << i;
  }
  EXPECT_GT(accepted, 0u) << "the drafter never landed a draft: speculation did not run";
}

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

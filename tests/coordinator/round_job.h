// The harness of the round scheduler tests (round_scheduler_test.cpp, drafter_drain_test.cpp): a
// coordinator and generation ranks on threads over one in-process world running the shipped models/pylm
// with models/pylm-dflash, requests submitted through the RoundScheduler, and plain decoding (what
// `tandem generate` runs) as the reference every completion must equal.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "coordinator/control_plane.h"
#include "coordinator/round_scheduler.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/io/hf_config.h"
#include "engine/spec/spec.h"
#include "worker/worker.h"

namespace tandem::coordinator::test {

using namespace std::chrono_literals;

inline const std::string kTarget = TANDEM_SOURCE_DIR "/models/pylm";
inline const std::string kDrafter = TANDEM_SOURCE_DIR "/models/pylm-dflash";
inline constexpr uint32_t kEos = 0;  // models/pylm's eos_token_id

inline std::vector<std::vector<uint32_t>> eval_prompts() {
  auto ev = io::read_json_file(kDrafter + "/eval.json");
  EXPECT_TRUE(ev.ok()) << ev.error().message();
  if (!ev.ok()) return {};
  return ev->at("prompts").get<std::vector<std::vector<uint32_t>>>();
}

// `generators` generator ranks, or with `split` one target rank (rank 1) and `split` drafter ranks.
inline config::Deployment deployment(int generators, uint32_t slots, int split = 0) {
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

inline std::shared_ptr<Outcome> submit(RoundScheduler& s, GenerationRequest req,
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

inline void wait(Outcome& o) {
  ASSERT_EQ(o.done.get_future().wait_for(300s), std::future_status::ready) << "the request never finished";
}

struct Plain {
  std::vector<uint32_t> tokens;
  spec::Finish finish = spec::Finish::kNone;
};

// Plain decoding of each request alone on `backend`: the reference every completion must equal.
inline std::vector<Plain> plain_decoding(const std::vector<GenerationRequest>& reqs, ir::Backend& backend) {
  auto target = models::qwen3::Target::open(backend, kTarget, {{}, 1, 512, nullptr});
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
// ... on the CPU backend.
inline std::vector<Plain> plain_decoding(const std::vector<GenerationRequest>& reqs) {
  auto backend = cpu::make_cpu_backend(1);
  return plain_decoding(reqs, *backend);
}

inline GenerationFinish expected_finish(spec::Finish f) {
  return f == spec::Finish::kStop ? GenerationFinish::kStop : GenerationFinish::kLength;
}

inline std::vector<GenerationRequest> mixed_requests(size_t n, uint32_t max_tokens) {
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

inline void expect_lossless(RoundScheduler& s, const std::vector<GenerationRequest>& reqs) {
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

}  // namespace tandem::coordinator::test

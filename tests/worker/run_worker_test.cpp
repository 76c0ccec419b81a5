// The worker rank loop (worker/worker.h) over an in-process transport, with this test as the
// coordinator: ready and load-failure reports, batches in and results out in order, heartbeats while a
// batch runs, shutdown with a goodbye, exit when the coordinator falls silent. Also Topology.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "worker/worker.h"

namespace tandem::worker {
namespace {

using namespace std::chrono_literals;

// Logits are a function of each marker's token and act of the sequence, so answers are checkable.
class FakeRunner final : public BatchRunner {
 public:
  explicit FakeRunner(std::chrono::milliseconds delay) : delay_(delay) {}
  Result<RunOutput> run(const ir::Batch& b) override {
    std::this_thread::sleep_for(delay_);
    if (!b.ids.empty() && b.ids[0] == 666) return Error(ErrorKind::kInvalidArgument, "the devil's batch");
    RunOutput out;
    out.bucket = {64, 16, 64};
    for (uint32_t s = 0; s < b.seqs(); ++s) {
      for (uint32_t m = b.pcu[s]; m < b.pcu[s + 1]; ++m) out.logits.push_back(0.5f * float(b.ids[b.cu[s] + b.picks[m]]));
      out.act.push_back({float(b.seq_len(s)), float(b.qtype[s])});
    }
    return out;
  }
  RunnerInfo info() const override { return {"scorer", "fake", "cpu", "test", 10, 20, 1000}; }

 private:
  std::chrono::milliseconds delay_;
};

config::Deployment two_rank_deployment() {
  config::Deployment d;
  d.origin = "test.yaml";
  d.ranks = {config::Rank{config::Role::kCoordinator, {}}, config::Rank{config::Role::kScorer, {}}};
  d.health.heartbeat_ms = 20;
  d.health.dead_after_ms = 300;
  d.health.startup_timeout_s = 5;
  return d;
}

// Rank 1 of `d` as a worker on its own thread over `world` (world[0] is the test's coordinator side),
// loading with `factory`. A deployment that does not fit the world fails the test and gives a future
// that is never ready.
std::future<int> start_worker(std::vector<std::unique_ptr<Transport>>& world, const config::Deployment& d,
                              RunnerFactory factory) {
  auto topo = Topology::make(d, 1, static_cast<int>(world.size()));
  EXPECT_TRUE(topo.ok()) << (topo.ok() ? std::string() : topo.error().message());
  if (!topo.ok()) return std::async(std::launch::deferred, [] { return -1; });
  return std::async(std::launch::async, [&world, topo = std::move(topo).value(), health = d.health,
                                         factory = std::move(factory)] {
    return run_worker(*world[1], topo, health, factory);
  });
}

// A factory of FakeRunners that take `delay` per batch.
RunnerFactory fake_runner(std::chrono::milliseconds delay) {
  return [delay] { return Result<std::unique_ptr<BatchRunner>>(std::make_unique<FakeRunner>(delay)); };
}

// The coordinator side of the conversation; it heartbeats while it waits unless told to keep quiet.
struct Coordinator {
  Transport& t;
  bool quiet = false;
  Message expect(Tag want_tag, std::chrono::milliseconds within = 3000ms) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    auto next_beat = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < deadline) {
      if (!quiet && std::chrono::steady_clock::now() >= next_beat) {
        send(Heartbeat{0});
        next_beat += 20ms;
      }
      auto in = t.poll();
      EXPECT_TRUE(in.ok());
      if (in.ok() && in->has_value()) {
        Incoming& msg = **in;
        if (msg.tag == Tag::kWorkerBeat) {
          ++beats;
          if (want_tag != Tag::kWorkerBeat) continue;
        }
        auto m = decode(msg.bytes, msg.tag);
        EXPECT_TRUE(m.ok()) << m.error().message();
        EXPECT_EQ(msg.tag, want_tag);
        return std::move(m).value();
      }
      std::this_thread::sleep_for(1ms);
    }
    ADD_FAILURE() << "nothing arrived on tag " << to_string(want_tag);
    return Bye{};
  }
  void send(const Message& m) { ASSERT_TRUE(t.send(1, tag_for(m, true), encode(m)).ok()); }
  int beats = 0;
};

TEST(RunWorker, ReadyBatchesHeartbeatsShutdown) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  auto result = start_worker(world, d, fake_runner(150ms));
  Coordinator c{*world[0]};
  auto ready = c.expect(Tag::kStatus);
  ASSERT_TRUE(std::holds_alternative<Ready>(ready));
  EXPECT_EQ(std::get<Ready>(ready).model, "fake");
  EXPECT_EQ(std::get<Ready>(ready).vocab, 1000u);

  for (uint64_t id = 1; id <= 3; ++id) {
    RunBatch rb{id, {}};
    rb.batch.add_sequence({10, 20, 30}, {0, 2}, 1);
    rb.batch.add_sequence({7, uint32_t(id)}, {1}, 2);
    c.send(rb);
    c.send(Heartbeat{id});
  }
  c.send(RunBatch{4, {}});  // an empty batch is a batch too
  RunBatch devil{5, {}};
  devil.batch.add_sequence({666}, {}, 0);
  c.send(devil);
  for (uint64_t id = 1; id <= 3; ++id) {
    auto m = c.expect(Tag::kResult);
    ASSERT_TRUE(std::holds_alternative<BatchDone>(m));
    const auto& done = std::get<BatchDone>(m);
    EXPECT_EQ(done.batch_id, id);  // in order
    EXPECT_EQ(done.logits, (std::vector<float>{5.0f, 15.0f, 0.5f * float(id)}));
    ASSERT_EQ(done.act.size(), 2u);
    EXPECT_EQ(done.act[0], (std::array<float, 2>{3.0f, 1.0f}));
    EXPECT_EQ(done.act[1], (std::array<float, 2>{2.0f, 2.0f}));
    EXPECT_GE(done.run_us, 100000u);
    c.send(Heartbeat{10 + id});
  }
  auto empty = c.expect(Tag::kResult);
  ASSERT_TRUE(std::holds_alternative<BatchDone>(empty));
  EXPECT_TRUE(std::get<BatchDone>(empty).logits.empty());
  auto failed = c.expect(Tag::kResult);
  ASSERT_TRUE(std::holds_alternative<BatchFailed>(failed));
  EXPECT_EQ(std::get<BatchFailed>(failed).batch_id, 5u);
  EXPECT_NE(std::get<BatchFailed>(failed).message.find("the devil's batch"), std::string::npos);
  // Five batches of 150 ms at a 20 ms beat: the compute thread never held the heartbeats back.
  EXPECT_GE(c.beats, 20);
  c.send(Shutdown{});
  auto bye = c.expect(Tag::kStatus);
  EXPECT_TRUE(std::holds_alternative<Bye>(bye));
  ASSERT_EQ(result.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(result.get(), 0);
}

TEST(RunWorker, LoadFailureIsReportedWithItsReason) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  auto result = start_worker(world, d, []() -> Result<std::unique_ptr<BatchRunner>> {
    return Error(ErrorKind::kShape, "tensor encoder.final_norm.weight: shape [3] expected [128]");
  });
  Coordinator c{*world[0]};
  auto m = c.expect(Tag::kStatus);
  ASSERT_TRUE(std::holds_alternative<LoadFailed>(m));
  EXPECT_NE(std::get<LoadFailed>(m).message.find("encoder.final_norm.weight"), std::string::npos);
  c.send(Shutdown{});
  ASSERT_EQ(result.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(result.get(), 0);
}

TEST(RunWorker, ExitsWhenTheCoordinatorFallsSilent) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  const auto start = std::chrono::steady_clock::now();
  auto result = start_worker(world, d, fake_runner(0ms));
  Coordinator c{*world[0], true};
  c.send(Heartbeat{1});  // one word, then silence
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(result.get(), 1);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2000ms);
}

TEST(RunWorker, AbortEndsItAtOnceEvenWhileLoading) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  auto result = start_worker(world, d, []() -> Result<std::unique_ptr<BatchRunner>> {
    std::this_thread::sleep_for(2s);  // a long load the abort must not wait for
    return std::unique_ptr<BatchRunner>(std::make_unique<FakeRunner>(0ms));
  });
  Coordinator c{*world[0]};
  c.send(Abort{"rank 2 failed to load"});
  ASSERT_EQ(result.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(result.get(), 1);
}

// A stop that finds the rank inside one long call (a plan lowering, a long prefill): it keeps
// heartbeating and says goodbye within the coordinator's wait for it, instead of falling silent until
// the call ends (it was then declared dead, and the job ended non-zero).
TEST(RunWorker, ShutdownDuringALongBatchStillSaysGoodbyeInTime) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  auto result = start_worker(world, d, fake_runner(6s));
  Coordinator c{*world[0]};
  ASSERT_TRUE(std::holds_alternative<Ready>(c.expect(Tag::kStatus)));
  RunBatch rb{1, {}};
  rb.batch.add_sequence({4, 5}, {1}, 0);
  c.send(rb);
  std::this_thread::sleep_for(200ms);  // the batch is running
  const auto stop = std::chrono::steady_clock::now();
  c.send(Shutdown{});
  c.beats = 0;
  auto bye = c.expect(Tag::kStatus, 4000ms);
  const auto took = std::chrono::steady_clock::now() - stop;
  EXPECT_TRUE(std::holds_alternative<Bye>(bye));
  EXPECT_GE(took, 1900ms);  // the batch got its chance to end
  EXPECT_LT(took, 3000ms);  // and was not waited for: the coordinator waits 5 s for goodbyes
  // A 20 ms beat all along: never silent for dead_after_ms (300 ms here).
  EXPECT_GE(c.beats, 40);
  ASSERT_EQ(result.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(result.get(), 0);
}

// A runner whose teardown takes seconds (a GPU rank freeing its weights, caches and graphs): told to stop
// while idle, the rank says goodbye at once, then tears down, and returns only when that is done. (Before,
// the teardown ran before the goodbye: the rank waited 2 s, called it "one long call", said goodbye and
// left its teardown running while the process ended.)
class SlowTeardown final : public BatchRunner {
 public:
  SlowTeardown(std::shared_ptr<std::atomic<bool>> done, std::chrono::milliseconds teardown)
      : done_(std::move(done)), teardown_(teardown) {}
  ~SlowTeardown() override {
    std::this_thread::sleep_for(teardown_);
    *done_ = true;
  }
  Result<RunOutput> run(const ir::Batch&) override { return RunOutput{}; }
  RunnerInfo info() const override { return {"scorer", "fake", "cpu", "test", 10, 20, 1000}; }

 private:
  std::shared_ptr<std::atomic<bool>> done_;
  std::chrono::milliseconds teardown_;
};

TEST(RunWorker, ASlowTeardownComesAfterTheGoodbye) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  auto torn_down = std::make_shared<std::atomic<bool>>(false);
  auto result = start_worker(world, d, [torn_down] {
    return Result<std::unique_ptr<BatchRunner>>(std::make_unique<SlowTeardown>(torn_down, 3000ms));
  });
  Coordinator c{*world[0]};
  ASSERT_TRUE(std::holds_alternative<Ready>(c.expect(Tag::kStatus)));
  const auto stop = std::chrono::steady_clock::now();
  c.send(Shutdown{});
  auto bye = c.expect(Tag::kStatus, 4000ms);
  EXPECT_TRUE(std::holds_alternative<Bye>(bye));
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 1000ms) << "the goodbye waited for the teardown";
  EXPECT_FALSE(torn_down->load());
  ASSERT_EQ(result.wait_for(6s), std::future_status::ready);
  EXPECT_EQ(result.get(), 0);
  EXPECT_TRUE(torn_down->load()) << "the rank returned before its runner was torn down";
}

// A load told to stop leaves at its next unit of work (as a warm-up between plans) and says goodbye
// at once; the cut-short load is not reported as a load failure.
TEST(RunWorker, ShutdownDuringALoadEndsItAtTheNextUnit) {
  auto world = make_local_world(2);
  const auto d = two_rank_deployment();
  auto topo = Topology::make(d, 1, 2);
  ASSERT_TRUE(topo.ok());
  auto units = std::make_shared<std::atomic<int>>(0);
  RankFactory slow_load = [units](Mailbox& mail, Outbox&) -> Result<std::unique_ptr<RankRunner>> {
    for (int i = 0; i < 200; ++i, ++*units) {
      if (mail.closed()) return Error::make(ErrorKind::kCancelled, "stopped after {} units", i);
      std::this_thread::sleep_for(20ms);
    }
    return serve_batches(std::make_unique<FakeRunner>(0ms));
  };
  auto result = std::async(std::launch::async, [&world, topo = *topo, health = d.health, slow_load] {
    return run_worker(*world[1], topo, health, slow_load);
  });
  Coordinator c{*world[0]};
  c.expect(Tag::kWorkerBeat);  // it is up and loading
  std::this_thread::sleep_for(200ms);
  const auto stop = std::chrono::steady_clock::now();
  c.send(Shutdown{});
  auto bye = c.expect(Tag::kStatus, 2000ms);
  EXPECT_TRUE(std::holds_alternative<Bye>(bye)) << "a load failure was reported";
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 500ms);
  ASSERT_EQ(result.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(result.get(), 0);
  EXPECT_LT(units->load(), 50);
}

TEST(RunWorker, IgnoresGarbageAndStrangers) {
  auto world = make_local_world(3);
  config::Deployment d = two_rank_deployment();
  d.ranks.push_back(config::Rank{config::Role::kScorer, {}});
  auto result = start_worker(world, d, fake_runner(0ms));
  Coordinator c{*world[0]};
  ASSERT_TRUE(std::holds_alternative<Ready>(c.expect(Tag::kStatus)));
  ASSERT_TRUE(world[0]->send(1, Tag::kCommand, {1, 2, 3}).ok());                 // garbage
  ASSERT_TRUE(world[2]->send(1, Tag::kCommand, encode(Shutdown{})).ok());       // not the coordinator
  RunBatch rb{8, {}};
  rb.batch.add_sequence({4, 5}, {1}, 0);
  c.send(rb);
  auto m = c.expect(Tag::kResult);
  ASSERT_TRUE(std::holds_alternative<BatchDone>(m));
  EXPECT_EQ(std::get<BatchDone>(m).logits, std::vector<float>{2.5f});
  c.send(Shutdown{});
  ASSERT_EQ(result.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(result.get(), 0);
}

TEST(Topology, RolesPeersAndSizeMismatch) {
  config::Deployment d = two_rank_deployment();
  d.ranks.push_back(config::Rank{config::Role::kScorer, {"cuda", ir::Precision::kF16, 1, 0}});
  auto t = Topology::make(d, 0, 3);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->is_coordinator());
  EXPECT_EQ(t->workers(), (std::vector<int>{1, 2}));
  EXPECT_EQ(t->ranks_with(config::Role::kScorer), (std::vector<int>{1, 2}));
  EXPECT_EQ(t->describe(0), "rank 0 (coordinator)");
  EXPECT_EQ(t->describe(1), "rank 1 (scorer, cpu)");
  EXPECT_EQ(t->describe(2), "rank 2 (scorer, cuda:1)");
  auto w = Topology::make(d, 2, 3);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->is_coordinator());
  EXPECT_EQ(w->role(), config::Role::kScorer);
  auto bad = Topology::make(d, 0, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("test.yaml: 'ranks' lists 3 ranks (coordinator, scorer, scorer) but the job "
                                       "has 4; start it with mpirun -np 3"),
            std::string::npos)
      << bad.error().message();
}

}  // namespace
}  // namespace tandem::worker

// The worker rank's main loop (worker.h): the calling thread talks MPI (commands and peer frames in,
// results, peer frames and heartbeats out) and a "compute" thread loads the runner and serves, so
// heartbeats keep flowing through a long load, batch or round, and the coordinator can tell slow from
// dead. The two meet in a Mailbox (in) and an Outbox (out). The MPI thread never blocks on the compute
// thread, not even when stopping: a Shutdown closes the mailbox, and the compute thread leaves at its
// next unit of work (a warm-up plan, a batch, a round); one still busy after kComputeStopWait (a CUDA
// plan lowering, a long prefill) is left behind, and the process ends without it. The runner's teardown
// (a GPU's weights, caches and graphs: seconds) comes after the goodbye, so it never delays the job's
// stop or passes for a long call.
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/core/log.h"
#include "worker/worker.h"

namespace tandem::worker {
namespace {

// How long a stopping rank waits for its compute thread to end the unit of work in hand. Below the
// coordinator's wait for goodbyes (coordinator.cpp kGoodbyeWait, 5 s), so a rank busy in one long call
// still says goodbye in time instead of looking dead.
constexpr auto kComputeStopWait = std::chrono::seconds(2);

// How long a rank that said goodbye waits for its runner's teardown before its process ends without it.
constexpr auto kTeardownWait = std::chrono::seconds(30);

// Shared, so a compute thread left behind by an abnormal exit never touches a dead stack frame.
struct Shared {
  Mailbox mail;
  Outbox outbox;
  std::atomic<bool> loaded{false};  // the compute thread reported Ready or LoadFailed: it is past the load
  std::atomic<bool> served{false};  // the runner's work is over (or it never loaded); its teardown waits
  std::atomic<bool> ended{false};   // the compute thread has returned (its runner torn down): join() is quick

  // The goodbye is out: the compute thread may tear its runner down. Never given on an abnormal exit,
  // so a compute thread left behind then never tears down while the process ends.
  void allow_teardown() {
    std::lock_guard lock(m);
    teardown = true;
    cv.notify_all();
  }
  void wait_for_teardown() {
    std::unique_lock lock(m);
    cv.wait(lock, [this] { return teardown; });
  }

 private:
  std::mutex m;
  std::condition_variable cv;
  bool teardown = false;
};

void compute_main(const RankFactory& factory, Shared& s, int coordinator) {
  name_this_thread("compute");
  auto report = [&](const Message& m) { s.outbox.push(Outgoing{coordinator, tag_for(m, false), encode(m)}); };
  std::unique_ptr<RankRunner> runner;
  try {
    auto made = factory(s.mail, s.outbox);
    if (!made.ok()) {
      // A load the stop cut short (a warm-up left at its next plan) is no load failure: nobody waits for it.
      if (s.mail.closed()) {
        log::info("stopped while loading: {}", made.error().message());
      } else {
        report(LoadFailed{made.error().message()});
      }
      s.loaded = true;
      return;
    }
    runner = std::move(made).value();
    const RunnerInfo i = runner->info();
    report(Ready{i.role, i.model, i.backend, i.device, i.weight_bytes, i.plan_bytes, i.vocab, i.slots, i.capacity,
                 i.block, i.max_context, i.state_bytes});
    s.loaded = true;
  } catch (const std::exception& e) {
    report(LoadFailed{std::string("exception while loading: ") + e.what()});
    s.loaded = true;
    return;
  }
  runner->serve(s.mail, s.outbox, coordinator);
  s.served = true;
  s.wait_for_teardown();
  const auto t0 = std::chrono::steady_clock::now();
  runner.reset();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  if (ms > std::chrono::seconds(1)) log::info("the runner's teardown took {} ms (after the goodbye)", ms.count());
}

class BatchLoop final : public RankRunner {
 public:
  explicit BatchLoop(std::unique_ptr<BatchRunner> runner) : runner_(std::move(runner)) {}
  RunnerInfo info() const override { return runner_->info(); }
  void serve(Mailbox& mail, Outbox& out, int coordinator) override {
    auto report = [&](const Message& m) { out.push(Outgoing{coordinator, tag_for(m, false), encode(m)}); };
    using Clock = std::chrono::steady_clock;
    while (auto command = mail.pop_command(Clock::time_point::max())) {
      auto* job = std::get_if<RunBatch>(&*command);
      if (job == nullptr) {
        log::warn("a scorer rank ignores {} commands", to_string(kind_of(*command)));
        continue;
      }
      const auto start = Clock::now();
      try {
        auto result = runner_->run(job->batch);
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
        if (result.ok()) {
          report(BatchDone{job->batch_id, static_cast<uint64_t>(us), result->bucket, std::move(result->logits),
                           std::move(result->act)});
        } else {
          report(BatchFailed{job->batch_id, result.error().message()});
        }
      } catch (const std::exception& e) {
        report(BatchFailed{job->batch_id, std::string("exception while running: ") + e.what()});
      }
    }
  }

 private:
  std::unique_ptr<BatchRunner> runner_;
};

}  // namespace

std::unique_ptr<RankRunner> serve_batches(std::unique_ptr<BatchRunner> runner) {
  return std::make_unique<BatchLoop>(std::move(runner));
}

int run_worker(Transport& transport, const Topology& topology, const config::Health& health,
               RunnerFactory factory) {
  RankFactory rank = [factory = std::move(factory)](Mailbox&, Outbox&) -> Result<std::unique_ptr<RankRunner>> {
    TANDEM_ASSIGN(std::unique_ptr<BatchRunner> runner, factory());
    return serve_batches(std::move(runner));
  };
  return run_worker(transport, topology, health, std::move(rank));
}

int run_worker(Transport& transport, const Topology& topology, const config::Health& health, RankFactory factory) {
  name_this_thread("mpi");
  const int coordinator = topology.coordinator();
  auto shared = std::make_shared<Shared>();
  std::thread compute([shared, coordinator, factory = std::move(factory)] {
    compute_main(factory, *shared, coordinator);
    shared->served = true;  // also after a failed or cut-short load
    shared->ended = true;
  });
  const std::string me = topology.describe(topology.rank());
  const auto beat_every = std::chrono::milliseconds(health.heartbeat_ms);
  Clock::time_point next_beat = Clock::now();
  Clock::time_point last_heard = Clock::now();
  bool heard = false;
  uint64_t beats = 0;
  int exit_code = 0;
  // Set by a Shutdown: from then on the loop keeps heartbeating and listening (an Abort still ends the
  // rank at once) until the compute thread has ended or kComputeStopWait has passed.
  std::optional<Clock::time_point> stopping;
  IdleBackoff backoff;
  auto send = [&](int dest, Tag tag, std::vector<uint8_t> bytes) {
    Status s = transport.send(dest, tag, std::move(bytes));
    if (!s.ok()) log::error("{}: {}", me, s.error().message());
  };
  for (;;) {
    bool active = false;
    while (auto m = shared->outbox.try_pop()) {
      send(m->dest, m->tag, std::move(m->bytes));
      active = true;
    }
    auto in = transport.poll();
    if (!in.ok()) {
      log::error("{}: {}", me, in.error().message());
    } else if (in->has_value()) {
      active = true;
      Incoming& msg = **in;
      if (msg.source != coordinator) {
        if (msg.tag == Tag::kPeerData) {
          shared->mail.push_peer(msg.source, std::move(msg.bytes));
        } else {
          log::warn("{}: ignoring a {} message from rank {}: peers send data-plane frames only", me,
                    to_string(msg.tag), msg.source);
        }
        backoff.after(active);
        continue;
      }
      auto decoded = decode(msg.bytes, msg.tag);
      if (!decoded.ok()) {
        log::error("{}: {}", me, decoded.error().message());
      } else {
        last_heard = Clock::now();
        heard = true;
        if (std::holds_alternative<RunBatch>(*decoded) || std::holds_alternative<Round>(*decoded)) {
          shared->mail.push_command(std::move(decoded).value());
        } else if (auto* lost = std::get_if<PeerLost>(&*decoded)) {
          log::warn("{}: the coordinator says rank {} is lost: {}", me, lost->rank, lost->why);
          transport.abandon(lost->rank);
          shared->mail.lose_peer(lost->rank, lost->why);
        } else if (std::holds_alternative<Shutdown>(*decoded)) {
          if (!stopping) {
            stopping = Clock::now();
            shared->mail.close();  // the compute thread's waits end, and it leaves at its next unit of work
          }
        } else if (auto* abort = std::get_if<Abort>(&*decoded)) {
          log::error("{}: the coordinator ended the job: {}", me, abort->reason);
          exit_code = 1;
          break;
        }
      }
    }
    const auto now = Clock::now();
    if (now >= next_beat) {
      send(coordinator, Tag::kWorkerBeat, encode(Heartbeat{beats++}));
      next_beat = now + beat_every;
    }
    // Before its first word the coordinator may still be starting; after it, silence means it is gone
    // (with mpirun --enable-recovery nobody else would end this rank).
    const auto silence = heard ? std::chrono::milliseconds(health.dead_after_ms)
                               : std::chrono::milliseconds(uint64_t{health.startup_timeout_s} * 1000);
    if (now - last_heard > silence) {
      log::error("{}: the coordinator ({}) has been silent for {} ms; exiting", me,
                 topology.describe(coordinator),
                 std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard).count());
      exit_code = 1;
      break;
    }
    if (stopping) {
      if (shared->served) break;
      if (now - *stopping >= kComputeStopWait) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - *stopping).count();
        if (shared->loaded) {
          log::warn("{}: stopping without the batch or round in hand, still running {} ms after the stop (one long "
                    "call: a plan lowering or a long prefill); its answer is not waited for",
                    me, waited);
        } else {
          log::info("{}: stopping while it still loads ({} ms after the stop); the load is not waited for", me,
                    waited);
        }
        break;
      }
    }
    backoff.after(active);
  }
  shared->mail.close();
  // An abnormal end leaves the compute thread wherever it is (deep in a load, say), and so does a stop it
  // did not answer in time: the caller's process ends without waiting for it (or tearing anything down).
  const bool served = shared->served;
  if (exit_code != 0 || !served) {
    compute.detach();
    if (exit_code != 0) return exit_code;
  }
  // What the compute thread sent last (a peer's final frames) leaves before the goodbye.
  while (auto m = shared->outbox.try_pop()) send(m->dest, m->tag, std::move(m->bytes));
  send(coordinator, Tag::kStatus, encode(Bye{}));
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (transport.pending() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!served) return 0;
  // Then the runner's teardown, bounded: a device that hangs in it does not keep the process.
  shared->allow_teardown();
  const auto teardown_deadline = Clock::now() + kTeardownWait;
  while (!shared->ended && Clock::now() < teardown_deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (shared->ended) {
    compute.join();
  } else {
    log::warn("{}: the runner's teardown is still going {} s after the goodbye; the process ends without it", me,
              std::chrono::duration_cast<std::chrono::seconds>(kTeardownWait).count());
    compute.detach();
  }
  return 0;
}

}  // namespace tandem::worker

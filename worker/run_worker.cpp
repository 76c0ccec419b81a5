// The worker rank's main loop (worker.h): the calling thread talks MPI (commands in, results and
// heartbeats out) and a "compute" thread loads the runner and runs batches, so heartbeats keep flowing
// through a long load or a long batch and the coordinator can tell slow from dead.
#include <exception>
#include <thread>

#include "engine/core/log.h"
#include "worker/worker.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

// The two queues between the threads. Shared, so a compute thread left behind by an abnormal exit
// never touches a dead stack frame.
struct Queues {
  BlockingQueue<RunBatch> inbox;
  BlockingQueue<Message> outbox;
};

void compute_main(const RunnerFactory& factory, Queues& q) {
  name_this_thread("compute");
  std::unique_ptr<BatchRunner> runner;
  try {
    auto made = factory();
    if (!made.ok()) {
      q.outbox.push(LoadFailed{made.error().message()});
      return;
    }
    runner = std::move(made).value();
    const RunnerInfo info = runner->info();
    q.outbox.push(Ready{info.role, info.model, info.backend, info.device, info.weight_bytes, info.plan_bytes,
                        info.vocab});
  } catch (const std::exception& e) {
    q.outbox.push(LoadFailed{std::string("exception while loading: ") + e.what()});
    return;
  }
  while (auto job = q.inbox.pop()) {
    const auto start = Clock::now();
    try {
      auto out = runner->run(job->batch);
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
      if (out.ok()) {
        q.outbox.push(BatchDone{job->batch_id, static_cast<uint64_t>(us), out->bucket, std::move(out->logits),
                                std::move(out->act)});
      } else {
        q.outbox.push(BatchFailed{job->batch_id, out.error().message()});
      }
    } catch (const std::exception& e) {
      q.outbox.push(BatchFailed{job->batch_id, std::string("exception while running: ") + e.what()});
    }
  }
}

}  // namespace

int run_worker(Transport& transport, const Topology& topology, const config::Health& health,
               RunnerFactory factory) {
  name_this_thread("mpi");
  auto queues = std::make_shared<Queues>();
  std::thread compute([queues, factory = std::move(factory)] { compute_main(factory, *queues); });
  const int coordinator = topology.coordinator();
  const std::string me = topology.describe(topology.rank());
  const auto beat_every = std::chrono::milliseconds(health.heartbeat_ms);
  Clock::time_point next_beat = Clock::now();
  Clock::time_point last_heard = Clock::now();
  bool heard = false;
  uint64_t beats = 0;
  int exit_code = 0;
  bool loaded = false;  // the compute thread reported Ready or LoadFailed: it is past the load
  IdleBackoff backoff;
  auto send = [&](const Message& m) {
    Status s = transport.send(coordinator, tag_for(m, false), encode(m));
    if (!s.ok()) log::error("{}: {}", me, s.error().message());
  };
  for (;;) {
    bool active = false;
    while (auto m = queues->outbox.try_pop()) {
      loaded = loaded || std::holds_alternative<Ready>(*m) || std::holds_alternative<LoadFailed>(*m);
      send(*m);
      active = true;
    }
    auto in = transport.poll();
    if (!in.ok()) {
      log::error("{}: {}", me, in.error().message());
    } else if (in->has_value()) {
      active = true;
      Incoming& msg = **in;
      auto decoded = decode(msg.bytes, msg.tag);
      if (msg.source != coordinator) {
        log::warn("{}: ignoring a message from rank {}: workers take commands from the coordinator only", me,
                  msg.source);
      } else if (!decoded.ok()) {
        log::error("{}: {}", me, decoded.error().message());
      } else {
        last_heard = Clock::now();
        heard = true;
        if (auto* run = std::get_if<RunBatch>(&*decoded)) {
          queues->inbox.push(std::move(*run));
        } else if (std::holds_alternative<Shutdown>(*decoded)) {
          break;
        } else if (auto* abort = std::get_if<Abort>(&*decoded)) {
          log::error("{}: the coordinator ended the job: {}", me, abort->reason);
          exit_code = 1;
          break;
        }
      }
    }
    const auto now = Clock::now();
    if (now >= next_beat) {
      send(Heartbeat{beats++});
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
    backoff.after(active);
  }
  queues->inbox.close();
  if (exit_code != 0) {
    compute.detach();  // it may be deep in a load; the process ends without waiting for it
    return exit_code;
  }
  // A Shutdown during the load (the job ends before it served: a busy port, another rank's failure)
  // says goodbye at once instead of after the load; the caller's process ends without waiting for it.
  if (loaded) {
    compute.join();
  } else {
    compute.detach();
  }
  send(Bye{});
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (transport.pending() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 0;
}

}  // namespace tandem::worker

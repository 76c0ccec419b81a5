// ControlPlane: the coordinator's MPI side, run on the thread that made the MPI session (FUNNELED).
// It heartbeats the workers, takes their reports (ready, load failure, results, goodbyes), sends the
// batcher's batches, and declares a worker dead after health.dead_after_ms of silence: its batches in
// flight fail with 503, /health names it, and after health.exit_grace_ms the job ends non-zero. Target
// ranks' round answers go to the generation side (RoundEvents).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <memory>

#include "config/config.h"
#include "coordinator/coordinator.h"
#include "coordinator/batcher.h"
#include "coordinator/metrics.h"
#include "coordinator/rank_table.h"
#include "coordinator/round_scheduler.h"
#include "worker/worker.h"

namespace tandem::coordinator {

class ControlPlane {
 public:
  ControlPlane(worker::Transport& transport, const worker::Topology& topology, const config::Health& health,
               RankTable& ranks, Metrics& metrics);
  ~ControlPlane();

  // Until every worker reported ready. An error names each rank at fault and why (its load error, its
  // death, or the start-up timeout); `stop` abandons the wait. `local` is asked on each turn for a
  // failure on rank 0 itself (its own load), which ends the wait at once with that error.
  Status wait_ready(const std::atomic<bool>& stop, const std::function<Status()>& local = {});
  // Until `stop` (kExitClean) or a worker death plus the grace (kExitRankDied).
  int serve(worker::BlockingQueue<Dispatch>& outbox, const std::atomic<bool>& stop);
  // Keeps sending and receiving until `done()` or `wait` passes (finishing work on a clean stop).
  void drain(worker::BlockingQueue<Dispatch>& outbox, const std::function<bool()>& done,
             std::chrono::milliseconds wait);
  // Fails every batch still in flight with `error` (the job is ending and will not wait for them).
  void abandon_inflight(const ApiError& error);
  // Tells every live worker to exit now (non-zero, without finalizing) and gives the messages a moment
  // to leave: the job is failing.
  void abort_workers(const std::string& reason);
  // Asks live workers to shut down; true when all of them said goodbye within `wait`.
  bool shutdown_workers(std::chrono::milliseconds wait);
  // Where target ranks' readiness, round answers and deaths go (the generation service); none: ignored.
  void set_round_events(RoundEvents* events);
  // Whether any worker died (MPI_Finalize would then wait forever).
  bool lost_a_rank() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::coordinator

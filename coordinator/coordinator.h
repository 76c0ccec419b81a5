// The coordinator room (architecture.md "Processes and ranks"): rank 0 of a serving job. Its threads:
// this one talks MPI (the control plane), "http-io" threads serve HTTP, the "batcher" packs and
// dispatches; they meet only through queues, the RankTable and Jobs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "config/config.h"
#include "worker/worker.h"

namespace tandem::coordinator {

// Process exit codes of a serving job (README "Serving").
inline constexpr int kExitClean = 0;
inline constexpr int kExitError = 1;     // a bad deployment, a port in use, ...
inline constexpr int kExitStartup = 2;   // a worker failed to load, died while loading, or timed out
inline constexpr int kExitRankDied = 3;  // a worker died while serving

// How rank 0 ended the job.
struct CoordinatorExit {
  int code = kExitClean;
  // Every worker said goodbye (a clean stop, or a failure with every rank alive: a busy port, a bad
  // deployment, a worker that could not load), so the caller ends with MPI_Finalize like the workers
  // and Open MPI prints nothing. False when a rank died or did not answer: the caller must end the job
  // without MPI_Finalize (MpiSession::abort), which would wait for the missing rank forever.
  bool orderly = true;
};

// Runs rank 0 until `stop` (a signal; kExitClean after an orderly shutdown) or a failure (the codes
// above; a death while serving ends the job after health.exit_grace_ms of 503s). The HTTP port is bound
// first, before the workers load, so a busy port ends the job at once; until every rank is ready it
// answers 503. `on_listening` gets the port once the job serves.
CoordinatorExit run_coordinator(const config::Deployment& deployment, const worker::Topology& topology,
                                worker::Transport& transport, const std::atomic<bool>& stop,
                                const std::function<void(uint16_t port)>& on_listening);

}  // namespace tandem::coordinator

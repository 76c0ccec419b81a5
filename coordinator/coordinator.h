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

// Runs rank 0 until `stop` (a signal; kExitClean after an orderly shutdown) or a failure (the codes
// above; a death while serving ends the job after health.exit_grace_ms of 503s). `on_listening` gets
// the bound port.
// After a non-zero return the caller must end the job without MPI_Finalize (MpiSession::abort).
int run_coordinator(const config::Deployment& deployment, const worker::Topology& topology,
                    worker::Transport& transport, const std::atomic<bool>& stop,
                    const std::function<void(uint16_t port)>& on_listening);

}  // namespace tandem::coordinator

// The worker room (architecture.md "Processes and ranks"): the rank main loop, and what the coordinator
// shares with it: the control-plane protocol, MPI tags, transports, the topology and queues.
#pragma once

#include "config/config.h"
#include "worker/batch_runner.h"
#include "worker/mailbox.h"
#include "worker/mpi_session.h"
#include "worker/protocol.h"
#include "worker/queue.h"
#include "worker/tags.h"
#include "worker/topology.h"
#include "worker/transport.h"

namespace tandem::worker {

// Runs a worker rank until the coordinator says Shutdown (returns 0 after saying goodbye), says Abort or
// falls silent for health.dead_after_ms (returns 1; the caller must then end the process without
// MPI_Finalize). `factory` runs on the compute thread; its failure is reported to the coordinator as
// LoadFailed. A Shutdown closes the mailbox and keeps this thread heartbeating and listening while the
// compute thread ends the unit of work in hand (a load checks Mailbox::closed between its plans); one
// still busy after a short wait (2 s: a load, a plan lowering, a long prefill) is left running (it holds
// only copies), so a process that returns from here ends with std::_Exit.
int run_worker(Transport& transport, const Topology& topology, const config::Health& health,
               RunnerFactory factory);
// The same for any role: `factory` makes the rank's runner (a scorer's batch loop, a target's rounds, a
// drafter's link) on the compute thread, with the mailbox and outbox it serves from.
int run_worker(Transport& transport, const Topology& topology, const config::Health& health, RankFactory factory);

}  // namespace tandem::worker

// Every MPI tag tandem uses, in one enum grouped by the sender (style.md "Ranks"). Each tag admits only
// some message kinds (protocol.cpp checks it), so a stale message can never be read as another one.
#pragma once

namespace tandem::worker {

enum class Tag : int {
  // ---- sent by the coordinator (rank 0) ----
  kCommand = 10,          // RunBatch, Round, PeerLost, Shutdown, Abort
  kCoordinatorBeat = 11,  // Heartbeat: workers exit when the coordinator falls silent
  // ---- sent by a worker ----
  kStatus = 20,           // Ready, LoadFailed, Bye
  kResult = 21,           // BatchDone, BatchFailed, RoundDone, RoundFailed
  kWorkerBeat = 22,       // Heartbeat: the coordinator declares a silent worker dead
  // ---- sent by a worker to a peer worker ----
  kPeerData = 30,         // data-plane frames (engine/comm), never control messages
};

const char* to_string(Tag tag);

}  // namespace tandem::worker

// Mailbox: everything a worker's compute thread receives, filled by its "mpi" thread (the only one that
// talks MPI): commands from the coordinator, data-plane frames from peer ranks (per source), and which
// peers are lost. Outbox: what the compute thread sends, to the coordinator or a peer. Peer pipes
// (engine/comm HostPipe) are built on the two, so the data plane's MPI path never calls MPI itself.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "engine/comm/comm.h"
#include "worker/protocol.h"
#include "worker/queue.h"

namespace tandem::worker {

using Clock = std::chrono::steady_clock;

struct Outgoing {
  int dest = 0;
  Tag tag = Tag::kResult;
  std::vector<uint8_t> bytes;
};
using Outbox = BlockingQueue<Outgoing>;

class Mailbox {
 public:
  // ---- the mpi thread ----
  void push_command(Message message);
  void push_peer(int source, std::vector<uint8_t> bytes);
  // Frames already there are still delivered; after them, receives from the peer answer kUnavailable.
  void lose_peer(int rank, std::string why);
  // The rank is stopping: every wait ends, and receives answer kCancelled.
  void close();

  // ---- the compute thread ----
  bool closed() const;
  // The next command, waiting until `deadline`; nullopt at the deadline or once closed.
  std::optional<Message> pop_command(Clock::time_point deadline);
  bool has_command() const;
  // The next frame from `peer` (see comm::HostPipe::recv).
  Result<std::optional<std::vector<uint8_t>>> pop_peer(int peer, Clock::time_point deadline);
  // Waits until a command or a frame from `peer` is there, the peer is lost, the mailbox closes or the
  // deadline passes.
  void wait_any(int peer, Clock::time_point deadline);
  bool lost(int peer) const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Message> commands_;
  std::map<int, std::deque<std::vector<uint8_t>>> peers_;
  std::map<int, std::string> lost_;
  bool closed_ = false;
};

// A pipe to `peer` over the rank's transport: sends leave through `outbox` on Tag::kPeerData, frames
// arrive through `mail`. Both must outlive the pipe.
std::unique_ptr<comm::HostPipe> make_peer_pipe(Mailbox& mail, Outbox& outbox, int peer);

}  // namespace tandem::worker

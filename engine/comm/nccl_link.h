// The NCCL link (comm.h) between two CUDA ranks: headers over the host pipe, payload rows over NCCL
// (ncclSend/ncclRecv on the link's own streams, one communicator per direction), set up from NCCL
// unique ids the lower rank sends over the pipe. Built with TANDEM_HAVE_CUDA (NCCL found).
#pragma once

#include <chrono>
#include <memory>

#include "engine/comm/comm.h"

namespace tandem::comm {

struct NcclLinkOptions {
  int rank = 0;    // this rank; the peer is the pipe's
  int device = 0;  // this rank's CUDA device (the two ranks of a link need two devices)
  // Each start-up step (the unique id exchange, ncclCommInitRank) must finish within this.
  std::chrono::milliseconds init_timeout{60000};
  // The rows of a received header must arrive within this; a send waits this long at most for a
  // staging slot (the peer receiving a message sent kSendSlots messages earlier).
  std::chrono::milliseconds rows_timeout{30000};
  // Fault injection for tests: send() puts the header on the pipe, then aborts instead of sending the
  // rows (a peer that fails mid-transfer).
  bool abort_after_header = false;
};

class NcclLink : public Link {
 public:
  // Messages sent but not yet received by the peer, at most (each holds a device staging buffer).
  static constexpr int kSendSlots = 4;
  // Aborts both communicators (ncclCommAbort) and closes the pipe: the peer's receives fail. Every
  // later call answers kUnavailable.
  virtual void abort() = 0;
};

// Sets the link up (blocks until both communicators are ready or a step times out, naming the rank
// and the step; the communicators are then aborted). Both ranks call it at the same time.
Result<std::unique_ptr<NcclLink>> make_nccl_link(std::unique_ptr<HostPipe> pipe, const NcclLinkOptions& options);

}  // namespace tandem::comm

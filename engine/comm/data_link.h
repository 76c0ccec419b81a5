// Which link a pair of generation ranks uses for its data plane (comm.h), chosen from the two ranks'
// backends in the YAML: NCCL (nccl_link.h) when both run the CUDA backend and this build has NCCL,
// otherwise rows inline with their headers over the host pipe (MPI). One call for every runner.
#pragma once

#include <chrono>
#include <memory>

#include "engine/comm/comm.h"

namespace tandem::comm {

// One end of a link: whether its rank runs on a CUDA device, and which.
struct LinkEnd {
  bool cuda = false;
  int device = 0;
};

// "nccl" or "mpi", as Link::kind() of the link make_data_link makes for these ends.
const char* data_link_kind(const LinkEnd& self, const LinkEnd& peer);

// Makes the link to the pipe's peer. An NCCL link is set up at once (both ranks call this at the same
// time; each step within `init_timeout`, else an error naming the rank and the step).
Result<std::unique_ptr<Link>> make_data_link(std::unique_ptr<HostPipe> pipe, int rank, const LinkEnd& self,
                                             const LinkEnd& peer, std::chrono::milliseconds init_timeout);

}  // namespace tandem::comm

// Transport: how control messages move between ranks. Neither call ever blocks, because a dead peer
// must never stall the rank that talks to it (serving.md "where the anchors fall short"). MpiTransport
// is the real one; LocalTransport connects threads of one process for tests. One thread per endpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/core/result.h"
#include "worker/tags.h"

namespace tandem::worker {

struct Incoming {
  int source = -1;
  Tag tag = Tag::kStatus;
  std::vector<uint8_t> bytes;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts sending `bytes` to `dest`; returns at once. Sends to one peer arrive in order.
  virtual Status send(int dest, Tag tag, std::vector<uint8_t> bytes) = 0;
  // The next message that has arrived, if any. Also moves pending sends along.
  virtual Result<std::optional<Incoming>> poll() = 0;
  // Gives up on a dead peer: pending sends to it are dropped and never waited for.
  virtual void abandon(int peer) = 0;
  // Sends not yet completed (to peers not abandoned).
  virtual size_t pending() = 0;
};

// One process's MPI world as a Transport. MPI must be initialized (MpiSession).
std::unique_ptr<Transport> make_mpi_transport();

// Endpoints of an in-process world of `size` ranks; endpoint i is rank i. The hub lives as long as
// any endpoint. abandon(p) on an endpoint makes later sends to p vanish, as MPI's do to a dead rank.
std::vector<std::unique_ptr<Transport>> make_local_world(int size);

}  // namespace tandem::worker

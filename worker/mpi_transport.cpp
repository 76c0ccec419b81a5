// MpiTransport: the Transport over MPI_COMM_WORLD with non-blocking sends (MPI_Isend, buffers kept
// until MPI_Test says done) and matched probes (MPI_Improbe + MPI_Mrecv) so a receive never waits.
// A dead peer's sends are parked, never tested or freed again: with the peer gone they may never
// complete, and the library may still hold their buffers.
#include <mpi.h>

#include <climits>
#include <list>

#include "worker/mpi_check_impl.h"
#include "worker/protocol.h"
#include "worker/transport.h"

namespace tandem::worker {
namespace {

struct PendingSend {
  int dest = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<uint8_t> bytes;
};

bool known_tag(int tag) {
  switch (static_cast<Tag>(tag)) {
    case Tag::kCommand:
    case Tag::kCoordinatorBeat:
    case Tag::kStatus:
    case Tag::kResult:
    case Tag::kWorkerBeat:
    case Tag::kPeerData: return true;
  }
  return false;
}

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status send(int dest, Tag tag, std::vector<uint8_t> bytes) override {
    if (dest < 0 || dest >= size_) {
      return Error::make(ErrorKind::kInvalidArgument, "send to rank {} outside the world of {}", dest, size_);
    }
    if (bytes.size() > static_cast<size_t>(INT_MAX)) {
      return Error::make(ErrorKind::kCapacity, "a {}-byte message to rank {} exceeds MPI's int count", bytes.size(),
                         dest);
    }
    for (int peer : abandoned_) {
      if (peer == dest) return ok_status();  // as MPI would do with a dead rank: the bytes go nowhere
    }
    pending_.push_back(PendingSend{dest, MPI_REQUEST_NULL, std::move(bytes)});
    PendingSend& p = pending_.back();
    // INVARIANT: p.bytes stays alive and unmoved (std::list node) until MPI_Test reports completion or
    // the peer is abandoned and the node is parked for the rest of the process.
    const int rc = MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dest,
                             static_cast<int>(tag), MPI_COMM_WORLD, &p.request);
    if (rc != MPI_SUCCESS) {
      pending_.pop_back();
      return mpi_error(rc, "MPI_Isend", __FILE__, __LINE__).context(fmt::format("sending to rank {}", dest));
    }
    return ok_status();
  }

  Result<std::optional<Incoming>> poll() override {
    progress();
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    TANDEM_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &message, &status));
    if (!flag) return std::optional<Incoming>();
    int count = 0;
    TANDEM_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    if (count == MPI_UNDEFINED || count < 0) count = 0;
    Incoming in;
    in.source = status.MPI_SOURCE;
    in.bytes.resize(static_cast<size_t>(count));
    // INVARIANT: the buffer holds exactly the probed message's byte count.
    TANDEM_MPI_CHECK(MPI_Mrecv(in.bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE));
    if (!known_tag(status.MPI_TAG)) {
      return Error::make(ErrorKind::kFormat, "message from rank {} on unknown MPI tag {} ({} bytes)", in.source,
                         status.MPI_TAG, count);
    }
    in.tag = static_cast<Tag>(status.MPI_TAG);
    return std::optional<Incoming>(std::move(in));
  }

  void abandon(int peer) override {
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->dest == peer) parked_.splice(parked_.end(), pending_, it);
      it = next;
    }
    abandoned_.push_back(peer);
  }

  size_t pending() override {
    progress();
    return pending_.size();
  }

 private:
  void progress() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      const int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      auto next = std::next(it);
      if (rc != MPI_SUCCESS) {
        // Its peer is gone (the heartbeat will say so); the library may still hold the buffer.
        parked_.splice(parked_.end(), pending_, it);
      } else if (done) {
        pending_.erase(it);
      }
      it = next;
    }
  }

  int rank_ = 0;
  int size_ = 1;
  std::list<PendingSend> pending_;
  std::list<PendingSend> parked_;
  std::vector<int> abandoned_;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport() { return std::make_unique<MpiTransport>(); }

}  // namespace tandem::worker

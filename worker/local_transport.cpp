// LocalTransport: an in-process world for tests (transport.h). One mailbox per rank behind a mutex;
// a destroyed endpoint stops receiving, like a killed rank, and sends to it vanish.
#include <deque>
#include <mutex>
#include <set>

#include "worker/transport.h"

namespace tandem::worker {
namespace {

struct Hub {
  std::mutex mutex;
  std::vector<std::deque<Incoming>> mailbox;
  std::vector<bool> alive;
};

class LocalTransport final : public Transport {
 public:
  LocalTransport(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  ~LocalTransport() override {
    std::lock_guard lock(hub_->mutex);
    hub_->alive[static_cast<size_t>(rank_)] = false;
    hub_->mailbox[static_cast<size_t>(rank_)].clear();
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(hub_->alive.size()); }

  Status send(int dest, Tag tag, std::vector<uint8_t> bytes) override {
    if (dest < 0 || dest >= size()) {
      return Error::make(ErrorKind::kInvalidArgument, "send to rank {} outside the world of {}", dest, size());
    }
    if (abandoned_.count(dest)) return ok_status();
    std::lock_guard lock(hub_->mutex);
    if (!hub_->alive[static_cast<size_t>(dest)]) return ok_status();
    hub_->mailbox[static_cast<size_t>(dest)].push_back(Incoming{rank_, tag, std::move(bytes)});
    return ok_status();
  }

  Result<std::optional<Incoming>> poll() override {
    std::lock_guard lock(hub_->mutex);
    auto& box = hub_->mailbox[static_cast<size_t>(rank_)];
    if (box.empty()) return std::optional<Incoming>();
    Incoming in = std::move(box.front());
    box.pop_front();
    return std::optional<Incoming>(std::move(in));
  }

  void abandon(int peer) override { abandoned_.insert(peer); }
  size_t pending() override { return 0; }

 private:
  std::shared_ptr<Hub> hub_;
  int rank_;
  std::set<int> abandoned_;
};

}  // namespace

std::vector<std::unique_ptr<Transport>> make_local_world(int size) {
  auto hub = std::make_shared<Hub>();
  hub->mailbox.resize(static_cast<size_t>(size));
  hub->alive.assign(static_cast<size_t>(size), true);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<LocalTransport>(hub, r));
  return out;
}

}  // namespace tandem::worker

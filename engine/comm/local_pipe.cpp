// make_local_pipes (comm.h): two pipe ends joined by a queue each way, for a generator rank's two
// halves and tests. A destroyed end is a lost peer to the other.
#include <condition_variable>
#include <deque>
#include <mutex>

#include "engine/comm/comm.h"

namespace tandem::comm {
namespace {

struct Shared {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<uint8_t>> to[2];  // to[i]: messages for end i
  bool alive[2] = {true, true};
};

class LocalPipe final : public HostPipe {
 public:
  LocalPipe(std::shared_ptr<Shared> shared, int end, int peer_rank)
      : shared_(std::move(shared)), end_(end), peer_rank_(peer_rank) {}
  ~LocalPipe() override {
    {
      std::lock_guard lock(shared_->mutex);
      shared_->alive[end_] = false;
      shared_->to[end_].clear();
    }
    shared_->changed.notify_all();
  }
  int peer() const override { return peer_rank_; }

  Status send(std::vector<uint8_t> bytes) override {
    {
      std::lock_guard lock(shared_->mutex);
      if (!shared_->alive[1 - end_]) return ok_status();  // as to a dead rank: the bytes go nowhere
      shared_->to[1 - end_].push_back(std::move(bytes));
    }
    shared_->changed.notify_all();
    return ok_status();
  }

  Result<std::optional<std::vector<uint8_t>>> recv(Clock::time_point deadline) override {
    std::unique_lock lock(shared_->mutex);
    auto& box = shared_->to[end_];
    shared_->changed.wait_until(lock, deadline, [&] { return !box.empty() || !shared_->alive[1 - end_]; });
    if (!box.empty()) {
      std::vector<uint8_t> bytes = std::move(box.front());
      box.pop_front();
      return std::optional<std::vector<uint8_t>>(std::move(bytes));
    }
    if (!shared_->alive[1 - end_]) {
      return Error::make(ErrorKind::kUnavailable, "rank {} is gone (its pipe end was closed)", peer_rank_);
    }
    return std::optional<std::vector<uint8_t>>();
  }

 private:
  std::shared_ptr<Shared> shared_;
  int end_;
  int peer_rank_;
};

}  // namespace

std::pair<std::unique_ptr<HostPipe>, std::unique_ptr<HostPipe>> make_local_pipes(int rank_a, int rank_b) {
  auto shared = std::make_shared<Shared>();
  return {std::make_unique<LocalPipe>(shared, 0, rank_b), std::make_unique<LocalPipe>(shared, 1, rank_a)};
}

}  // namespace tandem::comm

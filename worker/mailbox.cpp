// Mailbox and the peer pipe (mailbox.h).
#include "worker/mailbox.h"

namespace tandem::worker {

void Mailbox::push_command(Message message) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    commands_.push_back(std::move(message));
  }
  changed_.notify_all();
}

void Mailbox::push_peer(int source, std::vector<uint8_t> bytes) {
  {
    std::lock_guard lock(mutex_);
    if (closed_ || lost_.count(source)) return;
    peers_[source].push_back(std::move(bytes));
  }
  changed_.notify_all();
}

void Mailbox::lose_peer(int rank, std::string why) {
  {
    std::lock_guard lock(mutex_);
    lost_.emplace(rank, std::move(why));
  }
  changed_.notify_all();
}

void Mailbox::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

bool Mailbox::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

std::optional<Message> Mailbox::pop_command(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return closed_ || !commands_.empty(); });
  if (closed_ || commands_.empty()) return std::nullopt;
  Message m = std::move(commands_.front());
  commands_.pop_front();
  return m;
}

bool Mailbox::has_command() const {
  std::lock_guard lock(mutex_);
  return !commands_.empty();
}

Result<std::optional<std::vector<uint8_t>>> Mailbox::pop_peer(int peer, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  auto& box = peers_[peer];
  changed_.wait_until(lock, deadline, [&] { return closed_ || !box.empty() || lost_.count(peer) > 0; });
  if (closed_) return Error::make(ErrorKind::kCancelled, "the rank is stopping (waiting for rank {})", peer);
  if (!box.empty()) {
    std::vector<uint8_t> bytes = std::move(box.front());
    box.pop_front();
    return std::optional<std::vector<uint8_t>>(std::move(bytes));
  }
  if (auto it = lost_.find(peer); it != lost_.end()) {
    return Error::make(ErrorKind::kUnavailable, "rank {} is lost: {}", peer, it->second);
  }
  return std::optional<std::vector<uint8_t>>();
}

void Mailbox::wait_any(int peer, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  auto& box = peers_[peer];
  changed_.wait_until(lock, deadline,
                      [&] { return closed_ || !commands_.empty() || !box.empty() || lost_.count(peer) > 0; });
}

bool Mailbox::lost(int peer) const {
  std::lock_guard lock(mutex_);
  return lost_.count(peer) > 0;
}

namespace {

class PeerPipe final : public comm::HostPipe {
 public:
  PeerPipe(Mailbox& mail, Outbox& outbox, int peer) : mail_(mail), outbox_(outbox), peer_(peer) {}
  int peer() const override { return peer_; }
  Status send(std::vector<uint8_t> bytes) override {
    if (mail_.lost(peer_)) return ok_status();  // as MPI to a dead rank: the bytes go nowhere
    outbox_.push(Outgoing{peer_, Tag::kPeerData, std::move(bytes)});
    return ok_status();
  }
  Result<std::optional<std::vector<uint8_t>>> recv(Clock::time_point deadline) override {
    return mail_.pop_peer(peer_, deadline);
  }

 private:
  Mailbox& mail_;
  Outbox& outbox_;
  int peer_;
};

}  // namespace

std::unique_ptr<comm::HostPipe> make_peer_pipe(Mailbox& mail, Outbox& outbox, int peer) {
  return std::make_unique<PeerPipe>(mail, outbox, peer);
}

}  // namespace tandem::worker

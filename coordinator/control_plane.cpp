// ControlPlane (control_plane.h): one polling loop, step(), shared by start-up, serving and shutdown.
#include "coordinator/control_plane.h"

#include <thread>

#include <fmt/format.h>

#include "engine/core/log.h"

namespace tandem::coordinator {
namespace {

long long ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

struct ControlPlane::Impl {
  Impl(worker::Transport& t, const worker::Topology& topo, const config::Health& h, RankTable& r, Metrics& m)
      : transport(t), topology(topo), health(h), ranks(r), metrics(m) {}

  // One round: heartbeats out, up to a few dozen messages in, silence checks. True if anything arrived.
  bool step();
  // step() and the batcher's frames out. True if anything moved.
  bool pump(worker::BlockingQueue<Dispatch>& outbox);
  void handle(int source, worker::Message message);
  void on_done(int rank, worker::BatchDone done);
  void on_failed(int rank, const worker::BatchFailed& failed);
  void declare_dead(int rank, const std::string& why);
  void fail_batch(const InflightBatch& batch, const ApiError& error);

  worker::Transport& transport;
  const worker::Topology& topology;
  config::Health health;
  RankTable& ranks;
  Metrics& metrics;
  Clock::time_point next_beat = Clock::now();
  uint64_t beats = 0;
  std::optional<Clock::time_point> first_death;
  std::atomic<bool> lost{false};
  worker::IdleBackoff backoff;
  RoundEvents* rounds = nullptr;
};

bool ControlPlane::Impl::step() {
  const auto now = Clock::now();
  if (now >= next_beat) {
    const auto frame = worker::encode(worker::Heartbeat{beats++});
    for (int r : topology.workers()) {
      Status s = transport.send(r, worker::Tag::kCoordinatorBeat, frame);
      if (!s.ok()) log::warn("heartbeat to {}: {}", topology.describe(r), s.error().message());
    }
    next_beat = now + std::chrono::milliseconds(health.heartbeat_ms);
  }
  bool active = false;
  for (int i = 0; i < 64; ++i) {
    auto in = transport.poll();
    if (!in.ok()) {
      log::error("control plane: {}", in.error().message());
      continue;
    }
    if (!in->has_value()) break;
    active = true;
    worker::Incoming& msg = **in;
    if (msg.source <= 0 || msg.source >= topology.size() || msg.source == topology.coordinator()) {
      log::warn("control plane: ignoring a message from rank {}", msg.source);
      continue;
    }
    auto decoded = worker::decode(msg.bytes, msg.tag);
    if (!decoded.ok()) {
      log::error("control plane: from {}: {}", topology.describe(msg.source), decoded.error().message());
      continue;
    }
    ranks.beat(msg.source);
    handle(msg.source, std::move(decoded).value());
  }
  const auto cutoff = Clock::now() - std::chrono::milliseconds(health.dead_after_ms);
  for (const auto& [rank, age] : ranks.silent(cutoff)) {
    declare_dead(rank, fmt::format("no heartbeat for {} ms (health.dead_after_ms = {})", ms(age), health.dead_after_ms));
  }
  return active;
}

bool ControlPlane::Impl::pump(worker::BlockingQueue<Dispatch>& outbox) {
  bool active = step();
  while (auto d = outbox.try_pop()) {
    active = true;
    Status s = transport.send(d->rank, worker::Tag::kCommand, std::move(d->frame));
    if (!s.ok()) log::error("sending a batch to {}: {}", topology.describe(d->rank), s.error().message());
  }
  return active;
}

void ControlPlane::Impl::handle(int source, worker::Message message) {
  const std::string who = topology.describe(source);
  if (auto* ready = std::get_if<worker::Ready>(&message)) {
    log::info("{} ready: model {} on {} ({}), weights {:.1f} MB, plans {:.1f} MB, kv cache {:.1f} MB", who,
              ready->model, ready->backend, ready->device, double(ready->weight_bytes) / 1e6,
              double(ready->plan_bytes) / 1e6, double(ready->state_bytes) / 1e6);
    if (rounds != nullptr) rounds->on_ready(source, *ready);
    ranks.set_ready(source, std::move(*ready));
  } else if (auto* failed = std::get_if<worker::LoadFailed>(&message)) {
    log::error("{} failed to load: {}", who, failed->message);
    ranks.set_load_failed(source, failed->message);
  } else if (auto* done = std::get_if<worker::BatchDone>(&message)) {
    on_done(source, std::move(*done));
  } else if (auto* bf = std::get_if<worker::BatchFailed>(&message)) {
    on_failed(source, *bf);
  } else if (auto* rd = std::get_if<worker::RoundDone>(&message)) {
    if (rounds != nullptr) rounds->on_round_done(source, std::move(*rd));
  } else if (auto* rf = std::get_if<worker::RoundFailed>(&message)) {
    if (rounds != nullptr) rounds->on_round_failed(source, *rf);
  } else if (std::holds_alternative<worker::Bye>(message)) {
    ranks.set_gone(source);
  }
  // Heartbeats did their work in step() (ranks.beat); commands never come from workers (decode refuses).
}

void ControlPlane::Impl::on_done(int rank, worker::BatchDone done) {
  auto batch = ranks.finish(rank, done.batch_id);
  if (!batch) {
    log::warn("{} answered batch {}, which is not in flight there", topology.describe(rank), done.batch_id);
    return;
  }
  metrics.observe_run(rank, done.bucket, double(done.run_us) / 1e6);
  if (done.logits.size() != batch->markers || done.act.size() != batch->items.size()) {
    fail_batch(*batch, ApiError{500,
                                fmt::format("{} returned {} logits and {} act pairs for a batch of {} markers and {} "
                                            "sequences",
                                            topology.describe(rank), done.logits.size(), done.act.size(),
                                            batch->markers, batch->items.size()),
                                "internal_error", std::nullopt});
    return;
  }
  size_t offset = 0;
  for (size_t k = 0; k < batch->items.size(); ++k) {
    const WorkItem& item = batch->items[k];
    const size_t n = item.markers();
    SequenceResult r;
    r.logits.assign(done.logits.begin() + static_cast<std::ptrdiff_t>(offset),
                    done.logits.begin() + static_cast<std::ptrdiff_t>(offset + n));
    r.act = done.act[k];
    offset += n;
    item.job->complete(item.index, std::move(r));
  }
}

void ControlPlane::Impl::on_failed(int rank, const worker::BatchFailed& failed) {
  auto batch = ranks.finish(rank, failed.batch_id);
  if (!batch) return;
  metrics.count_batch_failure(rank);
  fail_batch(*batch, ApiError{500, fmt::format("{} failed the batch: {}", topology.describe(rank), failed.message),
                              "internal_error", std::nullopt});
}

void ControlPlane::Impl::fail_batch(const InflightBatch& batch, const ApiError& error) {
  for (const WorkItem& item : batch.items) item.job->fail(error);
}

void ControlPlane::Impl::declare_dead(int rank, const std::string& why) {
  const std::string who = topology.describe(rank);
  auto lost_batches = ranks.set_dead(rank, why);
  transport.abandon(rank);
  lost = true;
  // Its peers stop waiting for it (a target for its drafter's replies, a drafter for its target).
  const auto peer_lost = worker::encode(worker::PeerLost{rank, why});
  for (const RankView& v : ranks.view()) {
    if (v.role == config::Role::kCoordinator || v.rank == rank || v.state == RankState::kDead ||
        v.state == RankState::kGone) {
      continue;
    }
    Status s = transport.send(v.rank, worker::Tag::kCommand, peer_lost);
    if (!s.ok()) log::warn("telling {} that {} is lost: {}", v.name, who, s.error().message());
  }
  // A drafter's death degrades the job (its target decodes plainly) but does not end it.
  if (topology.role_of(rank) == config::Role::kDrafter) {
    log::error("{} is dead: {}; its target decodes its requests without drafts (degraded)", who, why);
    if (rounds != nullptr) rounds->on_dead(rank, why);
    return;
  }
  if (!first_death) first_death = Clock::now();
  log::error("{} is dead: {}; failing its {} batches in flight; the job exits in {} ms (health.exit_grace_ms)", who,
             why, lost_batches.size(), health.exit_grace_ms);
  if (rounds != nullptr) rounds->on_dead(rank, why);
  const ApiError error = unavailable(fmt::format("{} died while answering: {}", who, why));
  for (const auto& b : lost_batches) {
    metrics.count_batch_failure(rank);
    fail_batch(b, error);
  }
}

ControlPlane::ControlPlane(worker::Transport& transport, const worker::Topology& topology,
                           const config::Health& health, RankTable& ranks, Metrics& metrics)
    : impl_(std::make_unique<Impl>(transport, topology, health, ranks, metrics)) {}

ControlPlane::~ControlPlane() = default;

Status ControlPlane::wait_ready(const std::atomic<bool>& stop, const std::function<Status()>& local) {
  const auto deadline = Clock::now() + std::chrono::seconds(impl_->health.startup_timeout_s);
  while (!stop.load()) {
    const bool active = impl_->step();
    std::string failures;
    for (const RankView& v : impl_->ranks.view()) {
      if (v.state == RankState::kLoadFailed) failures += fmt::format("\n  {} failed to load: {}", v.name, v.detail);
      if (v.state == RankState::kDead) failures += fmt::format("\n  {} died while loading: {}", v.name, v.detail);
    }
    if (!failures.empty()) return Error(ErrorKind::kUnavailable, "the job cannot start:" + failures);
    if (local) {
      if (Status s = local(); !s.ok()) return s;
    }
    if (impl_->ranks.all_ready()) return ok_status();
    if (Clock::now() > deadline) {
      return Error::make(ErrorKind::kTimeout, "the job cannot start: {} within {} s (health.startup_timeout_s)",
                         impl_->ranks.problem().value_or(""), impl_->health.startup_timeout_s);
    }
    impl_->backoff.after(active);
  }
  return Error(ErrorKind::kCancelled, "stopped while waiting for the workers to load");
}

int ControlPlane::serve(worker::BlockingQueue<Dispatch>& outbox, const std::atomic<bool>& stop) {
  worker::name_this_thread("mpi");
  while (!stop.load()) {
    const bool active = impl_->pump(outbox);
    if (impl_->first_death &&
        Clock::now() - *impl_->first_death >= std::chrono::milliseconds(impl_->health.exit_grace_ms)) {
      log::error("exiting: {}", impl_->ranks.problem().value_or("a rank died"));
      return kExitRankDied;
    }
    impl_->backoff.after(active);
  }
  return kExitClean;
}

void ControlPlane::drain(worker::BlockingQueue<Dispatch>& outbox, const std::function<bool()>& done,
                         std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  while (!done() && Clock::now() < deadline) {
    const bool active = impl_->pump(outbox);
    impl_->backoff.after(active);
  }
}

void ControlPlane::abandon_inflight(const ApiError& error) {
  for (const InflightBatch& b : impl_->ranks.take_all_inflight()) impl_->fail_batch(b, error);
}

void ControlPlane::abort_workers(const std::string& reason) {
  const auto frame = worker::encode(worker::Abort{reason});
  for (const RankView& v : impl_->ranks.view()) {
    if (v.role == config::Role::kCoordinator || v.state == RankState::kDead || v.state == RankState::kGone) continue;
    Status s = impl_->transport.send(v.rank, worker::Tag::kCommand, frame);
    if (!s.ok()) log::warn("abort to {}: {}", v.name, s.error().message());
  }
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (impl_->transport.pending() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool ControlPlane::shutdown_workers(std::chrono::milliseconds wait) {
  const auto frame = worker::encode(worker::Shutdown{});
  for (const RankView& v : impl_->ranks.view()) {
    if (v.role == config::Role::kCoordinator || v.state == RankState::kDead) continue;
    Status s = impl_->transport.send(v.rank, worker::Tag::kCommand, frame);
    if (!s.ok()) log::warn("shutdown to {}: {}", v.name, s.error().message());
  }
  const auto deadline = Clock::now() + wait;
  for (;;) {
    bool all_gone = true;
    for (const RankView& v : impl_->ranks.view()) {
      if (v.role == config::Role::kCoordinator) continue;
      all_gone = all_gone && v.state == RankState::kGone;
    }
    if (all_gone) return true;
    if (Clock::now() > deadline) return false;
    impl_->step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void ControlPlane::set_round_events(RoundEvents* events) { impl_->rounds = events; }

bool ControlPlane::lost_a_rank() const { return impl_->lost.load(); }

}  // namespace tandem::coordinator

// RankTable (rank_table.h).
#include "coordinator/rank_table.h"

#include <fmt/format.h>

namespace tandem::coordinator {

const char* to_string(RankState state) {
  switch (state) {
    case RankState::kStarting: return "starting";
    case RankState::kReady: return "ready";
    case RankState::kLoadFailed: return "load_failed";
    case RankState::kDead: return "dead";
    case RankState::kGone: return "gone";
  }
  return "unknown";
}

RankTable::RankTable(const worker::Topology& topology, uint32_t max_inflight_per_rank)
    : max_inflight_(max_inflight_per_rank) {
  const auto now = Clock::now();
  for (int r = 0; r < topology.size(); ++r) {
    Entry e;
    e.view.rank = r;
    e.view.name = topology.describe(r);
    e.view.role = topology.role_of(r);
    e.view.state = topology.role_of(r) == config::Role::kCoordinator ? RankState::kReady : RankState::kStarting;
    e.view.detail = e.view.state == RankState::kReady ? "" : "loading";
    e.last_beat = now;
    ranks_.push_back(std::move(e));
  }
}

void RankTable::beat(int rank) {
  std::lock_guard lock(mutex_);
  ranks_[static_cast<size_t>(rank)].last_beat = Clock::now();
}

void RankTable::set_ready(int rank, worker::Ready info) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = ranks_[static_cast<size_t>(rank)];
    if (e.view.state != RankState::kStarting) return;
    e.view.state = RankState::kReady;
    e.view.detail.clear();
    e.view.info = std::move(info);
  }
  changed_.notify_all();
}

void RankTable::set_load_failed(int rank, std::string why) {
  std::lock_guard lock(mutex_);
  Entry& e = ranks_[static_cast<size_t>(rank)];
  e.view.state = RankState::kLoadFailed;
  e.view.detail = std::move(why);
}

void RankTable::set_gone(int rank) {
  std::lock_guard lock(mutex_);
  Entry& e = ranks_[static_cast<size_t>(rank)];
  if (e.view.state != RankState::kDead) {
    e.view.state = RankState::kGone;
    e.view.detail = "shut down";
  }
}

void RankTable::Entry::take_inflight(std::vector<InflightBatch>& out) {
  for (auto& [id, b] : inflight) out.push_back(std::move(b));
  inflight.clear();
  view.inflight_batches = 0;
  view.inflight_tokens = 0;
}

std::vector<InflightBatch> RankTable::set_dead(int rank, std::string why) {
  std::vector<InflightBatch> lost;
  {
    std::lock_guard lock(mutex_);
    Entry& e = ranks_[static_cast<size_t>(rank)];
    e.view.state = RankState::kDead;
    e.view.detail = std::move(why);
    e.take_inflight(lost);
  }
  changed_.notify_all();
  return lost;
}

std::vector<InflightBatch> RankTable::take_all_inflight() {
  std::vector<InflightBatch> out;
  {
    std::lock_guard lock(mutex_);
    for (Entry& e : ranks_) e.take_inflight(out);
  }
  changed_.notify_all();
  return out;
}

std::optional<InflightBatch> RankTable::finish(int rank, uint64_t batch_id) {
  std::optional<InflightBatch> out;
  {
    std::lock_guard lock(mutex_);
    Entry& e = ranks_[static_cast<size_t>(rank)];
    auto it = e.inflight.find(batch_id);
    if (it == e.inflight.end()) return std::nullopt;
    out = std::move(it->second);
    e.inflight.erase(it);
    e.view.inflight_batches -= 1;
    e.view.inflight_tokens -= out->tokens;
  }
  changed_.notify_all();
  return out;
}

std::vector<std::pair<int, Clock::duration>> RankTable::silent(Clock::time_point cutoff) const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<int, Clock::duration>> out;
  const auto now = Clock::now();
  for (const Entry& e : ranks_) {
    const bool alive = e.view.state == RankState::kStarting || e.view.state == RankState::kReady;
    if (e.view.role != config::Role::kCoordinator && alive && e.last_beat < cutoff) {
      out.emplace_back(e.view.rank, now - e.last_beat);
    }
  }
  return out;
}

std::optional<int> RankTable::least_loaded_locked() const {
  std::optional<int> best;
  for (const Entry& e : ranks_) {
    const RankView& v = e.view;
    if (v.role != config::Role::kScorer || v.state != RankState::kReady || v.inflight_batches >= max_inflight_) continue;
    if (!best) {
      best = v.rank;
      continue;
    }
    const RankView& b = ranks_[static_cast<size_t>(*best)].view;
    if (v.inflight_tokens < b.inflight_tokens ||
        (v.inflight_tokens == b.inflight_tokens && v.inflight_batches < b.inflight_batches)) {
      best = v.rank;
    }
  }
  return best;
}

std::optional<int> RankTable::wait_for_room(Clock::time_point until) {
  std::unique_lock lock(mutex_);
  if (auto r = least_loaded_locked()) return r;
  changed_.wait_until(lock, until);
  return least_loaded_locked();
}

bool RankTable::dispatch(InflightBatch batch) {
  std::lock_guard lock(mutex_);
  Entry& e = ranks_[static_cast<size_t>(batch.rank)];
  if (e.view.state != RankState::kReady) return false;
  e.view.inflight_batches += 1;
  e.view.inflight_tokens += batch.tokens;
  const uint64_t id = batch.id;
  e.inflight.emplace(id, std::move(batch));
  return true;
}

bool RankTable::any_scorer_alive() const {
  std::lock_guard lock(mutex_);
  for (const Entry& e : ranks_) {
    if (e.view.role == config::Role::kScorer &&
        (e.view.state == RankState::kReady || e.view.state == RankState::kStarting)) {
      return true;
    }
  }
  return false;
}

void RankTable::notify() { changed_.notify_all(); }

std::vector<RankView> RankTable::view() const {
  std::lock_guard lock(mutex_);
  std::vector<RankView> out;
  for (const Entry& e : ranks_) out.push_back(e.view);
  return out;
}

uint32_t RankTable::inflight_batches() const {
  std::lock_guard lock(mutex_);
  uint32_t n = 0;
  for (const Entry& e : ranks_) n += e.view.inflight_batches;
  return n;
}

bool RankTable::all_ready() const { return !problem().has_value(); }

std::optional<std::string> RankTable::problem() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const Entry& e : ranks_) {
    if (e.view.state == RankState::kReady) continue;
    out += fmt::format("{}{} is {}{}{}", out.empty() ? "" : "; ", e.view.name, to_string(e.view.state),
                       e.view.detail.empty() ? "" : ": ", e.view.detail);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace tandem::coordinator

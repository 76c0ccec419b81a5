// The RoundScheduler's drafter ranks (round_scheduler.h, drafter_admin.h): which drafter a request
// drafts on, moving a dead drafter's requests (their context rebuilt on another drafter) and a drained
// one's (their context handed over as it is), and the drafter views of /metrics and /health.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "coordinator/round_scheduler_impl.h"
#include "engine/core/log.h"

namespace tandem::coordinator {

const char* to_string(DrainState state) {
  switch (state) {
    case DrainState::kServing: return "serving";
    case DrainState::kDraining: return "draining";
    case DrainState::kDrained: return "drained";
  }
  return "serving";
}

bool RoundScheduler::Impl::serving(int drafter) const {
  auto dead = drafters_dead.find(drafter);
  return (dead == drafters_dead.end() || !dead->second) && drain.count(drafter) == 0;
}

int RoundScheduler::Impl::pick_drafter(const TargetRank& t) const {
  int best = -1;
  size_t best_load = 0;
  for (int d : t.drafters) {
    if (!serving(d)) continue;
    size_t load = 0;
    for (const auto& [slot, e] : t.slots) load += e->drafter == d ? 1 : 0;
    if (best < 0 || load < best_load) {
      best = d;
      best_load = load;
    }
  }
  return best;
}

std::optional<ApiError> RoundScheduler::Impl::check_drafter(int rank) const {
  if (rank < 0 || rank >= topology.size()) {
    return bad_request(fmt::format("no rank {} in this job (ranks 0..{})", rank, topology.size() - 1), "rank");
  }
  auto dead = drafters_dead.find(rank);
  if (dead == drafters_dead.end()) {
    return bad_request(fmt::format("{} is not a drafter rank; only drafter ranks are drained", topology.describe(rank)),
                       "rank");
  }
  if (dead->second) return ApiError{409, fmt::format("{} is dead", topology.describe(rank)), "conflict", "rank"};
  return std::nullopt;
}

void RoundScheduler::Impl::on_drafter_dead(int rank) {
  // Its target learns it from the coordinator's PeerLost and decodes those requests plainly until the
  // move reaches it; with another drafter in service there, their context is rebuilt on it and they
  // speculate again. A pending hand-over to it goes to another drafter instead (or plainly).
  drafters_dead[rank] = true;
  for (auto& [r, t] : ranks) {
    std::vector<std::shared_ptr<Entry>> orphans;
    for (auto& [slot, e] : t.slots) {
      if (e->drafter != rank) continue;
      e->drafter = -1;
      if (!e->cancelled) orphans.push_back(e);
    }
    for (auto& e : orphans) {
      auto pending = t.moves.find(e->slot);
      const bool handoff = pending != t.moves.end() && pending->second.handoff;
      const int next = pick_drafter(t);
      if (next < 0 && !handoff) continue;
      e->drafter = next;
      e->moved = true;
      t.moves[e->slot] = Move{e->id, next, handoff};
      if (!handoff) t.view.moves += 1;
    }
  }
}

void RoundScheduler::Impl::drains_done(TargetRank& t) {
  for (int d : t.drains_sent) {
    if (auto it = drain.find(d); it != drain.end() && it->second == DrainState::kDraining) {
      it->second = DrainState::kDrained;
      log::info("{} is drained (it holds {} contexts)", topology.describe(d), drafter_slots[d]);
    }
  }
  t.drains_sent.clear();
}

std::variant<DrainView, ApiError> RoundScheduler::drain(int rank, bool force) {
  DrainView answer{rank, -1, DrainState::kDraining, 0, {}};
  {
    std::lock_guard lock(impl_->mutex);
    Impl& s = *impl_;
    const worker::Topology& topo = s.topology;
    if (auto refused = s.check_drafter(rank)) return *refused;
    if (auto it = s.drain.find(rank); it != s.drain.end()) {
      return ApiError{409, fmt::format("{} is {} already", topo.describe(rank), to_string(it->second)), "conflict",
                      "rank"};
    }
    answer.target = topo.config_of(rank).target;
    auto t = s.ranks.find(answer.target);
    if (t == s.ranks.end()) {
      return ApiError{500, fmt::format("{} drafts for rank {}, which runs no target", topo.describe(rank), answer.target),
                      "internal_error", std::nullopt};
    }
    Impl::TargetRank& target = t->second;
    s.drain[rank] = DrainState::kDraining;  // from here pick_drafter() passes it by
    const int first = s.pick_drafter(target);
    if (first < 0 && !force && !target.view.dead) {
      s.drain.erase(rank);
      return ApiError{409,
                      fmt::format("{} is the last drafter in service of {}: its requests would decode without "
                                  "speculation (\"force\": true drains it anyway)",
                                  topo.describe(rank), target.name),
                      "conflict", "rank"};
    }
    s.drains[rank] += 1;
    if (target.view.dead) {
      s.drain[rank] = DrainState::kDrained;  // its requests are gone with the target
      answer.state = DrainState::kDrained;
      return answer;
    }
    for (auto& [slot, e] : target.slots) {
      if (e->drafter != rank || e->cancelled) continue;
      const int next = s.pick_drafter(target);  // after each move, so they spread by load
      e->drafter = next;
      e->moved = true;
      target.moves[slot] = Impl::Move{e->id, next, true};
      answer.moving += 1;
      if (next >= 0 && std::find(answer.to.begin(), answer.to.end(), next) == answer.to.end()) answer.to.push_back(next);
    }
    std::sort(answer.to.begin(), answer.to.end());
    target.drains.insert(rank);
    log::info("draining {}: {} of its requests on {} move to {}", topo.describe(rank), answer.moving, target.name,
              answer.to.empty() ? std::string("plain decoding") : fmt::format("ranks {}", fmt::join(answer.to, ", ")));
  }
  impl_->events.push(Impl::Wake{});
  return answer;
}

std::variant<DrainView, ApiError> RoundScheduler::undrain(int rank) {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  const worker::Topology& topo = s.topology;
  if (auto refused = s.check_drafter(rank)) return *refused;
  if (s.drain.count(rank) == 0) {
    return ApiError{409, fmt::format("{} is in service (not drained)", topo.describe(rank)), "conflict", "rank"};
  }
  s.drain.erase(rank);
  log::info("{} is back in service", topo.describe(rank));
  return DrainView{rank, topo.config_of(rank).target, DrainState::kServing, 0, {}};
}

std::vector<DrainView> RoundScheduler::out_of_service() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<DrainView> out;
  for (const auto& [rank, state] : impl_->drain) {
    out.push_back(DrainView{rank, impl_->topology.config_of(rank).target, state, 0, {}});
  }
  return out;
}

std::vector<DrafterView> RoundScheduler::drafters() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<DrafterView> out;
  for (const auto& [r, t] : impl_->ranks) {
    for (int d : t.drafters) {
      DrafterView v{d, r, t.view.dead, 0};
      if (auto it = impl_->drafters_dead.find(d); it != impl_->drafters_dead.end()) v.dead = it->second;
      if (auto it = impl_->drafter_slots.find(d); it != impl_->drafter_slots.end()) v.slots_used = it->second;
      if (auto it = impl_->drain.find(d); it != impl_->drain.end()) v.drain = it->second;
      if (auto it = impl_->drains.find(d); it != impl_->drains.end()) v.drains = it->second;
      out.push_back(v);
    }
  }
  return out;
}

std::string RoundScheduler::problem() const {
  std::lock_guard lock(impl_->mutex);
  const Impl& s = *impl_;
  std::string out;
  auto add = [&out](const std::string& line) { out += (out.empty() ? "" : "; ") + line; };
  for (const auto& [r, t] : s.ranks) {
    if (t.view.dead) add(fmt::format("{} is dead", t.name));
    std::string serving;
    for (int other : t.drafters) {
      if (s.drafters_dead.count(other) > 0 && s.serving(other)) {
        serving += (serving.empty() ? "" : ", ") + s.topology.describe(other);
      }
    }
    for (int d : t.drafters) {
      auto dead = s.drafters_dead.find(d);
      if (dead == s.drafters_dead.end()) continue;  // a generator drafts for itself
      // A drained drafter is no problem while another one drafts for its target.
      const char* why = dead->second ? "dead" : (s.drain.count(d) > 0 && serving.empty() ? "drained" : nullptr);
      if (why == nullptr) continue;
      add(serving.empty() ? fmt::format("{} is {}: {} decodes its requests without it", s.topology.describe(d), why,
                                        t.name)
                          : fmt::format("{} is {}: {} drafts its requests on {}", s.topology.describe(d), why, t.name,
                                        serving));
    }
  }
  return out;
}

}  // namespace tandem::coordinator

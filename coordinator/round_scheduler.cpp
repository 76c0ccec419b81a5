// RoundScheduler (round_scheduler.h): events in one queue, handled on the "rounds" thread under one
// lock; callbacks run after the lock is let go, so they may submit or cancel. Drains and the drafter
// views are drafter_drain.cpp's.
#include "coordinator/round_scheduler.h"

#include "coordinator/control_plane.h"
#include "coordinator/round_scheduler_impl.h"
#include "coordinator/scheduler_metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/core/log.h"

namespace tandem::coordinator {
namespace {

GenerationFinish finish_of(worker::GenFinish f) {
  switch (f) {
    case worker::GenFinish::kNone: return GenerationFinish::kNone;
    case worker::GenFinish::kLength: return GenerationFinish::kLength;
    case worker::GenFinish::kStop: return GenerationFinish::kStop;
  }
  return GenerationFinish::kNone;
}

}  // namespace

RoundScheduler::Impl::Impl(const config::Deployment& d, const worker::Topology& t, worker::BlockingQueue<Dispatch>& o)
    : generation(d.generation), topology(t), outbox(o) {
  for (int r : t.workers()) {
    if (!config::runs_target(t.role_of(r))) continue;
    TargetRank tr;
    tr.view.rank = r;
    tr.name = t.describe(r);
    if (t.role_of(r) == config::Role::kGenerator) tr.drafters.push_back(r);
    ranks.emplace(r, std::move(tr));
  }
  for (int r : t.workers()) {
    if (t.role_of(r) != config::Role::kDrafter) continue;
    const int target = t.config_of(r).target;
    if (auto it = ranks.find(target); it != ranks.end()) it->second.drafters.push_back(r);
    drafters_dead.emplace(r, false);
  }
}

namespace {

class Handle final : public GenerationHandle {
 public:
  Handle(std::weak_ptr<RoundScheduler::Impl> impl, uint64_t id) : impl_(std::move(impl)), id_(id) {}
  void cancel() override;

 private:
  std::weak_ptr<RoundScheduler::Impl> impl_;
  uint64_t id_;
};

}  // namespace

void Handle::cancel() {
  if (auto impl = impl_.lock()) impl->events.push(RoundScheduler::Impl::Cancel{id_});
}

bool RoundScheduler::Impl::any_target_alive() const {
  for (const auto& [r, t] : ranks) {
    if (!t.view.dead) return true;
  }
  return false;
}

void RoundScheduler::Impl::finish(Entry& e, GenerationFinish f, std::optional<ApiError> error, Calls& calls,
                                  std::vector<uint32_t> tokens) {
  GenerationEvent ev;
  ev.tokens = std::move(tokens);
  ev.finish = f;
  ev.error = std::move(error);
  ev.stats = e.stats;
  calls.emplace_back(e.callback, std::move(ev));
  if (e.rank < 0) --waiting;
  entries.erase(e.id);
}

void RoundScheduler::Impl::fail_rank(TargetRank& rank, const ApiError& error, Calls& calls) {
  for (auto& [slot, e] : rank.slots) {
    if (!e->cancelled) finish(*e, GenerationFinish::kFailed, error, calls);
  }
  rank.slots.clear();
  rank.moves.clear();
  rank.in_flight = false;
  rank.view.slots_used = 0;
  // Nothing is left to move off its drained drafters.
  rank.drains_sent.insert(rank.drains_sent.end(), rank.drains.begin(), rank.drains.end());
  rank.drains.clear();
  drains_done(rank);
}

void RoundScheduler::Impl::handle(Event& event, Calls& calls) {
  if (auto* s = std::get_if<Submitted>(&event)) {
    if (stopped) {
      finish(*s->entry, GenerationFinish::kFailed, *stopped, calls);
    } else {
      queue.push_back(s->entry);
    }
  } else if (auto* c = std::get_if<Cancel>(&event)) {
    auto it = entries.find(c->id);
    if (it == entries.end() || it->second->cancelled) return;  // finished already, or cancelled twice
    std::shared_ptr<Entry> e = it->second;
    e->cancelled = true;
    if (e->rank < 0) queue.erase(std::remove(queue.begin(), queue.end(), e), queue.end());
    // A request holding a slot keeps it until the next round's releases free it on the rank.
    finish(*e, GenerationFinish::kCancelled, std::nullopt, calls);
  } else if (std::holds_alternative<Ready>(event) || std::holds_alternative<Wake>(event)) {
    // on_ready() and drain() already recorded it (so submit() checks against the vocabulary at once, and
    // a drain is answered at once): schedule.
  } else if (auto* d = std::get_if<Done>(&event)) {
    auto it = ranks.find(d->rank);
    if (it == ranks.end() || !it->second.in_flight || d->done.round != it->second.round) {
      log::warn("round scheduler: rank {} answered round {}, which is not in flight there", d->rank, d->done.round);
      return;
    }
    TargetRank& t = it->second;
    t.in_flight = false;
    const worker::RoundDone& done = d->done;
    t.view.rounds += 1;
    t.view.rank_slots_used = done.slots_used;
    t.view.prefill_us += done.prefill_us;
    t.view.wait_us += done.wait_us;
    for (const worker::DrafterReport& dr : done.drafters) {
      t.view.drafter_us += dr.settle_us + dr.draft_us;
      t.view.drafter_device_to_host_bytes += dr.device_to_host_bytes;
      drafter_slots[dr.rank] = dr.slots_used;
    }
    t.view.verify_us += done.verify_us;
    t.view.send_us += done.send_us;
    t.view.bytes_moved += done.bytes_sent + done.bytes_received;
    t.view.device_to_host_bytes += done.device_to_host_bytes;
    t.view.guesses += done.guesses;
    t.view.guesses_used += done.guesses_used;
    t.view.handoffs += done.handoffs;
    drains_done(t);
    for (const worker::GenResult& g : done.results) {
      auto held = t.slots.find(g.slot);
      if (held == t.slots.end() || held->second->id != g.request) {
        log::warn("round scheduler: {} reported request {} in slot {}, which does not hold it", t.name, g.request,
                  g.slot);
        continue;
      }
      std::shared_ptr<Entry> e = held->second;
      const GenerationFinish f = finish_of(g.finish);
      if (f != GenerationFinish::kNone) t.slots.erase(held);  // the rank freed the slot itself
      if (e->cancelled) continue;
      t.view.tokens += g.tokens.size();
      t.view.drafted += g.drafted;
      t.view.accepted += g.accepted;
      if (e->moved) t.view.moved_accepted += g.accepted;
      if (e->prefilled) {
        e->stats.rounds += 1;
        e->stats.drafted += g.drafted;
        e->stats.accepted += g.accepted;
        if (e->stats.accepted_per_position.size() < g.accepted) e->stats.accepted_per_position.resize(g.accepted);
        for (uint32_t k = 0; k < g.accepted; ++k) e->stats.accepted_per_position[k] += 1;
      }
      e->prefilled = true;
      if (f != GenerationFinish::kNone) {
        finish(*e, f, std::nullopt, calls, g.tokens);
      } else {
        GenerationEvent ev;
        ev.tokens = g.tokens;
        ev.stats = e->stats;
        calls.emplace_back(e->callback, std::move(ev));
      }
    }
    t.view.slots_used = static_cast<uint32_t>(t.slots.size());
  } else if (auto* f = std::get_if<Failed>(&event)) {
    auto it = ranks.find(f->rank);
    if (it == ranks.end()) return;
    log::error("{} failed round {}: {}", it->second.name, f->failed.round, f->failed.message);
    fail_rank(it->second,
              ApiError{500, fmt::format("{} failed round {}: {}", it->second.name, f->failed.round, f->failed.message),
                       "internal_error", std::nullopt},
              calls);
  } else if (auto* dd = std::get_if<Dead>(&event)) {
    if (drafters_dead.count(dd->rank) > 0) {
      on_drafter_dead(dd->rank);
      return;
    }
    auto it = ranks.find(dd->rank);
    if (it == ranks.end()) return;
    it->second.view.dead = true;
    it->second.view.ready = false;
    fail_rank(it->second, unavailable(fmt::format("{} died while generating: {}", it->second.name, dd->why)), calls);
    if (!any_target_alive()) {
      const ApiError error = unavailable("no target rank is alive");
      for (auto& e : queue) finish(*e, GenerationFinish::kFailed, error, calls);
      queue.clear();
    }
  } else if (auto* st = std::get_if<Stop>(&event)) {
    stopped = st->error;
    for (auto& e : queue) finish(*e, GenerationFinish::kFailed, st->error, calls);
    queue.clear();
    for (auto& [rank, t] : ranks) fail_rank(t, st->error, calls);
  }
}

void RoundScheduler::Impl::send_round(TargetRank& t, std::vector<std::shared_ptr<Entry>> admits) {
  worker::Round round;
  round.round = ++t.round;
  for (auto it = t.slots.begin(); it != t.slots.end();) {
    if (it->second->cancelled) {
      round.releases.push_back(it->first);
      it = t.slots.erase(it);
    } else {
      ++it;
    }
  }
  const auto decoding = static_cast<uint32_t>(t.slots.size());
  round.block = decoding > 0 ? generation.block_for(decoding, t.block) : 0;
  for (auto& e : admits) {
    uint32_t slot = 0;
    while (t.slots.count(slot) > 0) ++slot;  // INVARIANT: schedule() admits only into free slots
    e->rank = t.view.rank;
    e->slot = slot;
    t.slots.emplace(slot, e);
    worker::GenAdmit a;
    a.request = e->id;
    a.slot = slot;
    e->drafter = e->request.speculative ? pick_drafter(t) : -1;
    a.drafter = e->drafter;
    a.max_tokens = e->request.max_tokens;
    a.temperature = e->request.sampling.temperature;
    a.top_p = e->request.sampling.top_p;
    a.seed = e->request.sampling.seed;
    a.prompt = e->request.prompt;
    a.stop_ids = e->request.stop_ids;
    round.admits.push_back(std::move(a));
  }
  // Hand-overs go at once; rebuilds only with a free slot for the target's recompute (a hand-over that
  // fails falls back on it too, or on any slot free then).
  uint32_t scratch = 0;
  while (t.slots.count(scratch) > 0) ++scratch;
  for (auto it = t.moves.begin(); it != t.moves.end();) {
    const auto& [slot, move] = *it;
    if (!move.handoff && scratch >= t.view.slots) {
      ++it;
      continue;
    }
    auto held = t.slots.find(slot);
    if (held != t.slots.end() && held->second->id == move.id && !held->second->cancelled) {
      round.moves.push_back({slot, move.to, scratch});
      t.view.drain_moves += move.handoff ? 1 : 0;
    }
    it = t.moves.erase(it);
  }
  round.drains.assign(t.drains.begin(), t.drains.end());
  t.drains_sent.assign(t.drains.begin(), t.drains.end());
  t.drains.clear();
  if (decoding == 0 && round.admits.empty() && round.releases.empty() && round.drains.empty()) {
    --t.round;
    return;
  }
  t.view.last_block = round.block;
  t.view.slots_used = static_cast<uint32_t>(t.slots.size());
  t.in_flight = true;
  outbox.push(Dispatch{t.view.rank, worker::encode(round)});
}

void RoundScheduler::Impl::schedule(Calls& calls) {
  if (stopped) return;
  // Queued requests go, in order, to the idle ready rank with the most free slots.
  std::map<int, std::vector<std::shared_ptr<Entry>>> admits;
  while (!queue.empty()) {
    TargetRank* best = nullptr;
    uint32_t best_free = 0;
    for (auto& [r, t] : ranks) {
      if (!t.view.ready || t.view.dead || t.in_flight) continue;
      uint32_t held = 0;
      for (const auto& [slot, e] : t.slots) held += e->cancelled ? 0 : 1;
      // A pending rebuild keeps one slot free for the target's recompute.
      const auto taken = static_cast<uint32_t>(held + admits[r].size() + (t.rebuilds_pending() ? 1 : 0));
      const uint32_t free = t.view.slots > taken ? t.view.slots - taken : 0;
      if (free > best_free) {
        best = &t;
        best_free = free;
      }
    }
    if (best == nullptr) break;
    std::shared_ptr<Entry> e = queue.front();
    queue.pop_front();
    const size_t need = e->request.prompt.size() + e->request.max_tokens;
    if (need > best->max_context) {
      finish(*e, GenerationFinish::kFailed,
             bad_request(fmt::format("a prompt of {} tokens and max_tokens {} exceed the {} positions {} holds per "
                                     "request",
                                     e->request.prompt.size(), e->request.max_tokens, best->max_context, best->name),
                         "max_tokens"),
             calls);
      continue;
    }
    --waiting;
    admits[best->view.rank].push_back(std::move(e));
  }
  for (auto& [r, t] : ranks) {
    if (!t.view.ready || t.view.dead || t.in_flight) continue;
    send_round(t, std::move(admits[r]));
  }
}

void RoundScheduler::Impl::run() {
  worker::name_this_thread("rounds");
  for (;;) {
    std::optional<Event> first = events.pop();
    if (!first) return;
    Calls calls;
    bool stop = false;
    {
      std::lock_guard lock(mutex);
      std::optional<Event> e = std::move(first);
      while (e) {
        stop = stop || std::holds_alternative<Stop>(*e);
        handle(*e, calls);
        e = events.try_pop();
      }
      schedule(calls);
    }
    for (auto& [callback, ev] : calls) {
      if (callback) callback(ev);
    }
    if (stop) return;
  }
}

RoundScheduler::RoundScheduler(const config::Deployment& deployment, const worker::Topology& topology,
                               worker::BlockingQueue<Dispatch>& outbox)
    : impl_(std::make_shared<Impl>(deployment, topology, outbox)) {
  impl_->thread = std::thread([impl = impl_] { impl->run(); });
}

RoundScheduler::~RoundScheduler() {
  stop(unavailable("the server is shutting down"));
}

void RoundScheduler::stop(const ApiError& error) {
  if (!impl_->thread.joinable()) return;
  impl_->events.push(Impl::Stop{error});
  impl_->thread.join();
  impl_->events.close();
}

std::variant<std::shared_ptr<GenerationHandle>, ApiError> RoundScheduler::submit(GenerationRequest request,
                                                                                GenerationCallback callback) {
  if (request.prompt.empty()) return bad_request("the prompt holds no tokens", "prompt");
  if (request.max_tokens < 1) return bad_request("max_tokens must be at least 1", "max_tokens");
  const uint32_t vocab_size = vocab();
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (vocab_size && request.prompt[i] >= vocab_size) {
      return bad_request(fmt::format("prompt[{}]: token id {} is outside the vocabulary of {}", i, request.prompt[i],
                                     vocab_size),
                         "prompt");
    }
  }
  for (size_t i = 0; i < request.stop_ids.size(); ++i) {
    if (vocab_size && request.stop_ids[i] >= vocab_size) {
      return bad_request(fmt::format("stop_ids[{}]: token id {} is outside the vocabulary of {}", i,
                                     request.stop_ids[i], vocab_size),
                         "stop_ids");
    }
  }
  auto e = std::make_shared<Impl::Entry>();
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) return *impl_->stopped;
    if (!impl_->any_target_alive()) return unavailable("no target rank is alive");
    if (impl_->waiting >= impl_->generation.max_queue_requests) {
      return ApiError{429,
                      fmt::format("the generation queue is full ({} requests waiting, generation.max_queue_requests)",
                                  impl_->waiting),
                      "queue_full", std::nullopt};
    }
    e->id = impl_->next_id++;
    e->request = std::move(request);
    e->callback = std::move(callback);
    impl_->entries.emplace(e->id, e);
    ++impl_->waiting;
  }
  const uint64_t id = e->id;
  impl_->events.push(Impl::Submitted{std::move(e)});
  return std::shared_ptr<GenerationHandle>(std::make_shared<Handle>(impl_, id));
}

uint32_t RoundScheduler::vocab() const {
  std::lock_guard lock(impl_->mutex);
  for (const auto& [r, t] : impl_->ranks) {
    if (t.vocab) return t.vocab;
  }
  return 0;
}

uint32_t RoundScheduler::max_context() const {
  std::lock_guard lock(impl_->mutex);
  uint32_t most = 0;
  for (const auto& [r, t] : impl_->ranks) {
    if (t.view.ready && (most == 0 || t.max_context < most)) most = t.max_context;
  }
  return most;
}

void RoundScheduler::on_ready(int rank, const worker::Ready& ready) {
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->ranks.find(rank);
    if (it == impl_->ranks.end()) return;
    Impl::TargetRank& t = it->second;
    t.view.ready = true;
    t.view.slots = ready.slots;
    t.block = ready.block;
    t.max_context = ready.max_context;
    t.vocab = ready.vocab;
  }
  impl_->events.push(Impl::Ready{rank, ready});
}
void RoundScheduler::on_round_done(int rank, worker::RoundDone done) {
  impl_->events.push(Impl::Done{rank, std::move(done)});
}
void RoundScheduler::on_round_failed(int rank, const worker::RoundFailed& failed) {
  impl_->events.push(Impl::Failed{rank, failed});
}
void RoundScheduler::on_dead(int rank, const std::string& why) { impl_->events.push(Impl::Dead{rank, why}); }

std::vector<TargetRankView> RoundScheduler::targets() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<TargetRankView> out;
  for (const auto& [r, t] : impl_->ranks) out.push_back(t.view);
  return out;
}

size_t RoundScheduler::queued() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->queue.size();
}

size_t RoundScheduler::decoding() const {
  std::lock_guard lock(impl_->mutex);
  size_t n = 0;
  for (const auto& [r, t] : impl_->ranks) n += t.slots.size();
  return n;
}

void RoundScheduler::render_metrics(std::string& out) const { out += render_scheduler_metrics(*this); }

std::unique_ptr<RoundScheduler> make_generation_service(const config::Deployment& deployment,
                                                        const worker::Topology& topology,
                                                        worker::BlockingQueue<Dispatch>& outbox, ControlPlane& control) {
  if (!deployment.serves_generation()) return nullptr;
  auto scheduler = std::make_unique<RoundScheduler>(deployment, topology, outbox);
  control.set_round_events(scheduler.get());
  return scheduler;
}

const char* to_string(GenerationFinish f) {
  switch (f) {
    case GenerationFinish::kNone: return "";
    case GenerationFinish::kLength: return "length";
    case GenerationFinish::kStop: return "stop";
    case GenerationFinish::kCancelled: return "cancelled";
    case GenerationFinish::kFailed: return "failed";
  }
  return "";
}

}  // namespace tandem::coordinator

// RoundScheduler (round_scheduler.h): events in one queue, handled on the "rounds" thread under one
// lock; callbacks run after the lock is let go, so they may submit or cancel.
#include "coordinator/round_scheduler.h"

#include "coordinator/control_plane.h"
#include "coordinator/scheduler_metrics.h"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/core/log.h"

namespace tandem::coordinator {
namespace {

struct Entry {
  uint64_t id = 0;
  GenerationRequest request;
  GenerationCallback callback;
  int rank = -1;  // -1 while queued
  uint32_t slot = 0;
  int drafter = -1;  // the rank drafting for it; -1: plain decoding
  bool moved = false;  // its drafter died and another one took it over
  bool cancelled = false;
  bool prefilled = false;
  SpeculativeStats stats;
};

struct TargetRank {
  TargetRankView view;
  std::string name;
  uint32_t block = 0;        // the rank's block size (Ready)
  uint32_t max_context = 0;
  uint32_t vocab = 0;
  bool in_flight = false;
  uint64_t round = 0;
  std::vector<int> drafters;  // a generator: itself; a target: its drafter ranks
  std::map<uint32_t, std::shared_ptr<Entry>> slots;  // occupied slots
  // Drafter context moves not sent yet, by slot: the request there and its new drafter. They wait for
  // a free slot (the target recomputes the tap rows there), which schedule() keeps from admissions.
  std::map<uint32_t, std::pair<uint64_t, int>> moves;
};

struct Submitted {
  std::shared_ptr<Entry> entry;
};
struct Cancel {
  uint64_t id = 0;
};
struct Ready {
  int rank = -1;
  worker::Ready ready;
};
struct Done {
  int rank = -1;
  worker::RoundDone done;
};
struct Failed {
  int rank = -1;
  worker::RoundFailed failed;
};
struct Dead {
  int rank = -1;
  std::string why;
};
struct Stop {
  ApiError error;
};
using Event = std::variant<Submitted, Cancel, Ready, Done, Failed, Dead, Stop>;

GenerationFinish finish_of(worker::GenFinish f) {
  switch (f) {
    case worker::GenFinish::kNone: return GenerationFinish::kNone;
    case worker::GenFinish::kLength: return GenerationFinish::kLength;
    case worker::GenFinish::kStop: return GenerationFinish::kStop;
  }
  return GenerationFinish::kNone;
}

}  // namespace

struct RoundScheduler::Impl {
  Impl(const config::Deployment& d, const worker::Topology& t, worker::BlockingQueue<Dispatch>& o)
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
  // The live drafter of `t` with the fewest requests; -1 when none is alive.
  int pick_drafter(const TargetRank& t) const {
    int best = -1;
    size_t best_load = 0;
    for (int d : t.drafters) {
      if (auto it = drafters_dead.find(d); it != drafters_dead.end() && it->second) continue;
      size_t load = 0;
      for (const auto& [slot, e] : t.slots) load += e->drafter == d ? 1 : 0;
      if (best < 0 || load < best_load) {
        best = d;
        best_load = load;
      }
    }
    return best;
  }

  using Calls = std::vector<std::pair<GenerationCallback, GenerationEvent>>;

  void run();
  void handle(Event& e, Calls& calls);
  void schedule(Calls& calls);
  void send_round(TargetRank& rank, std::vector<std::shared_ptr<Entry>> admits);
  void finish(Entry& e, GenerationFinish f, std::optional<ApiError> error, Calls& calls, std::vector<uint32_t> tokens = {});
  void fail_rank(TargetRank& rank, const ApiError& error, Calls& calls);
  bool any_target_alive() const;

  config::Generation generation;
  const worker::Topology& topology;
  worker::BlockingQueue<Dispatch>& outbox;
  worker::BlockingQueue<Event> events;
  std::thread thread;

  mutable std::mutex mutex;  // everything below
  std::map<int, TargetRank> ranks;
  std::map<int, bool> drafters_dead;  // drafter ranks (role drafter): whether declared dead
  std::map<int, uint32_t> drafter_slots;  // what each drafter (or generator) reported last
  std::deque<std::shared_ptr<Entry>> queue;
  size_t waiting = 0;  // submitted, not yet admitted nor ended (also those still in `events`)
  std::map<uint64_t, std::shared_ptr<Entry>> entries;  // queued or holding a slot
  uint64_t next_id = 1;
  std::optional<ApiError> stopped;
};

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
  if (auto impl = impl_.lock()) impl->events.push(Cancel{id_});
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
  } else if (std::holds_alternative<Ready>(event)) {
    // on_ready() already recorded it (so submit() checks against the vocabulary at once): schedule.
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
      drafter_slots[dr.rank] = dr.slots_used;
    }
    t.view.verify_us += done.verify_us;
    t.view.send_us += done.send_us;
    t.view.bytes_moved += done.bytes_sent + done.bytes_received;
    t.view.guesses += done.guesses;
    t.view.guesses_used += done.guesses_used;
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
    if (auto gone = drafters_dead.find(dd->rank); gone != drafters_dead.end()) {
      // Its target learns it from the coordinator's PeerLost and decodes those requests plainly.
      // The target decodes them plainly until the move reaches it; with another live drafter there, their
      // context is rebuilt on it and they speculate again.
      gone->second = true;
      for (auto& [r, t] : ranks) {
        std::vector<std::shared_ptr<Entry>> orphans;
        for (auto& [slot, e] : t.slots) {
          if (e->drafter != dd->rank) continue;
          e->drafter = -1;
          if (!e->cancelled) orphans.push_back(e);
        }
        for (auto& e : orphans) {
          const int next = pick_drafter(t);
          if (next < 0) continue;
          e->drafter = next;
          e->moved = true;
          t.moves[e->slot] = {e->id, next};
          t.view.moves += 1;
        }
      }
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
  if (!t.moves.empty()) {
    uint32_t scratch = 0;
    while (t.slots.count(scratch) > 0) ++scratch;
    if (scratch < t.view.slots) {
      for (const auto& [slot, move] : t.moves) {
        auto held = t.slots.find(slot);
        if (held == t.slots.end() || held->second->id != move.first || held->second->cancelled) continue;
        round.moves.push_back({slot, move.second, scratch});
      }
      t.moves.clear();
    }
  }
  if (decoding == 0 && round.admits.empty() && round.releases.empty()) {
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
      // A pending drafter move keeps one slot free for the target's recompute.
      const auto taken = static_cast<uint32_t>(held + admits[r].size() + (t.moves.empty() ? 0 : 1));
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
  impl_->events.push(Stop{error});
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
  auto e = std::make_shared<Entry>();
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
  impl_->events.push(Submitted{std::move(e)});
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
    TargetRank& t = it->second;
    t.view.ready = true;
    t.view.slots = ready.slots;
    t.block = ready.block;
    t.max_context = ready.max_context;
    t.vocab = ready.vocab;
  }
  impl_->events.push(Ready{rank, ready});
}
void RoundScheduler::on_round_done(int rank, worker::RoundDone done) {
  impl_->events.push(Done{rank, std::move(done)});
}
void RoundScheduler::on_round_failed(int rank, const worker::RoundFailed& failed) {
  impl_->events.push(Failed{rank, failed});
}
void RoundScheduler::on_dead(int rank, const std::string& why) { impl_->events.push(Dead{rank, why}); }

std::vector<TargetRankView> RoundScheduler::targets() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<TargetRankView> out;
  for (const auto& [r, t] : impl_->ranks) out.push_back(t.view);
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
      out.push_back(v);
    }
  }
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

std::string RoundScheduler::problem() const {
  std::lock_guard lock(impl_->mutex);
  std::string out;
  for (const auto& [r, t] : impl_->ranks) {
    if (t.view.dead) out += (out.empty() ? "" : "; ") + fmt::format("{} is dead", t.name);
    for (int d : t.drafters) {
      auto it = impl_->drafters_dead.find(d);
      if (it == impl_->drafters_dead.end() || !it->second) continue;
      std::string live;
      for (int other : t.drafters) {
        auto o = impl_->drafters_dead.find(other);
        if (o != impl_->drafters_dead.end() && !o->second) live += (live.empty() ? "" : ", ") + impl_->topology.describe(other);
      }
      out += (out.empty() ? "" : "; ") +
             (live.empty()
                  ? fmt::format("{} is dead: {} decodes its requests without it", impl_->topology.describe(d), t.name)
                  : fmt::format("{} is dead: {} drafts its requests on {}", impl_->topology.describe(d), t.name, live));
    }
  }
  return out;
}

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

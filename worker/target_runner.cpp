// The target's round runner (batch_runner.h) for the generator and target roles, serving the
// coordinator's Round commands (architecture.md "A speculative round"): releases, then one verify round
// for the requests already decoding (drafts first: its own drafter, or its drafter ranks over the data
// plane), then the admits' prefill. A request whose drafter died moves to another drafter rank with the
// tap rows of its positions, recomputed on a free slot; one whose drafter is drained has its context
// handed over to the other drafter as it is (Drafting::hand_over).
#include <algorithm>
#include <exception>
#include <map>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "engine/backends/backend_factory.h"
#include "engine/core/elapsed.h"
#include "engine/core/log.h"
#include "engine/io/hf_config.h"
#include "engine/spec/spec.h"
#include "worker/batch_runner.h"
#include "worker/drafting_impl.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

GenFinish to_wire(spec::Finish f) {
  switch (f) {
    case spec::Finish::kNone: return GenFinish::kNone;
    case spec::Finish::kLength: return GenFinish::kLength;
    case spec::Finish::kStop: return GenFinish::kStop;
  }
  return GenFinish::kNone;
}

// One request decoding in a slot.
struct Live {
  uint64_t id = 0;
  int drafter = -1;  // its drafter's rank; -1: plain decoding
  spec::Request request;
  size_t reported = 0;  // tokens already sent to the coordinator
  uint32_t drafted = 0;
  uint32_t accepted = 0;
};

class TargetRunner final : public RankRunner {
 public:
  TargetRunner(std::string name, config::Generation generation, int rank, std::string role)
      : name_(std::move(name)), generation_(std::move(generation)), rank_(rank), role_(std::move(role)) {}

  // With `links` (a target rank: one per drafter rank) the drafts come over the data plane; without,
  // from a drafter loaded here (a generator).
  Status load(const config::Model& target, const config::Model& drafter, const config::Backend& backend,
              std::map<int, std::unique_ptr<comm::Link>> links, std::chrono::milliseconds wait,
              const Stopping& stopping) {
    TANDEM_ASSIGN(const io::Qwen3Config tcfg, io::load_qwen3_config(target.dir + "/config.json"));
    TANDEM_ASSIGN(const io::DFlashConfig dcfg, io::load_dflash_config(drafter.dir + "/config.json"));
    capacity_ = generation_.kv_capacity ? generation_.kv_capacity : tcfg.max_position_embeddings;
    block_ = generation_.block_size ? generation_.block_size : dcfg.block_size;
    if (capacity_ <= block_ + 1) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "generation.kv_capacity: {} positions leave no room for a prompt beside a block of {}",
                         capacity_, block_);
    }
    TANDEM_ASSIGN(backend_, make_rank_backend(backend));
    mode_ = generation_.verify == config::Verify::kReject ? spec::VerifyMode::kReject : spec::VerifyMode::kMatch;
    // Rejection sampling reads the target's logits on the host only where the proposals are there: a
    // generator on the CPU reference. A generator on a GPU rejects on it, and so does a target rank, whose
    // drafter ranks' proposals are placed on its backend (remote_proposals.cpp).
    const bool host_logits = mode_ == spec::VerifyMode::kReject && role_ != "target" && backend_->caps().name == "cpu";
    models::qwen3::TargetOptions topt{dcfg.target_layer_ids, generation_.slots, capacity_, nullptr, host_logits};
    TANDEM_ASSIGN(target_, models::qwen3::Target::open(*backend_, target.dir, topt));
    if (role_ == "target") {
      drafting_ = make_remote_drafting(std::move(links), target_->tap_width(), wait, mode_, target_->vocab(),
                                       generation_.overlap, *backend_);
      return warm_up(stopping);
    }
    models::dflash::DrafterOptions dopt{generation_.slots, capacity_, block_, std::nullopt, nullptr};
    if (!drafter.quantization.empty()) {
      TANDEM_ASSIGN(dopt.quantization, models::dflash::parse_quantization(drafter.quantization));
    }
    TANDEM_ASSIGN(drafter_, models::dflash::Drafter::open(*backend_, drafter.dir, target.dir, dopt));
    drafting_ = make_local_drafting(*drafter_, mode_, rank_, spec::tap_route(*target_, drafter_.get()));
    return warm_up(stopping);
  }

  // generation.warm_up: every plan a round of up to `slots` requests uses is lowered before the rank
  // says it is ready, so no request waits for a first use (on CUDA: seconds per plan). A stop ends it
  // at the next plan (`stopping`), not after all of them: at 32 slots on an H200 they take minutes.
  Status warm_up(const Stopping& stopping) {
    if (!generation_.warm_up) return ok_status();
    const auto t0 = Clock::now();
    TANDEM_ASSIGN(const size_t target_plans, target_->prepare_rounds(generation_.slots, block_, stopping));
    size_t drafter_plans = 0;
    if (drafter_) {
      TANDEM_ASSIGN(drafter_plans, drafter_->prepare_rounds(generation_.slots, block_, stopping));
    }
    log::info("{} rank {}: warm-up lowered {} target and {} drafter plans in {:.1f} s", role_, rank_, target_plans,
              drafter_plans, static_cast<double>(us_since(t0)) / 1e6);
    return ok_status();
  }

  RunnerInfo info() const override {
    const ir::Caps caps = backend_->caps();
    // Plans: those the warm-up lowered (later first uses add to them).
    RunnerInfo i{role_, name_, caps.name, caps.device, target_->weight_bytes(), target_->plan_bytes(),
                 target_->vocab()};
    i.state_bytes = target_->cache().bytes();
    if (drafter_) {
      i.weight_bytes += drafter_->weight_bytes();
      i.plan_bytes += drafter_->plan_bytes();
      i.state_bytes += drafter_->context().bytes();
    }
    i.slots = generation_.slots;
    i.capacity = capacity_;
    i.block = block_;
    // The last round may verify a whole block past the request's last token.
    i.max_context = capacity_ - block_ - 1;
    return i;
  }

  void serve(Mailbox& mail, Outbox& out, int coordinator) override {
    auto report = [&](const Message& m) { out.push(Outgoing{coordinator, tag_for(m, false), encode(m)}); };
    while (auto command = mail.pop_command(Clock::time_point::max())) {
      auto* round = std::get_if<Round>(&*command);
      if (round == nullptr) {
        log::warn("a {} rank ignores {} commands", role_, to_string(kind_of(*command)));
        continue;
      }
      Result<RoundDone> done = Error(ErrorKind::kInternal, "not run");
      try {
        done = run_round(*round);
      } catch (const std::exception& e) {
        done = Error::make(ErrorKind::kInternal, "exception in round {}: {}", round->round, e.what());
      }
      if (done.ok()) {
        report(std::move(done).value());
      } else {
        // The slots' state is unknown after a failed step: every request here is dropped (the
        // coordinator fails them all and frees their slots).
        std::vector<uint32_t> slots;
        for (const auto& [slot, live] : live_) slots.push_back(slot);
        for (uint32_t slot : slots) erase(slot);
        report(RoundFailed{round->round, done.error().message()});
      }
    }
  }

 private:
  Result<RoundDone> run_round(const Round& round) {
    RoundDone done;
    done.round = round.round;
    // What the round copies from the GPU to the host (ids only on a generator: tandem_gen_device_to_host_bytes).
    const std::optional<uint64_t> d2h_before = backends::device_to_host_bytes(*backend_);
    const auto count_d2h = [&] {
      const std::optional<uint64_t> after = backends::device_to_host_bytes(*backend_);
      if (d2h_before && after) done.device_to_host_bytes = *after - *d2h_before;
    };
    for (uint32_t slot : round.releases) erase(slot);  // a slot already free is fine
    TANDEM_TRY(hand_over(round, done));
    for (size_t i = 0; i < round.moves.size(); ++i) TANDEM_TRY(move(round.moves[i], done));
    TANDEM_TRY(verify_live(round.round, round.block, done));
    TANDEM_TRY(admit(round, done));
    std::vector<uint32_t> finished;
    for (const auto& [slot, live] : live_) {
      if (!live.request.active()) finished.push_back(slot);
    }
    for (uint32_t slot : finished) erase(slot);
    done.slots_used = static_cast<uint32_t>(live_.size());
    count_d2h();
    return done;
  }

  // The drains of the round: each drained drafter hands the contexts of its requests that move to another
  // live drafter over as they are (their pending tap rows stay here for the next ask); the moves left
  // (a hand-over that failed, plain decoding) go through move() with their drafter already let go.
  Status hand_over(const Round& round, RoundDone& done) {
    for (const int from : round.drains) {
      std::vector<Handoff> handoffs;
      for (const GenMove& m : round.moves) {
        auto it = live_.find(m.slot);
        if (it == live_.end() || it->second.drafter != from) continue;
        // The hand-over frees its context on `from` whatever comes of it; -1 (plain decoding) moves nowhere.
        it->second.drafter = -1;
        handoffs.push_back({m.slot, it->second.request.settled, m.drafter, false});
      }
      TANDEM_TRY(drafting_->hand_over(from, handoffs, round.round, done));
      for (const Handoff& h : handoffs) {
        if (!h.moved) continue;
        live_.at(h.slot).drafter = h.to;
        done.handoffs += 1;
      }
    }
    return ok_status();
  }

  // A request's drafter context moves to `m.drafter` (its drafter died, or a hand-over failed): the tap
  // rows of every position it committed are recomputed on a free slot (`m.scratch`, else the first free
  // one; its own KV cache stays as it is) and go with its next ask, which starts the context there
  // afresh. -1, a drafter this rank lost too, or no free slot: plain decoding. A request handed over
  // already is left as it is.
  Status move(const GenMove& m, RoundDone& done) {
    auto it = live_.find(m.slot);
    if (it == live_.end() || (m.drafter >= 0 && it->second.drafter == m.drafter)) return ok_status();
    Live& live = it->second;
    drafting_->release(m.slot, live.drafter);  // frees a live drafter's context; drops kept guesses
    live.drafter = -1;
    live.request.taps.clear();
    live.request.settled = live.request.start;
    if (m.drafter < 0 || !drafting_->alive(m.drafter) || !live.request.active()) return ok_status();
    uint32_t scratch = m.scratch;
    if (scratch >= generation_.slots || live_.count(scratch) > 0) {
      scratch = 0;
      while (scratch < generation_.slots && live_.count(scratch) > 0) ++scratch;
    }
    if (scratch >= generation_.slots) {
      log::warn("{} rank {}: no free slot to rebuild slot {}'s drafter context on: it decodes plainly", role_, rank_,
                m.slot);
      return ok_status();
    }
    spec::Request& r = live.request;
    std::vector<models::qwen3::TargetRows> rows{
        {scratch, std::span<const uint32_t>(r.tokens).first(r.start), models::qwen3::LogitRows::kLast, {}}};
    std::vector<models::qwen3::TargetOut> out;
    const auto t0 = Clock::now();
    TANDEM_TRY(target_->cache().crop(scratch, 0));
    Status s = target_->forward_fetching_taps(rows, out);
    Status c = target_->cache().crop(scratch, 0);
    done.prefill_us += us_since(t0);  // a prefill of the request's positions, on the scratch slot
    TANDEM_TRY(std::move(s));
    TANDEM_TRY(std::move(c));
    r.taps = std::move(out.at(0).taps.data);
    r.settled = 0;
    r.keeps_taps = true;  // a request admitted for plain decoding drafts from here
    live.drafter = m.drafter;
    return ok_status();
  }

  void erase(uint32_t slot) {
    auto it = live_.find(slot);
    if (it == live_.end()) return;
    if (it->second.drafter >= 0) drafting_->release(slot, it->second.drafter);
    live_.erase(it);
  }

  // Every live request's round: drafts where it has a drafter, then one verify, in groups of
  // Drafting::group (all at once but for rejection sampling on the device).
  Status verify_live(uint64_t round, uint32_t block, RoundDone& done) {
    if (live_.empty()) return ok_status();
    std::vector<Live*> all;
    for (auto& [slot, live] : live_) all.push_back(&live);
    size_t group = std::max<size_t>(drafting_->group(block), 1);
    // On TapRoute::kDevice a group's tap rows must all be in the target's last run: rows of an earlier run
    // of the same call would be fetched to the host before the next one overwrites them.
    if (drafting_->route() == spec::TapRoute::kDevice) {
      group = std::min<size_t>(group, std::max<uint32_t>(target_->seqs_per_run(std::max<uint32_t>(block, 1)), 1));
    }
    for (size_t at = 0; at < all.size(); at += group) {
      const std::span<Live* const> lives(all.data() + at, std::min(group, all.size() - at));
      TANDEM_TRY(verify_group(lives, round, block, done));
    }
    TANDEM_TRY(drafting_->collect(round, done));
    for (Live* live : all) done.results.push_back(result_of(*live));
    return ok_status();
  }

  Status verify_group(std::span<Live* const> lives, uint64_t round, uint32_t block, RoundDone& done) {
    std::vector<Live*> drafting_live;
    std::vector<spec::Request*> requests, drafting;
    std::vector<int> drafters;
    for (Live* live : lives) {
      requests.push_back(&live->request);
      if (live->drafter >= 0 && block >= 2) {
        drafting_live.push_back(live);
        drafting.push_back(&live->request);
        drafters.push_back(live->drafter);
      }
    }
    std::vector<spec::Draft> drafts(requests.size());
    if (!drafting.empty()) {
      std::vector<spec::Draft> made;
      TANDEM_TRY(drafting_->draft(drafting, drafters, block, round, made, done));
      size_t k = 0;
      for (size_t i = 0; i < requests.size() && k < drafting.size(); ++i) {
        if (requests[i] == drafting[k]) drafts[i] = std::move(made[k++]);
      }
      // A lost drafter's requests go on plainly (their drafts this round are empty).
      for (Live* live : drafting_live) {
        if (!drafting_->alive(live->drafter)) live->drafter = -1;
      }
    }
    const auto t0 = Clock::now();
    TANDEM_TRY(spec::verify(*target_, requests, drafts, mode_, false, drafting_->route()));
    done.verify_us += us_since(t0);
    return after_target_run(lives, done);
  }

  // After a target run over `lives`: a request that never drafts keeps no drafter context (its tap rows are
  // dropped), and on TapRoute::kDevice the others' rows settle now, before the target runs again.
  Status after_target_run(std::span<Live* const> lives, RoundDone& done) {
    std::vector<spec::Request*> settle;
    std::vector<int> drafters;
    for (Live* live : lives) {
      spec::Request& r = live->request;
      if (live->drafter < 0) {
        r.taps.clear();
        r.device_taps = {};
        r.settled = r.start;
      } else if (r.active()) {
        settle.push_back(&r);
        drafters.push_back(live->drafter);
      }
    }
    return drafting_->settle_now(settle, drafters, done);
  }

  Status admit(const Round& round, RoundDone& done) {
    if (round.admits.empty()) return ok_status();
    std::vector<spec::Request*> requests;
    std::vector<Live*> admitted;
    for (size_t i = 0; i < round.admits.size(); ++i) {
      const GenAdmit& a = round.admits[i];
      if (a.slot >= generation_.slots) {
        return Error::make(ErrorKind::kInvalidArgument, "admits[{}].slot: {} is past the rank's {} slots", i, a.slot,
                           generation_.slots);
      }
      if (live_.count(a.slot) > 0) {
        return Error::make(ErrorKind::kInvalidArgument, "admits[{}].slot: slot {} is taken", i, a.slot);
      }
      if (a.prompt.size() + a.max_tokens > capacity_ - block_ - 1) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "admits[{}]: a prompt of {} tokens and max_tokens {} exceed the {} positions of a slot",
                           i, a.prompt.size(), a.max_tokens, capacity_ - block_ - 1);
      }
      spec::RequestParams p{a.prompt, a.max_tokens, a.stop_ids, {a.temperature, a.top_p, a.seed}};
      auto r = spec::make_request(std::move(p), a.slot, target_->vocab());
      if (!r.ok()) return std::move(r).error().context(fmt::format("admits[{}] (request {})", i, a.request));
      Live& live = live_[a.slot];
      const int drafter = a.drafter >= 0 && drafting_->alive(a.drafter) ? a.drafter : -1;
      live = Live{a.request, drafter, std::move(r).value()};
      live.request.keeps_taps = drafter >= 0;  // plain decoding: its tap rows are never kept (nor fetched)
      admitted.push_back(&live);
      requests.push_back(&live.request);
    }
    const auto t0 = Clock::now();
    // A generator's own drafter settles a long prompt's earlier chunks from the device as the prefill runs
    // (a target rank's go to the host first: its drafters take them over the links after the call).
    Status s = spec::prefill(*target_, requests, drafting_->route(), drafter_.get());
    done.prefill_us = us_since(t0);
    if (!s.ok()) return s;
    TANDEM_TRY(after_target_run(admitted, done));
    for (Live* live : admitted) done.results.push_back(result_of(*live));
    return ok_status();
  }

  static GenResult result_of(Live& live) {
    const spec::Request& r = live.request;
    GenResult g;
    g.request = live.id;
    g.slot = r.slot;
    const auto gen = r.generated();
    g.tokens.assign(gen.begin() + static_cast<std::ptrdiff_t>(live.reported), gen.end());
    live.reported = gen.size();
    g.finish = to_wire(r.finish);
    g.drafted = r.drafted - live.drafted;
    g.accepted = r.accepted - live.accepted;
    live.drafted = r.drafted;
    live.accepted = r.accepted;
    return g;
  }

  std::string name_;
  config::Generation generation_;
  int rank_ = -1;
  std::string role_;
  uint32_t capacity_ = 0;
  uint32_t block_ = 0;
  spec::VerifyMode mode_ = spec::VerifyMode::kMatch;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<models::qwen3::Target> target_;
  std::unique_ptr<models::dflash::Drafter> drafter_;  // a generator's own
  std::unique_ptr<Drafting> drafting_;
  std::map<uint32_t, Live> live_;  // by slot
};

}  // namespace

Result<std::unique_ptr<RankRunner>> load_generator(const config::Model& target, const config::Model& drafter,
                                                   const config::Backend& backend,
                                                   const config::Generation& generation, int rank,
                                                   const Stopping& stopping) {
  auto runner = std::make_unique<TargetRunner>(target.name, generation, rank, "generator");
  Status s = runner->load(target, drafter, backend, {}, {}, stopping);
  if (!s.ok()) {
    return std::move(s).error().context(fmt::format("loading {} with drafter {} on {}", target.dir, drafter.dir,
                                                    backend.name));
  }
  return std::unique_ptr<RankRunner>(std::move(runner));
}

Result<std::unique_ptr<RankRunner>> load_target(const config::Model& target, const config::Model& drafter,
                                                const config::Backend& backend, const config::Generation& generation,
                                                int rank, std::map<int, std::unique_ptr<comm::Link>> links,
                                                std::chrono::milliseconds wait, const Stopping& stopping) {
  auto runner = std::make_unique<TargetRunner>(target.name, generation, rank, "target");
  Status s = runner->load(target, drafter, backend, std::move(links), wait, stopping);
  if (!s.ok()) return std::move(s).error().context(fmt::format("loading target {} on {}", target.dir, backend.name));
  return std::unique_ptr<RankRunner>(std::move(runner));
}

}  // namespace tandem::worker

// The drafter rank's runner (batch_runner.h): a DFlash drafter fed by its target rank over an
// engine/comm link. Per DraftAsk it settles each request's tap rows into the slot's context and drafts
// a block; it keeps, per slot, only what drafting needs (position, bonus token, sampling keys, the last
// tap row). Under verify: reject it samples drafts at temperature > 0 and sends their proposals q with
// them. With overlap it answers the drafts first, then guesses the next round (gen_messages.h Guess)
// while its target verifies. A drain moves contexts between drafters (context_messages.h): it gives a
// slot's context K/V rows up, or takes them in, as they are.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "engine/backends/backend_factory.h"
#include "engine/core/elapsed.h"
#include "engine/core/log.h"
#include "engine/io/hf_config.h"
#include "engine/spec/spec.h"
#include "worker/batch_runner.h"
#include "worker/context_messages.h"
#include "worker/gen_messages.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Guesses cover the accepted lengths 0..kGuessedShort and the full block (the likely outcomes).
constexpr uint32_t kGuessedShort = 2;

class DrafterRunner final : public RankRunner {
 public:
  DrafterRunner(std::string name, config::Generation generation, int target, std::unique_ptr<comm::Link> link)
      : name_(std::move(name)), generation_(std::move(generation)), target_rank_(target), link_(std::move(link)) {}

  Status load(const config::Model& target, const config::Model& drafter, const config::Backend& backend,
              const Stopping& stopping) {
    TANDEM_ASSIGN(const io::Qwen3Config tcfg, io::load_qwen3_config(target.dir + "/config.json"));
    TANDEM_ASSIGN(const io::DFlashConfig dcfg, io::load_dflash_config(drafter.dir + "/config.json"));
    capacity_ = generation_.kv_capacity ? generation_.kv_capacity : tcfg.max_position_embeddings;
    block_ = generation_.block_size ? generation_.block_size : dcfg.block_size;
    vocab_ = tcfg.vocab_size;
    backends::BackendOptions options;
    options.name = backend.name;
    options.precision = backend.precision;
    options.device = backend.device;
    options.threads = backend.threads;
    TANDEM_ASSIGN(backend_, backends::make_backend(options));
    models::dflash::DrafterOptions dopt{generation_.slots, capacity_, block_, std::nullopt, nullptr};
    if (!drafter.quantization.empty()) {
      TANDEM_ASSIGN(dopt.quantization, models::dflash::parse_quantization(drafter.quantization));
    }
    TANDEM_ASSIGN(drafter_, models::dflash::Drafter::open(*backend_, drafter.dir, target.dir, dopt));
    mode_ = generation_.verify == config::Verify::kReject ? spec::VerifyMode::kReject : spec::VerifyMode::kMatch;
    if (generation_.warm_up) {  // as the target's (target_runner.cpp)
      const auto t0 = Clock::now();
      TANDEM_ASSIGN(const size_t plans, drafter_->prepare_rounds(generation_.slots, block_, stopping));
      log::info("drafter {}: warm-up lowered {} plans in {:.1f} s", name_, plans,
                std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return ok_status();
  }

  RunnerInfo info() const override {
    const ir::Caps caps = backend_->caps();
    // Plans: those the warm-up lowered (later first uses add to them).
    RunnerInfo i{"drafter", name_, caps.name, caps.device, drafter_->weight_bytes(), drafter_->plan_bytes(), vocab_};
    i.state_bytes = drafter_->context().bytes();
    i.slots = generation_.slots;
    i.capacity = capacity_;
    i.block = block_;
    return i;
  }

  void serve(Mailbox& mail, Outbox&, int) override {
    comm::Link* link = link_.get();
    for (;;) {
      auto p = link->recv(Clock::now() + std::chrono::milliseconds(200));
      if (!p.ok()) {
        // The rank is stopping, or its target is gone: nothing more to draft for.
        if (p.error().kind() != ErrorKind::kCancelled) log::warn("drafter: {}", p.error().message());
        return;
      }
      if (!p->has_value()) {
        if (mail.closed()) return;
        continue;
      }
      if (is_context_message((*p)->header)) {
        std::vector<float> rows;
        const ContextMessage answer = hand_over(**p, rows);
        Status s = link->send(encode_context(answer), comm::RowsOut::of_host(rows, drafter_->context().row_width()));
        if (!s.ok()) log::error("drafter: answering context message of round {}: {}", answer.round, s.error().message());
        continue;
      }
      std::optional<DraftAsk> ask;
      DraftReply reply = answer(**p, ask);
      Status s = link->send(encode_reply(reply), comm::RowsOut::none());
      if (!s.ok()) log::error("drafter: answering round {}: {}", reply.round, s.error().message());
      if (!ask || std::none_of(ask->entries.begin(), ask->entries.end(), [](const DraftEntry& e) { return e.guess; })) {
        continue;
      }
      DraftReply guesses = guess(*ask, reply);
      s = link->send(encode_reply(guesses), comm::RowsOut::none());
      if (!s.ok()) log::error("drafter: guessing past round {}: {}", guesses.round, s.error().message());
    }
  }

 private:
  // The drafts of an ask; `decoded` gets the ask when it decodes.
  DraftReply answer(const comm::Packet& p, std::optional<DraftAsk>& decoded) {
    DraftReply reply;
    auto ask = decode_ask(p.header, p.rows, target_rank_);
    if (!ask.ok()) {
      log::error("drafter: {}", ask.error().message());
      return reply;  // round 0, no drafts: the target fails the round on the mismatch
    }
    decoded = *ask;
    reply.round = ask->round;
    for (uint32_t slot : ask->releases) {
      mirrors_.erase(slot);
      last_tap_.erase(slot);
    }
    if (ask->entries.empty()) {
      reply.slots_used = static_cast<uint32_t>(mirrors_.size());
      return reply;
    }
    Status s = run(*ask, p, reply);
    if (!s.ok()) {
      // The contexts of these slots are unknown now: they are dropped, and their requests get empty
      // drafts (plain decoding steps on the target) from here on, since no later ask can continue them.
      log::error("drafter: round {}: {}", ask->round, s.error().message());
      for (const DraftEntry& e : ask->entries) mirrors_.erase(e.slot);
      reply.drafts.assign(ask->entries.size(), {});
      reply.proposals.clear();
    }
    reply.slots_used = static_cast<uint32_t>(mirrors_.size());
    return reply;
  }

  Status run(const DraftAsk& ask, const comm::Packet& p, DraftReply& reply) {
    const uint32_t width = drafter_->tap_width();
    if (p.rows > 0 && p.width != width) {
      return Error::make(ErrorKind::kShape, "tap rows of width {}, the drafter takes {}", p.width, width);
    }
    std::vector<spec::Request*> requests;
    size_t at = 0;
    for (const DraftEntry& e : ask.entries) {
      if (e.slot >= generation_.slots) {
        return Error::make(ErrorKind::kInvalidArgument, "slot {} is past the drafter's {} slots", e.slot,
                           generation_.slots);
      }
      if (e.start + ask.block + 1 > capacity_) {
        return Error::make(ErrorKind::kCapacity, "slot {}: a block at {} passes the {} context positions", e.slot,
                           e.start, capacity_);
      }
      spec::Request& m = mirrors_[e.slot];
      if (e.settled == 0) {
        m = spec::Request{};
        m.slot = e.slot;
      } else if (m.settled != e.settled) {
        return Error::make(ErrorKind::kInvalidArgument, "slot {}: the context reaches {}, the ask continues from {}",
                           e.slot, m.settled, e.settled);
      }
      m.params.sampling = {e.temperature, 1.0f, e.seed};
      m.start = e.start;
      m.tokens.resize(size_t{e.start} + 1);
      m.tokens.back() = e.bonus;
      const size_t n = size_t{e.rows} * width;
      m.taps.assign(p.data.begin() + static_cast<std::ptrdiff_t>(at), p.data.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      if (e.rows > 0) last_tap_[e.slot].assign(m.taps.end() - width, m.taps.end());
      requests.push_back(&m);
    }
    auto t0 = Clock::now();
    TANDEM_TRY(spec::settle(*drafter_, requests));
    reply.settle_us = us_since(t0);
    t0 = Clock::now();
    // Only the entries that want a draft get one (the others verify a guess this round).
    std::vector<spec::Request*> drafting;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (ask.entries[i].wants_draft) drafting.push_back(requests[i]);
    }
    std::vector<spec::Draft> drafts;
    if (!drafting.empty()) TANDEM_TRY(spec::draft(*drafter_, drafting, ask.block, mode_, drafts));
    reply.draft_us = us_since(t0);
    size_t k = 0;
    reply.drafts.resize(ask.entries.size());
    reply.proposals.resize(ask.entries.size());
    for (size_t i = 0; i < ask.entries.size(); ++i) {
      if (!ask.entries[i].wants_draft) continue;
      reply.drafts[i] = std::move(drafts[k].tokens);
      reply.proposals[i] = std::move(drafts[k].proposals);
      ++k;
    }
    return ok_status();
  }

  // A drain's context move (context_messages.h): an ask gives each slot's context rows up (those whose
  // context is here whole; every asked slot is freed), rows from the target are taken in. `rows` gets
  // what goes back with the answer.
  ContextMessage hand_over(const comm::Packet& p, std::vector<float>& rows) {
    ContextMessage answer;
    auto m = decode_context(p.header, p.rows, target_rank_);
    if (!m.ok() || m->kind == ContextKind::kTaken) {
      // Round 0: the target gives the move up and rebuilds or decodes those requests plainly.
      log::error("drafter: {}", m.ok() ? "a 'taken' context message is for the target" : m.error().message());
      answer.kind = ContextKind::kTaken;
      answer.slots_used = static_cast<uint32_t>(mirrors_.size());
      return answer;
    }
    answer.round = m->round;
    answer.kind = m->kind == ContextKind::kAsk ? ContextKind::kRows : ContextKind::kTaken;
    decode::CacheSlots& context = drafter_->context();
    const bool fits = p.rows == 0 || p.width == context.row_width();
    if (!fits) log::error("drafter: context rows of width {}, this drafter's are {}", p.width, context.row_width());
    size_t at = 0;
    for (const ContextEntry& e : m->entries) {
      ContextEntry out{e.slot, 0};
      if (m->kind == ContextKind::kAsk) {
        auto held = mirrors_.find(e.slot);
        std::vector<float> one;
        if (held != mirrors_.end() && held->second.settled == e.length) {
          Status s = context.export_rows(e.slot, e.length, one);
          if (s.ok()) {
            rows.insert(rows.end(), one.begin(), one.end());
            out.length = e.length;
          } else {
            log::error("drafter: handing slot {} over: {}", e.slot, s.error().message());
          }
        }
        forget(e.slot);
      } else {
        const size_t n = size_t{e.length} * context.row_width();
        forget(e.slot);  // whatever the slot held before
        Status s = fits && p.data.size() >= at + n
                       ? context.import_rows(e.slot, e.length, std::span<const float>(p.data).subspan(at, n))
                       : Status(Error(ErrorKind::kFormat, "the rows do not fit this drafter's context"));
        at += n;
        if (s.ok()) {
          spec::Request& r = mirrors_[e.slot];
          r.slot = e.slot;
          r.settled = e.length;
          out.length = e.length;
        } else {
          log::error("drafter: taking slot {} over: {}", e.slot, s.error().message());
        }
      }
      answer.entries.push_back(out);
    }
    answer.slots_used = static_cast<uint32_t>(mirrors_.size());
    return answer;
  }

  // The slot holds no request from here on.
  void forget(uint32_t slot) {
    mirrors_.erase(slot);
    last_tap_.erase(slot);
    if (slot < drafter_->context().slots()) (void)drafter_->context().release(slot);
  }

  // The guesses of the next round (gen_messages.h Guess) for the entries of `ask` that want them, after
  // `drafts` answered it: none where the entry verifies no drafts, has no tap row yet or no room left.
  DraftReply guess(const DraftAsk& ask, const DraftReply& drafts) {
    DraftReply reply;
    reply.round = ask.round;
    reply.guess = true;
    reply.guesses.assign(ask.entries.size(), {});
    const auto t0 = Clock::now();
    struct Pending {
      size_t entry = 0;
      uint32_t slot = 0;
      uint32_t start = 0;
      std::vector<uint32_t> verified;  // d_1..d_n
      std::vector<uint32_t> lengths;   // the accepted lengths to guess, ascending
    };
    std::vector<Pending> pending;
    uint32_t most = 0;
    for (size_t i = 0; i < ask.entries.size(); ++i) {
      const DraftEntry& e = ask.entries[i];
      if (!e.guess || drafts.drafts.size() != ask.entries.size()) continue;
      std::vector<uint32_t> verified = e.wants_draft ? drafts.drafts[i] : e.verified;
      const auto n = static_cast<uint32_t>(verified.size());
      auto m = mirrors_.find(e.slot);
      if (n == 0 || m == mirrors_.end() || m->second.settled != e.start || last_tap_.count(e.slot) == 0 ||
          e.start + n + ask.block + 1 > capacity_) {
        continue;
      }
      Pending p{i, e.slot, e.start, std::move(verified), {}};
      for (uint32_t a = 0; a <= n; ++a) {
        if (a <= kGuessedShort || a == n) p.lengths.push_back(a);
      }
      most = std::max(most, n);
      pending.push_back(std::move(p));
    }
    if (pending.empty()) return reply;
    // One pass per accepted length a: every slot that guesses a gets its a-th filler row first.
    Status s = [&]() -> Status {
      for (uint32_t a = 0; a <= most; ++a) {
        std::vector<models::dflash::SettleRows> fill;
        std::vector<models::dflash::BlockRows> blocks;
        std::vector<Pending*> which;
        for (Pending& p : pending) {
          if (a > p.verified.size()) continue;
          if (a > 0) fill.push_back({p.slot, last_tap_.at(p.slot), {}});
          if (std::find(p.lengths.begin(), p.lengths.end(), a) == p.lengths.end()) continue;
          blocks.push_back({p.slot, a == 0 ? ask.entries[p.entry].bonus : p.verified[a - 1]});
          which.push_back(&p);
        }
        if (!fill.empty()) TANDEM_TRY(drafter_->settle(fill));
        if (blocks.empty()) continue;
        std::vector<std::vector<uint32_t>> made;
        TANDEM_TRY(guess_blocks(blocks, ask.block, which, a, made));
        for (size_t k = 0; k < which.size(); ++k) {
          if (made[k].empty()) continue;
          reply.guesses[which[k]->entry].push_back({which[k]->start + a + 1, std::move(made[k])});
        }
      }
      return ok_status();
    }();
    // The filler rows go again: the next settle continues from the real context.
    for (const Pending& p : pending) {
      Status c = drafter_->context().crop(p.slot, p.start);
      if (!c.ok() && s.ok()) s = c;
    }
    if (!s.ok()) {
      log::error("drafter: guessing past round {}: {}", ask.round, s.error().message());
      reply.guesses.assign(ask.entries.size(), {});
    }
    reply.draft_us = us_since(t0);
    reply.slots_used = static_cast<uint32_t>(mirrors_.size());
    return reply;
  }

  // The tokens of guess blocks (anchored at each slot's context length, start + a): each row's argmax
  // with row 1 skipping d_{a+1} for a < n (v1), or the greedy selector walk, no guess where it picks
  // d_{a+1} (v2).
  template <typename P>
  Status guess_blocks(std::span<const models::dflash::BlockRows> blocks, uint32_t block, const std::vector<P*>& which,
                      uint32_t a, std::vector<std::vector<uint32_t>>& made) {
    made.assign(blocks.size(), {});
    if (drafter_->version() != 1) {
      std::vector<spec::Request> temps(blocks.size());
      std::vector<spec::Request*> requests;
      for (size_t k = 0; k < blocks.size(); ++k) {
        spec::Request& t = temps[k];
        t.slot = blocks[k].slot;
        t.start = which[k]->start + a;
        t.settled = t.start;
        t.tokens.assign(size_t{t.start} + 1, 0);
        t.tokens.back() = blocks[k].anchor;
        requests.push_back(&t);
      }
      std::vector<spec::Draft> out;
      TANDEM_TRY(spec::draft(*drafter_, requests, block, spec::VerifyMode::kMatch, out));
      for (size_t k = 0; k < blocks.size(); ++k) {
        const bool excluded = a < which[k]->verified.size();
        if (out[k].tokens.empty() || (excluded && out[k].tokens[0] == which[k]->verified[a])) continue;
        made[k] = std::move(out[k].tokens);
      }
      return ok_status();
    }
    std::vector<models::dflash::BlockOut> out;
    TANDEM_TRY(drafter_->draft(blocks, block, out));
    for (size_t k = 0; k < blocks.size(); ++k) {
      const ir::Tensor2& logits = out[k].logits;
      const bool excluded = a < which[k]->verified.size();
      for (uint32_t row = 0; row < logits.rows; ++row) {
        const auto values = std::span<const float>(logits.data).subspan(size_t{row} * logits.width, logits.width);
        uint32_t best = 0;
        bool found = false;
        for (uint32_t v = 0; v < values.size(); ++v) {
          if (row == 0 && excluded && v == which[k]->verified[a]) continue;
          if (!found || values[v] > values[best]) {
            best = v;
            found = true;
          }
        }
        made[k].push_back(best);
      }
    }
    return ok_status();
  }

  std::string name_;
  config::Generation generation_;
  int target_rank_;
  std::unique_ptr<comm::Link> link_;
  uint32_t capacity_ = 0;
  uint32_t block_ = 0;
  uint32_t vocab_ = 0;
  spec::VerifyMode mode_ = spec::VerifyMode::kMatch;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<models::dflash::Drafter> drafter_;
  std::map<uint32_t, spec::Request> mirrors_;  // by slot
  std::map<uint32_t, std::vector<float>> last_tap_;  // by slot: the last tap row settled there
};

}  // namespace

Result<std::unique_ptr<RankRunner>> load_drafter(const config::Model& target, const config::Model& drafter,
                                                 const config::Backend& backend,
                                                 const config::Generation& generation, int target_rank,
                                                 std::unique_ptr<comm::Link> link, const Stopping& stopping) {
  auto runner = std::make_unique<DrafterRunner>(drafter.name, generation, target_rank, std::move(link));
  Status s = runner->load(target, drafter, backend, stopping);
  if (!s.ok()) return std::move(s).error().context(fmt::format("loading drafter {} on {}", drafter.dir, backend.name));
  return std::unique_ptr<RankRunner>(std::move(runner));
}

}  // namespace tandem::worker

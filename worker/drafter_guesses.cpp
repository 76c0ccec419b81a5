// Overlap on a drafter rank (drafter_runner_impl.h, gen_messages.h Guess): after answering a round's drafts
// it guesses the next round for the likely accepted lengths, from filler context rows it crops again (the
// slot's last tap row, settled from the runner's device rows), with the picks chosen on the device.
#include <algorithm>

#include "engine/core/elapsed.h"
#include "engine/core/log.h"
#include "worker/drafter_runner_impl.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Guesses cover the accepted lengths 0..kGuessedShort and the full block (the likely outcomes).
constexpr uint32_t kGuessedShort = 2;

}  // namespace

ir::DeviceRows DrafterRunner::last_tap(uint32_t slot) const {
  ir::DeviceRows row = last_taps_->view();
  // INVARIANT: slot < the buffer's generation_.slots rows (run() checked it before keep_last_tap stored it).
  row.data = static_cast<const uint8_t*>(row.data) + size_t{slot} * row.stride * ir::storage_bytes(row.storage);
  row.rows = 1;
  return row;
}

template <typename P>
Status DrafterRunner::guess_blocks(std::span<const models::dflash::BlockRows> blocks, uint32_t block,
                                   const std::vector<P*>& which, uint32_t a,
                                   std::vector<std::vector<uint32_t>>& made) {
  made.assign(blocks.size(), {});
  // The greedy picks chosen on the device (v1 each row's argmax, v2 the selector walk): only ids come back.
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

DraftReply DrafterRunner::guess(const DraftAsk& ask, const DraftReply& drafts) {
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
    if (n == 0 || m == mirrors_.end() || m->second.settled != e.start || last_tap_slots_.count(e.slot) == 0 ||
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
        if (a > 0) fill.push_back({p.slot, {}, last_tap(p.slot)});
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

}  // namespace tandem::worker

// Remote drafting's rounds (remote_drafting_impl.h): the tap rows of each target run sent at once (settling
// asks), the asks with the rows still pending (a moved request's recomputed ones), the replies with drafts
// (and proposals q under verify: reject, checked, then placed on the target's device), the overlap
// guesses, lost drafters.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "engine/core/elapsed.h"
#include "engine/core/log.h"
#include "worker/remote_drafting_impl.h"

namespace tandem::worker {

using Clock = std::chrono::steady_clock;

Status RemoteDrafting::draft(std::span<spec::Request* const> requests, std::span<const int> drafters,
                             uint32_t block, uint64_t round, std::vector<spec::Draft>& out, RoundDone& done) {
  out.assign(requests.size(), {});
  std::map<int, std::vector<size_t>> groups;  // drafter rank -> request indices
  for (size_t i = 0; i < requests.size(); ++i) {
    if (alive(drafters[i])) groups[drafters[i]].push_back(i);
  }
  const auto t_send = Clock::now();
  asked_.clear();
  for (auto& [rank, idx] : groups) {
    comm::Link& link = *links_.at(rank);
    DraftAsk ask;
    ask.round = round;
    ask.block = block;
    rows_.clear();
    Asked& asked = asked_[rank];
    for (size_t i : idx) {
      spec::Request& r = *requests[i];
      const auto& s = r.params.sampling;
      DraftEntry e;
      e.slot = r.slot;
      e.settled = r.settled;
      e.rows = r.start - r.settled;
      e.start = r.start;
      e.bonus = r.tokens.back();
      e.temperature = s.temperature;
      e.seed = s.seed;
      e.guess = overlap_ && !needs_proposals(r);
      if (std::vector<uint32_t> drafts = take_guess(r, block); !drafts.empty()) {
        e.wants_draft = false;
        e.verified = drafts;
        out[i].tokens = std::move(drafts);
        done.guesses_used += 1;
      }
      asked.slots.push_back(r.slot);
      ask.entries.push_back(e);
      rows_.insert(rows_.end(), r.taps.begin(), r.taps.end());
      // The drafter rank holds the context from here on.
      r.taps.clear();
      r.settled = r.start;
    }
    asked.round = round;
    asked.draft_pending = true;  // the reply comes also when no entry wants a draft
    asked.wants_drafts = std::any_of(ask.entries.begin(), ask.entries.end(),
                                     [](const DraftEntry& e) { return e.wants_draft; });
    asked.wants_guesses = std::any_of(ask.entries.begin(), ask.entries.end(),
                                      [](const DraftEntry& e) { return e.guess; });
    TANDEM_TRY(link.send(encode_ask(ask), comm::RowsOut::of_host(rows_, width_)));
  }
  done.send_us += us_since(t_send);
  const auto t_wait = Clock::now();
  for (auto& [rank, idx] : groups) {
    Asked& asked = asked_[rank];
    // Every entry verifies a guess: the reply is read after the verify (collect).
    if (!asked.wants_drafts) continue;
    comm::Link& link = *links_.at(rank);
    comm::Packet rows;
    auto reply = await(link, round, false, &rows);
    asked.draft_pending = false;
    if (!reply.ok()) {
      if (reply.error().kind() == ErrorKind::kUnavailable) {
        log::warn("drafter rank {} is lost ({}): its {} requests decode without drafts", rank,
                  reply.error().message(), idx.size());
        lost_.push_back(rank);
        for (size_t i : idx) out[i].tokens.clear();
        continue;
      }
      return std::move(reply).error();
    }
    if (reply->drafts.size() != idx.size()) {
      return Error::make(ErrorKind::kFormat, "drafter rank {} answered round {} with {} drafts for {} requests", rank,
                         round, reply->drafts.size(), idx.size());
    }
    for (size_t k = 0; k < idx.size(); ++k) {
      if (!reply->drafts[k].empty() && reply->drafts[k].size() + 1 != block) {
        return Error::make(ErrorKind::kFormat, "drafter rank {}: slot {} got {} drafts for a block of {}", rank,
                           requests[idx[k]]->slot, reply->drafts[k].size(), block);
      }
      spec::Draft& d = out[idx[k]];
      if (!d.tokens.empty()) {  // it verifies its guess, which carries no q (place_proposals relies on it)
        if (reply->row_proposals[k] > 0 || !reply->proposals[k].empty()) {
          return Error::make(ErrorKind::kFormat, "drafter rank {}: slot {}: drafts[{}].proposals: q for a guess it "
                             "verifies", rank, requests[idx[k]]->slot, k);
        }
        continue;
      }
      d.tokens = std::move(reply->drafts[k]);
      if (k < reply->proposals.size()) d.proposals = std::move(reply->proposals[k]);
      TANDEM_TRY(check_proposals(*requests[idx[k]], d, reply->row_proposals[k], rank, k));
    }
    TANDEM_TRY(place_proposals(rank, *reply, rows, idx, out));
    done.drafters.push_back({rank, reply->slots_used, reply->settle_us, reply->draft_us, d2h_since_report(rank)});
  }
  done.wait_us += us_since(t_wait);
  count_bytes(done);
  return ok_status();
}

uint64_t RemoteDrafting::d2h_since_report(int rank) {
  const uint64_t total = d2h_total_[rank];
  const uint64_t since = total - std::min(total, d2h_reported_[rank]);
  d2h_reported_[rank] = total;
  return since;
}

void RemoteDrafting::count_bytes(RoundDone& done) {
  for (const auto& [rank, link] : links_) {
    const comm::LinkStats s = link->stats();
    done.bytes_sent += s.bytes_sent - seen_[rank].bytes_sent;
    done.bytes_received += s.bytes_received - seen_[rank].bytes_received;
    seen_[rank] = s;
  }
}

Status RemoteDrafting::settle_now(std::span<spec::Request* const> requests, std::span<const int> drafters,
                                  RoundDone& done) {
  const auto t0 = Clock::now();
  std::map<int, std::vector<spec::Request*>> groups;  // drafter rank -> requests
  for (size_t i = 0; i < requests.size(); ++i) {
    if (alive(drafters[i])) groups[drafters[i]].push_back(requests[i]);
  }
  for (auto& [rank, group] : groups) {
    // Host rows first (a long prompt's earlier chunks), then those the run left on the device.
    TANDEM_TRY(send_settle(rank, group, false));
    TANDEM_TRY(send_settle(rank, group, true));
  }
  // The drafter ranks hold the contexts from here on (a lost one's requests decode plainly).
  for (spec::Request* r : requests) {
    r->taps.clear();
    r->device_taps = {};
    r->settled = r->start;
  }
  done.send_us += us_since(t0);
  count_bytes(done);
  return ok_status();
}

Status RemoteDrafting::send_settle(int rank, std::span<spec::Request* const> group, bool device) {
  DraftAsk ask;
  rows_.clear();
  pieces_.clear();
  for (spec::Request* r : group) {
    const auto n = static_cast<uint32_t>(device ? r->device_taps.rows : r->taps.size() / width_);
    if (n == 0) continue;
    DraftEntry e;
    e.slot = r->slot;
    e.settled = r->settled;
    e.rows = n;
    e.start = r->settled + n;
    e.bonus = r->tokens.at(e.start);
    e.temperature = r->params.sampling.temperature;
    e.seed = r->params.sampling.seed;
    e.wants_draft = false;
    ask.entries.push_back(e);
    if (device) {
      pieces_.push_back(r->device_taps);
    } else {
      rows_.insert(rows_.end(), r->taps.begin(), r->taps.end());
    }
    r->settled = e.start;
  }
  if (ask.entries.empty()) return ok_status();
  comm::Link& link = *links_.at(rank);
  if (!device) return link.send(encode_ask(ask), comm::RowsOut::of_host(rows_, width_));
  ir::Backend* owner = pieces_.front().owner;
  if (owner == nullptr) return Error(ErrorKind::kInternal, "tap rows left on a device without their backend");
  return link.send(encode_ask(ask), comm::RowsOut::of_pieces(pieces_, width_, *owner));
}

Status RemoteDrafting::collect(uint64_t round, RoundDone& done) {
  // The last round's guesses were used or are stale now (their requests did not draft this round).
  guesses_.clear();
  const auto t_wait = Clock::now();
  for (auto& [rank, asked] : asked_) {
    if (asked.round != round || !alive(rank)) continue;
    comm::Link& link = *links_.at(rank);
    if (asked.draft_pending) {
      auto reply = await(link, round, false);
      if (!reply.ok() && reply.error().kind() != ErrorKind::kUnavailable) return std::move(reply).error();
      if (!reply.ok()) {
        lost(rank, reply.error());
        continue;
      }
      asked.draft_pending = false;
      done.drafters.push_back({rank, reply->slots_used, reply->settle_us, reply->draft_us, d2h_since_report(rank)});
    }
    if (!asked.wants_guesses) continue;
    auto reply = await(link, round, true);
    if (!reply.ok() && reply.error().kind() != ErrorKind::kUnavailable) return std::move(reply).error();
    if (!reply.ok()) {
      lost(rank, reply.error());
      continue;
    }
    if (reply->guesses.size() != asked.slots.size()) {
      return Error::make(ErrorKind::kFormat, "drafter rank {} guessed past round {} for {} requests, it was asked {}",
                         rank, round, reply->guesses.size(), asked.slots.size());
    }
    for (size_t k = 0; k < asked.slots.size(); ++k) {
      done.guesses += static_cast<uint32_t>(reply->guesses[k].size());
      if (!reply->guesses[k].empty()) guesses_[asked.slots[k]] = std::move(reply->guesses[k]);
    }
  }
  asked_.clear();
  done.wait_us += us_since(t_wait);
  return ok_status();
}

void RemoteDrafting::release(uint32_t slot, int rank) {
  guesses_.erase(slot);
  if (!alive(rank)) return;
  DraftAsk ask;
  ask.releases = {slot};
  Status s = links_.at(rank)->send(encode_ask(ask), comm::RowsOut::none());
  if (!s.ok()) log::warn("releasing slot {} on drafter rank {}: {}", slot, rank, s.error().message());
}

Status RemoteDrafting::check_proposals(const spec::Request& r, const spec::Draft& d, uint32_t rows, int rank,
                                       size_t k) const {
  const size_t want = needs_proposals(r) ? d.tokens.size() : 0;
  const size_t have = d.proposals.size() + rows;  // decode_reply allows one form per entry
  if (have != want) {
    return Error::make(ErrorKind::kFormat,
                       "drafter rank {}: slot {}: drafts[{}].proposals: {} proposals for {} draft tokens (verify: "
                       "{}, temperature {})",
                       rank, r.slot, k, have, d.tokens.size(),
                       mode_ == spec::VerifyMode::kReject ? "reject" : "match", r.params.sampling.temperature);
  }
  for (size_t j = 0; j < d.proposals.size(); ++j) {
    for (uint32_t id : d.proposals[j].ids) {
      if (id >= vocab_) {
        return Error::make(ErrorKind::kFormat,
                           "drafter rank {}: slot {}: drafts[{}].proposals[{}].ids: id {} is past the vocabulary "
                           "of {}",
                           rank, r.slot, k, j, id, vocab_);
      }
    }
    for (double q : d.proposals[j].probs) {
      if (static_cast<double>(static_cast<float>(q)) != q) {
        return Error::make(ErrorKind::kFormat,
                           "drafter rank {}: slot {}: drafts[{}].proposals[{}].probs: q {} is not an f32 value (the "
                           "target's rejection sampling reads f32 q, as a drafter's device leaves it)",
                           rank, r.slot, k, j, q);
      }
    }
  }
  return ok_status();
}

std::vector<uint32_t> RemoteDrafting::take_guess(const spec::Request& r, uint32_t block) {
  if (needs_proposals(r)) return {};  // a guess carries no q
  auto it = guesses_.find(r.slot);
  if (it == guesses_.end()) return {};
  std::vector<Guess> kept = std::move(it->second);
  guesses_.erase(it);
  for (const Guess& g : kept) {
    if (g.at != r.start || g.tokens.size() < 2 || g.tokens[0] != r.tokens.back()) continue;
    std::vector<uint32_t> drafts;
    for (size_t k = 1; k < g.tokens.size() && drafts.size() + 1 < block; ++k) drafts.push_back(g.tokens[k]);
    return drafts;
  }
  return {};
}

void RemoteDrafting::lost(int rank, const Error& why) {
  log::warn("drafter rank {} is lost ({}): its requests decode without drafts", rank, why.message());
  lost_.push_back(rank);
}

Result<DraftReply> RemoteDrafting::await(comm::Link& link, uint64_t round, bool guess, comm::Packet* rows) {
  const auto deadline = Clock::now() + wait_;
  for (;;) {
    TANDEM_ASSIGN(std::optional<comm::Packet> p, link.recv(deadline));
    if (!p) {
      return Error::make(ErrorKind::kTimeout, "drafter rank {} did not answer round {} within {} ms", link.peer(),
                         round, wait_.count());
    }
    if (is_context_message(p->header)) continue;  // a hand-over's answer that came after its deadline
    TANDEM_ASSIGN(DraftReply reply, decode_reply(p->header, link.peer(), vocab_, p->rows, p->width));
    // Every reply, also one skipped here (a settling ask's), carries the drafter's running total.
    uint64_t& total = d2h_total_[link.peer()];
    total = std::max(total, reply.device_to_host_total);
    if (reply.round == round && reply.guess == guess) {
      if (rows != nullptr) *rows = std::move(*p);
      return reply;
    }
    if (reply.round == round && guess) continue;
    if (reply.round == round) {
      return Error::make(ErrorKind::kFormat, "drafter rank {} sent its guesses past round {} before the drafts",
                         link.peer(), round);
    }
    if (reply.round > round) {
      return Error::make(ErrorKind::kFormat, "drafter rank {} answered round {} while round {} waits", link.peer(),
                         reply.round, round);
    }
  }
}

std::unique_ptr<Drafting> make_remote_drafting(std::map<int, std::unique_ptr<comm::Link>> links, uint32_t width,
                                               std::chrono::milliseconds wait, spec::VerifyMode mode, uint32_t vocab,
                                               bool overlap, ir::Backend& backend) {
  return std::make_unique<RemoteDrafting>(std::move(links), width, wait, mode, vocab, overlap, backend);
}

}  // namespace tandem::worker

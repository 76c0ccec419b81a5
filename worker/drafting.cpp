// Local and remote Drafting (drafting_impl.h). Remote: one DraftAsk per drafter (sent before any reply
// is awaited, so drafters draft in parallel), then the replies in the same order.
#include <algorithm>

#include <fmt/format.h>

#include "engine/core/log.h"
#include "worker/drafting_impl.h"
#include "worker/gen_messages.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t us_since(Clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
}

class LocalDrafting final : public Drafting {
 public:
  LocalDrafting(models::dflash::Drafter& drafter, spec::VerifyMode mode, int rank)
      : drafter_(drafter), mode_(mode), rank_(rank) {}
  Status draft(std::span<spec::Request* const> requests, std::span<const int>, uint32_t block, uint64_t,
               std::vector<spec::Draft>& out, RoundDone& done) override {
    auto t0 = Clock::now();
    TANDEM_TRY(spec::settle(drafter_, requests));
    const uint64_t settle_us = us_since(t0);
    t0 = Clock::now();
    TANDEM_TRY(spec::draft(drafter_, requests, block, mode_, out));
    const uint64_t draft_us = us_since(t0);
    done.wait_us += settle_us + draft_us;
    done.drafters.push_back({rank_, static_cast<uint32_t>(requests.size()), settle_us, draft_us});
    return ok_status();
  }
  bool alive(int) const override { return true; }
  void release(uint32_t, int) override {}  // settle() starts a reused slot's context afresh

 private:
  models::dflash::Drafter& drafter_;
  spec::VerifyMode mode_;
  int rank_;
};

class RemoteDrafting final : public Drafting {
 public:
  RemoteDrafting(std::map<int, std::unique_ptr<comm::Link>> links, uint32_t width, std::chrono::milliseconds wait,
                 spec::VerifyMode mode, uint32_t vocab)
      : links_(std::move(links)), width_(width), wait_(wait), mode_(mode), vocab_(vocab) {}

  Status draft(std::span<spec::Request* const> requests, std::span<const int> drafters, uint32_t block,
               uint64_t round, std::vector<spec::Draft>& out, RoundDone& done) override {
    out.assign(requests.size(), {});
    std::map<int, std::vector<size_t>> groups;  // drafter rank -> request indices
    for (size_t i = 0; i < requests.size(); ++i) {
      if (alive(drafters[i])) groups[drafters[i]].push_back(i);
    }
    const auto t_send = Clock::now();
    std::vector<uint64_t> sent_before, received_before;
    for (auto& [rank, idx] : groups) {
      comm::Link& link = *links_.at(rank);
      DraftAsk ask;
      ask.round = round;
      ask.block = block;
      rows_.clear();
      for (size_t i : idx) {
        spec::Request& r = *requests[i];
        const auto& s = r.params.sampling;
        ask.entries.push_back({r.slot, r.settled, r.start - r.settled, r.start, r.tokens.back(), s.temperature, s.seed});
        rows_.insert(rows_.end(), r.taps.begin(), r.taps.end());
        // The drafter rank holds the context from here on.
        r.taps.clear();
        r.settled = r.start;
      }
      TANDEM_TRY(link.send(encode_ask(ask), comm::RowsOut::of_host(rows_, width_)));
    }
    done.send_us += us_since(t_send);
    const auto t_wait = Clock::now();
    for (auto& [rank, idx] : groups) {
      comm::Link& link = *links_.at(rank);
      auto reply = await(link, round);
      if (!reply.ok()) {
        if (reply.error().kind() == ErrorKind::kUnavailable) {
          log::warn("drafter rank {} is lost ({}): its {} requests decode without drafts", rank,
                    reply.error().message(), idx.size());
          lost_.push_back(rank);
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
        d.tokens = std::move(reply->drafts[k]);
        if (k < reply->proposals.size()) d.proposals = std::move(reply->proposals[k]);
        TANDEM_TRY(check_proposals(*requests[idx[k]], d, rank, k));
      }
      done.drafters.push_back({rank, reply->slots_used, reply->settle_us, reply->draft_us});
    }
    done.wait_us += us_since(t_wait);
    for (const auto& [rank, link] : links_) {
      const comm::LinkStats s = link->stats();
      done.bytes_sent += s.bytes_sent - seen_[rank].bytes_sent;
      done.bytes_received += s.bytes_received - seen_[rank].bytes_received;
      seen_[rank] = s;
    }
    return ok_status();
  }

  bool alive(int rank) const override {
    return rank >= 0 && links_.count(rank) > 0 && std::find(lost_.begin(), lost_.end(), rank) == lost_.end();
  }

  void release(uint32_t slot, int rank) override {
    if (!alive(rank)) return;
    DraftAsk ask;
    ask.releases = {slot};
    Status s = links_.at(rank)->send(encode_ask(ask), comm::RowsOut::none());
    if (!s.ok()) log::warn("releasing slot {} on drafter rank {}: {}", slot, rank, s.error().message());
  }

 private:
  // Rejection sampling needs q for every sampled draft token; other drafts carry none.
  Status check_proposals(const spec::Request& r, const spec::Draft& d, int rank, size_t k) const {
    const bool sampled = mode_ == spec::VerifyMode::kReject && r.params.sampling.temperature > 0.0f;
    const size_t want = sampled ? d.tokens.size() : 0;
    if (d.proposals.size() != want) {
      return Error::make(ErrorKind::kFormat,
                         "drafter rank {}: slot {}: drafts[{}].proposals: {} proposals for {} draft tokens (verify: "
                         "{}, temperature {})",
                         rank, r.slot, k, d.proposals.size(), d.tokens.size(),
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
    }
    return ok_status();
  }

  // The reply to `round`, skipping replies to earlier rounds (a round that failed before reading them).
  Result<DraftReply> await(comm::Link& link, uint64_t round) {
    const auto deadline = Clock::now() + wait_;
    for (;;) {
      TANDEM_ASSIGN(std::optional<comm::Packet> p, link.recv(deadline));
      if (!p) {
        return Error::make(ErrorKind::kTimeout, "drafter rank {} did not answer round {} within {} ms", link.peer(),
                           round, wait_.count());
      }
      TANDEM_ASSIGN(DraftReply reply, decode_reply(p->header, link.peer()));
      if (reply.round == round) return reply;
      if (reply.round > round) {
        return Error::make(ErrorKind::kFormat, "drafter rank {} answered round {} while round {} waits", link.peer(),
                           reply.round, round);
      }
    }
  }

  std::map<int, std::unique_ptr<comm::Link>> links_;
  uint32_t width_;
  std::chrono::milliseconds wait_;
  spec::VerifyMode mode_;
  uint32_t vocab_;
  std::vector<int> lost_;
  std::vector<float> rows_;
  std::map<int, comm::LinkStats> seen_;
};

}  // namespace

std::unique_ptr<Drafting> make_local_drafting(models::dflash::Drafter& drafter, spec::VerifyMode mode, int rank) {
  return std::make_unique<LocalDrafting>(drafter, mode, rank);
}

std::unique_ptr<Drafting> make_remote_drafting(std::map<int, std::unique_ptr<comm::Link>> links, uint32_t width,
                                               std::chrono::milliseconds wait, spec::VerifyMode mode, uint32_t vocab) {
  return std::make_unique<RemoteDrafting>(std::move(links), width, wait, mode, vocab);
}

}  // namespace tandem::worker

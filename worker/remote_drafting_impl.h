// Remote drafting (drafting_impl.h make_remote_drafting): a target rank's drafts from its drafter ranks over
// engine/comm links. After every target run its tap rows go to the drafters from where the run left them
// (settle_now: settling asks, gen_messages.h). One DraftAsk per drafter (sent before any reply is awaited, so drafters draft in
// parallel), then the replies in the same order; with overlap the guesses come after the verify (collect),
// each kept for its slot until the next round checks it (remote_drafting.cpp). A drain's hand-over is one
// context ask to the drained drafter, then the rows on to each new drafter (remote_handover.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/ir/row_buffer.h"
#include "worker/context_messages.h"
#include "worker/drafting_impl.h"
#include "worker/gen_messages.h"

namespace tandem::worker {

class RemoteDrafting final : public Drafting {
 public:
  RemoteDrafting(std::map<int, std::unique_ptr<comm::Link>> links, uint32_t width, std::chrono::milliseconds wait,
                 spec::VerifyMode mode, uint32_t vocab, bool overlap, ir::Backend& backend)
      : links_(std::move(links)), width_(width), wait_(wait), mode_(mode), vocab_(vocab), overlap_(overlap),
        backend_(backend) {
    for (auto& [rank, link] : links_) link->receive_to_device(backend_);
  }

  Status draft(std::span<spec::Request* const> requests, std::span<const int> drafters, uint32_t block,
               uint64_t round, std::vector<spec::Draft>& out, RoundDone& done) override;
  Status collect(uint64_t round, RoundDone& done) override;
  bool alive(int rank) const override {
    return rank >= 0 && links_.count(rank) > 0 && std::find(lost_.begin(), lost_.end(), rank) == lost_.end();
  }
  // The target keeps its runs' tap rows where they were left, and settle_now sends them to the drafter
  // ranks from there at once (NCCL: device to device; a host link fetches them). One draft() per round.
  spec::TapRoute route() const override { return spec::TapRoute::kDevice; }
  Status settle_now(std::span<spec::Request* const> requests, std::span<const int> drafters,
                    RoundDone& done) override;
  size_t group(uint32_t) const override { return SIZE_MAX; }
  Status hand_over(int from, std::span<Handoff> handoffs, uint64_t round, RoundDone& done) override;
  void release(uint32_t slot, int rank) override;

 private:
  // Rejection sampling needs q for every sampled draft token; other drafts carry none.
  bool needs_proposals(const spec::Request& r) const {
    return mode_ == spec::VerifyMode::kReject && r.params.sampling.temperature > 0.0f;
  }
  // Entry k of a reply: as many proposals as `r` needs (listed in d.proposals, or `rows` link rows), ids
  // inside the vocabulary, each listed q an f32 value (the target's RejectSample reads f32 q).
  Status check_proposals(const spec::Request& r, const spec::Draft& d, uint32_t rows, int rank, size_t k) const;
  // The proposals of drafter `rank`'s reply (entries `idx` of `out`) where the target's RejectSample reads
  // them (spec::Draft::device): row proposals stay where the link received them, or host rows are
  // written to the target's backend; listed (id, q) ones are written there as candidates and f32 q
  // (remote_proposals.cpp).
  Status place_proposals(int rank, const DraftReply& reply, const comm::Packet& rows, std::span<const size_t> idx,
                         std::vector<spec::Draft>& out);

  struct Asked {
    uint64_t round = 0;
    std::vector<uint32_t> slots;  // the ask's entries
    bool wants_drafts = false;    // some entry has no guess to verify
    bool wants_guesses = false;   // some entry asks for guesses (the drafter sends none otherwise)
    bool draft_pending = false;   // the draft reply is not read yet
  };
  // The drafts of the guess kept for `r`'s slot whose outcome is the one the last round had (its start
  // and bonus), at most block − 1 of them; none when no guess is. The slot's guesses are used once.
  std::vector<uint32_t> take_guess(const spec::Request& r, uint32_t block);
  // Sends `m` to drafter `rank` and awaits its answer of kind `want` for the same round and entries: the
  // answer and its rows, or nullopt (logged) when the drafter fails, is lost (it is marked so) or
  // answers past the deadline.
  std::optional<std::pair<ContextMessage, comm::Packet>> exchange(int rank, const ContextMessage& m,
                                                                  const comm::RowsOut& rows, ContextKind want);
  void lost(int rank, const Error& why);
  // A settling ask (round 0, no drafts; its reply is skipped) to drafter `rank` with the pending host rows
  // (`device` false) or device rows of `group`, each entry continuing its context from `settled`.
  Status send_settle(int rank, std::span<spec::Request* const> group, bool device);
  // The data plane's bytes since the last count, into `done`.
  void count_bytes(RoundDone& done);
  // What drafter `rank` copied from its GPU to the host since its last DrafterReport.
  uint64_t d2h_since_report(int rank);
  // The reply (drafts, or with `guess` the guesses) to `round`, skipping replies to earlier rounds (a
  // round that failed before reading them) and, for the guesses, the round's draft reply.
  // `rows`, when given, gets the reply's link rows (its proposal rows).
  Result<DraftReply> await(comm::Link& link, uint64_t round, bool guess, comm::Packet* rows = nullptr);

  std::map<int, std::unique_ptr<comm::Link>> links_;
  uint32_t width_;
  std::chrono::milliseconds wait_;
  spec::VerifyMode mode_;
  uint32_t vocab_;
  std::vector<int> lost_;
  std::vector<float> rows_;
  std::vector<ir::DeviceRows> pieces_;
  std::map<int, comm::LinkStats> seen_;
  // Drafter ranks' running device-to-host totals (DraftReply::device_to_host_total) as last read, and as
  // last reported in a DrafterReport.
  std::map<int, uint64_t> d2h_total_, d2h_reported_;
  bool overlap_;
  std::map<int, Asked> asked_;          // this round's asks, by drafter rank
  std::map<uint32_t, std::vector<Guess>> guesses_;  // by slot: the next round's guesses
  ir::Backend& backend_;
  // Per drafter rank: the target-side rows its proposals are placed in (place_proposals), grown as needed.
  struct Placed {
    std::unique_ptr<ir::RowBuffer> rows, ids, q;
    std::vector<uint32_t> host_ids;
    std::vector<float> host_q;
  };
  std::map<int, Placed> placed_;
};

}  // namespace tandem::worker

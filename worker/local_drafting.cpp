// Local drafting (drafting_impl.h): a generator's own drafter on the target's backend. Each round settles
// what is pending and drafts; on one GPU (spec::TapRoute::kDevice) the target's tap rows settle right after
// the run that left them and the drafts' proposals stay on the device for the verify.
#include <algorithm>
#include <cstdint>

#include "engine/core/elapsed.h"
#include "worker/drafting_impl.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

class LocalDrafting final : public Drafting {
 public:
  LocalDrafting(models::dflash::Drafter& drafter, spec::VerifyMode mode, int rank, spec::TapRoute route)
      : drafter_(drafter), mode_(mode), rank_(rank), route_(route) {}
  // Settles what is pending (host rows of a rebuilt context; on kDevice nothing else), then drafts; under
  // kDevice the v1 drafts and every proposal stay on the device for the verify.
  Status draft(std::span<spec::Request* const> requests, std::span<const int>, uint32_t block, uint64_t,
               std::vector<spec::Draft>& out, RoundDone& done) override {
    auto t0 = Clock::now();
    TANDEM_TRY(spec::settle(drafter_, requests));
    const uint64_t settle_us = us_since(t0);
    t0 = Clock::now();
    TANDEM_TRY(spec::draft(drafter_, requests, block, mode_, out, route_));
    const uint64_t draft_us = us_since(t0);
    done.wait_us += settle_us + draft_us;
    report(done, static_cast<uint32_t>(requests.size()), settle_us, draft_us);
    return ok_status();
  }
  Status collect(uint64_t, RoundDone&) override { return ok_status(); }
  bool alive(int) const override { return true; }
  void release(uint32_t, int) override {}  // settle() starts a reused slot's context afresh
  Status hand_over(int, std::span<Handoff>, uint64_t, RoundDone&) override { return ok_status(); }
  spec::TapRoute route() const override { return route_; }
  Status settle_now(std::span<spec::Request* const> requests, std::span<const int>, RoundDone& done) override {
    if (route_ != spec::TapRoute::kDevice || requests.empty()) return ok_status();
    const auto t0 = Clock::now();
    TANDEM_TRY(spec::settle(drafter_, requests));
    report(done, 0, us_since(t0), 0);
    return ok_status();
  }
  size_t group(uint32_t block) const override {
    if (route_ != spec::TapRoute::kDevice || mode_ != spec::VerifyMode::kReject) return SIZE_MAX;
    return std::max<uint32_t>(drafter_.block_seqs(block), 1);
  }

 private:
  // One report per round for this rank, however many calls the round made (groups, settles).
  void report(RoundDone& done, uint32_t slots, uint64_t settle_us, uint64_t draft_us) const {
    if (done.drafters.empty() || done.drafters.back().rank != rank_) done.drafters.push_back({rank_, 0, 0, 0});
    DrafterReport& r = done.drafters.back();
    r.slots_used += slots;
    r.settle_us += settle_us;
    r.draft_us += draft_us;
  }

  models::dflash::Drafter& drafter_;
  spec::VerifyMode mode_;
  int rank_;
  spec::TapRoute route_;
};

}  // namespace

std::unique_ptr<Drafting> make_local_drafting(models::dflash::Drafter& drafter, spec::VerifyMode mode, int rank,
                                              spec::TapRoute route) {
  return std::make_unique<LocalDrafting>(drafter, mode, rank, route);
}

}  // namespace tandem::worker

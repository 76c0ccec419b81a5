// Drafting: where a target's rounds get their drafts. Local (a generator: its own drafter, settle then
// draft) or remote (drafter ranks over engine/comm links: the tap rows go to the drafters right after
// each target run, from where the run left them, the proposals q come back with the drafts under
// rejection sampling). A lost drafter gives empty drafts, so
// its requests go on with plain decoding steps, exactly as before. With overlap (remote only) each drafter
// also guesses the next round while the target verifies; a request whose outcome is the one guessed
// verifies the guess at once (gen_messages.h Guess). A drained drafter hands its requests' contexts to
// other drafters through the target (hand_over; context_messages.h).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/comm/comm.h"
#include "engine/spec/spec.h"
#include "worker/protocol.h"

namespace tandem::worker {

// A request's drafter context going from a drained drafter rank to another as it is (no taps recomputed).
struct Handoff {
  uint32_t slot = 0;
  uint32_t length = 0;  // the positions its drafter holds ([0, settled))
  int to = -1;          // the drafter that takes it over
  bool moved = false;   // set by hand_over: it arrived whole (else the caller rebuilds it or decodes plainly)
};

class Drafting {
 public:
  virtual ~Drafting() = default;
  // One block per request; drafters[i] is request i's drafter rank. `out` gets one draft per request
  // (empty where its drafter is lost); `done` the round's figures (timings, bytes, drafter reports).
  virtual Status draft(std::span<spec::Request* const> requests, std::span<const int> drafters, uint32_t block,
                       uint64_t round, std::vector<spec::Draft>& out, RoundDone& done) = 0;
  // After every round's verify: the drafters' guesses of the next round (overlap; none for local
  // drafting); guesses kept from earlier rounds are dropped.
  virtual Status collect(uint64_t round, RoundDone& done) = 0;
  // Whether `rank` can still draft (a lost drafter never comes back).
  virtual bool alive(int rank) const = 0;
  // A request drafted by `rank` left its slot (finished, cancelled, failed): its context there is freed.
  virtual void release(uint32_t slot, int rank) = 0;
  // Drafter rank `from` is drained: each handoff's context K/V rows go from it to the handoff's drafter
  // (from -> this rank -> to, over the data plane, as they are), and `from` frees every slot asked, so
  // `done.drafters` gets its slot count afterwards (all of them asked: 0). A drafter that fails or is
  // lost leaves its handoffs unmoved; only a broken invariant here is an error. Local drafting has no
  // other drafter rank: nothing moves.
  virtual Status hand_over(int from, std::span<Handoff> handoffs, uint64_t round, RoundDone& done) = 0;
  // Where the target leaves its runs' tap rows for these drafts (spec::TapRoute). kDevice: a generator
  // whose drafter shares the target's GPU, or remote drafters (the link sends the rows from the device,
  // or fetches them); the rows then settle (settle_now) before the target runs again. kHost: they are
  // fetched and settle with the next draft (a generator on the CPU backend).
  virtual spec::TapRoute route() const = 0;
  // kDevice: the requests' pending tap rows go into their drafter contexts now (drafters[i]: request i's
  // drafter rank), right after the target's run that left them; kHost: nothing.
  virtual Status settle_now(std::span<spec::Request* const> requests, std::span<const int> drafters,
                            RoundDone& done) = 0;
  // The most requests one draft-and-verify may take: under rejection sampling on the device the drafts'
  // proposals stay there until the verify reads them, one drafter run's worth (as spec::generate does).
  virtual size_t group(uint32_t block) const = 0;
};

// `route`: spec::tap_route of the generator's target and this drafter.
std::unique_ptr<Drafting> make_local_drafting(models::dflash::Drafter& drafter, spec::VerifyMode mode, int rank,
                                              spec::TapRoute route);
// `links` by drafter rank, tap rows of `width`; `wait` bounds each reply (a drafter the coordinator
// declares dead answers sooner: its link reports it lost). Under kReject a sampled request's draft
// (temperature > 0) must come with one proposal per token, of ids below `vocab`, or the round fails;
// the proposals are placed on `backend` (the target's: Draft::device), where the verify rejects, and the
// links receive their rows there (Link::receive_to_device). `overlap`: ask for guesses
// (generation.overlap); a sampled request under kReject never uses one (a guess carries no proposals).
std::unique_ptr<Drafting> make_remote_drafting(std::map<int, std::unique_ptr<comm::Link>> links, uint32_t width,
                                               std::chrono::milliseconds wait, spec::VerifyMode mode, uint32_t vocab,
                                               bool overlap, ir::Backend& backend);

}  // namespace tandem::worker

// RoundScheduler: the coordinator's GenerationService (architecture.md "A speculative round"). Its
// "rounds" thread keeps one Round in flight per target rank: continuous batching (requests join as
// slots free up and leave when they finish or are cancelled), the admission limits, the draft length
// of generation.draft_schedule by batch size, per-request `speculative: false`. Rounds carry only what
// changed (releases, admits); the control plane sends them and hands back the ranks' answers. It is
// also the DrafterAdmin of POST /admin/drain (drafter_drain.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "coordinator/batcher.h"
#include "coordinator/drafter_admin.h"
#include "coordinator/generation_service.h"
#include "worker/worker.h"

namespace tandem::coordinator {

// What the control plane (the mpi thread) tells the generation side about target ranks.
class RoundEvents {
 public:
  virtual ~RoundEvents() = default;
  virtual void on_ready(int rank, const worker::Ready& ready) = 0;
  virtual void on_round_done(int rank, worker::RoundDone done) = 0;
  virtual void on_round_failed(int rank, const worker::RoundFailed& failed) = 0;
  virtual void on_dead(int rank, const std::string& why) = 0;
};

// One target rank as the scheduler sees it (for /metrics, /health and tests).
struct TargetRankView {
  int rank = -1;
  bool ready = false;
  bool dead = false;
  uint32_t slots = 0;
  uint32_t slots_used = 0;     // the scheduler's view: requests holding a slot (cancelled ones until released)
  uint32_t rank_slots_used = 0;  // what the rank reported after its last round
  uint64_t rounds = 0;
  uint64_t tokens = 0;         // committed
  uint64_t drafted = 0;
  uint64_t accepted = 0;
  uint64_t prefill_us = 0;
  uint64_t wait_us = 0;        // waiting for drafts (drafting and the transfers)
  uint64_t drafter_us = 0;     // of which the drafters' own settle and draft time
  uint64_t verify_us = 0;
  uint64_t send_us = 0;        // handing tap rows to drafter ranks
  uint64_t bytes_moved = 0;    // data plane, both ways
  uint64_t device_to_host_bytes = 0;  // the rank's GPU to its host (0 on the CPU backend)
  uint64_t drafter_device_to_host_bytes = 0;  // its drafter ranks' GPUs to their hosts
  uint64_t guesses = 0;        // overlap: next-round guesses its drafters made
  uint64_t guesses_used = 0;   // of which the outcome was the one guessed (verified at once)
  uint64_t moves = 0;          // requests whose drafter died and that moved to another drafter
  uint64_t drain_moves = 0;    // requests of a drained drafter sent to another drafter (or to plain decoding)
  uint64_t handoffs = 0;       // of which the rank handed the context over whole (nothing recomputed)
  uint64_t moved_accepted = 0; // drafts accepted for moved requests (on their new drafter)
  uint32_t last_block = 0;     // the block size of its last round (< 2: plain decoding)
};

// A drafter as its target reports it (a generator drafts for itself).
struct DrafterView {
  int rank = -1;
  int target = -1;
  bool dead = false;
  uint32_t slots_used = 0;  // context slots holding a request, after its last round
  DrainState drain = DrainState::kServing;
  uint64_t drains = 0;      // times it was drained
};

class RoundScheduler final : public GenerationService, public RoundEvents, public DrafterAdmin {
 public:
  // Rounds leave through `outbox` (the control plane sends them on Tag::kCommand).
  RoundScheduler(const config::Deployment& deployment, const worker::Topology& topology,
                 worker::BlockingQueue<Dispatch>& outbox);
  ~RoundScheduler() override;  // stop() with "the server is shutting down"

  std::variant<std::shared_ptr<GenerationHandle>, ApiError> submit(GenerationRequest request,
                                                                  GenerationCallback callback) override;
  uint32_t vocab() const override;
  uint32_t max_context() const override;

  void on_ready(int rank, const worker::Ready& ready) override;
  void on_round_done(int rank, worker::RoundDone done) override;
  void on_round_failed(int rank, const worker::RoundFailed& failed) override;
  void on_dead(int rank, const std::string& why) override;

  std::variant<DrainView, ApiError> drain(int rank, bool force) override;
  std::variant<DrainView, ApiError> undrain(int rank) override;
  std::vector<DrainView> out_of_service() const override;

  // Fails every request queued or decoding with `error` and ends the thread; later submits answer it.
  void stop(const ApiError& error);
  std::vector<TargetRankView> targets() const;
  std::vector<DrafterView> drafters() const;
  size_t queued() const;
  size_t decoding() const;  // requests holding a slot, over all ranks
  // Why generation is degraded or down ("rank 1 (generator, cpu) is dead: ..."); empty when healthy.
  std::string problem() const override;
  void render_metrics(std::string& out) const override;  // render_scheduler_metrics

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

class ControlPlane;
// Rank 0's generation side for `deployment` (nullptr when no rank runs a target): a RoundScheduler whose
// rounds leave through `outbox` (the queue ControlPlane::serve and drain pump), with the control plane's
// round answers, readiness and deaths wired to it. It must be stopped (stop(), or destroyed) before the
// control plane goes. The HTTP side takes it as its GenerationService; /metrics appends
// render_scheduler_metrics(); /health adds problem().
std::unique_ptr<RoundScheduler> make_generation_service(const config::Deployment& deployment,
                                                        const worker::Topology& topology,
                                                        worker::BlockingQueue<Dispatch>& outbox, ControlPlane& control);

}  // namespace tandem::coordinator

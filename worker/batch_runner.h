// BatchRunner: what a scorer worker runs its batches on. The scorer runner (load_scorer.cpp) wraps a
// DecisionModel's Scorer; tests give run_worker a runner of their own. RankRunner: what any worker's
// compute thread serves once loaded (a scorer's batch loop, a target's rounds, a drafter's link).
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"
#include "worker/mailbox.h"
#include "worker/topology.h"

namespace tandem::worker {

struct RunnerInfo {
  std::string role;
  std::string model;
  std::string backend;
  std::string device;
  uint64_t weight_bytes = 0;
  uint64_t plan_bytes = 0;
  uint32_t vocab = 0;
  uint32_t slots = 0;        // generation ranks (worker::Ready)
  uint32_t capacity = 0;
  uint32_t block = 0;
  uint32_t max_context = 0;
  uint64_t state_bytes = 0;  // generation ranks: the KV cache (target) and context cache (drafter)
};

struct RunOutput {
  ir::Bucket bucket;
  std::vector<float> logits;              // one per marker
  std::vector<std::array<float, 2>> act;  // one pair per sequence
};

class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  // Checks the batch against the model (ids in the vocabulary, a bucket that holds it) and runs it.
  virtual Result<RunOutput> run(const ir::Batch& batch) = 0;
  virtual RunnerInfo info() const = 0;
};

// Called on the worker's compute thread, so heartbeats flow while it loads.
using RunnerFactory = std::function<Result<std::unique_ptr<BatchRunner>>()>;

class RankRunner {
 public:
  virtual ~RankRunner() = default;
  virtual RunnerInfo info() const = 0;
  // Serves until the mailbox closes: commands (and peer frames) in, results to `coordinator` through
  // `out`. Never throws; a failure it cannot report ends it.
  virtual void serve(Mailbox& mail, Outbox& out, int coordinator) = 0;
};
// Called on the compute thread with the rank's mailbox and outbox, which outlive the runner (peer
// pipes are made on them, and a load may already talk to its peers: an NCCL unique id).
using RankFactory = std::function<Result<std::unique_ptr<RankRunner>>(Mailbox&, Outbox&)>;
// The scorer's loop: each RunBatch command run on `runner`, answered BatchDone or BatchFailed.
std::unique_ptr<RankRunner> serve_batches(std::unique_ptr<BatchRunner> runner);

// The backend a rank's YAML `backend` section asks for (engine/backends make_backend).
Result<std::unique_ptr<ir::Backend>> make_rank_backend(const config::Backend& backend);

// Asked by a long load between its units of work (each plan of a warm-up): true once the rank has been
// told to stop (Mailbox::closed), and the load then ends with a kCancelled error at the next unit.
using Stopping = std::function<bool()>;

// The scorer of a deployment rank: loads models.scorer, makes the rank's backend, and lowers every
// serving bucket before it reports ready.
Result<std::unique_ptr<BatchRunner>> load_scorer(const config::Model& model, const config::Backend& backend,
                                                 const ir::BucketTable& buckets, const Stopping& stopping = {});

// The generator of a deployment rank: models.target and models.drafter on the rank's backend, with the
// generation section's slots, KV capacity and block size; serves Round commands.
Result<std::unique_ptr<RankRunner>> load_generator(const config::Model& target, const config::Model& drafter,
                                                   const config::Backend& backend,
                                                   const config::Generation& generation, int rank,
                                                   const Stopping& stopping = {});
// A target rank: models.target on the rank's backend, drafting through `links` (one per drafter rank
// paired with it; models.drafter is read for its tap layers); a reply slower than `wait` fails the round.
Result<std::unique_ptr<RankRunner>> load_target(const config::Model& target, const config::Model& drafter,
                                                const config::Backend& backend, const config::Generation& generation,
                                                int rank, std::map<int, std::unique_ptr<comm::Link>> links,
                                                std::chrono::milliseconds wait, const Stopping& stopping = {});
// A drafter rank: models.drafter (with models.target's embedding and head) serving the DraftAsks of
// `target_rank` over `link` (the data plane to it) until the rank stops or its target is lost.
Result<std::unique_ptr<RankRunner>> load_drafter(const config::Model& target, const config::Model& drafter,
                                                 const config::Backend& backend,
                                                 const config::Generation& generation, int target_rank,
                                                 std::unique_ptr<comm::Link> link, const Stopping& stopping = {});
// The runner factory of a generator, target or drafter rank of `d` (tandem serve and test jobs).
RankFactory generation_rank_factory(const config::Deployment& d, const Topology& topology);

}  // namespace tandem::worker

// BatchRunner: what a worker runs its batches on. The scorer runner (load_scorer.cpp) wraps a
// DecisionModel's Scorer; tests give run_worker a runner of their own.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/core/result.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"

namespace tandem::worker {

struct RunnerInfo {
  std::string role;
  std::string model;
  std::string backend;
  std::string device;
  uint64_t weight_bytes = 0;
  uint64_t plan_bytes = 0;
  uint32_t vocab = 0;
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

// The scorer of a deployment rank: loads models.scorer, makes the rank's backend, and lowers every
// serving bucket before it reports ready.
Result<std::unique_ptr<BatchRunner>> load_scorer(const config::Model& model, const config::Backend& backend,
                                                 const ir::BucketTable& buckets);

}  // namespace tandem::worker

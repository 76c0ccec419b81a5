// Executor: runs one graph on one backend, picking the smallest bucket of its stage that holds each
// batch, lowering that bucket on first use and replaying its plan after (scorer.md §2).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "engine/ir/backend.h"

namespace tandem::ir {

class Executor {
 public:
  // The graph, weights and table must outlive the executor.
  Executor(Backend& backend, const Weights& weights, const Graph& graph, const BucketTable& table,
           std::string stage);

  // Validates nothing: callers check() batches at their edge. Errors if no bucket holds the batch.
  Status run(const Batch& batch, State* state, Outputs& out);
  // Lowers the bucket now (warm-up); no-op if already lowered.
  Status prepare(Bucket bucket);
  Result<Bucket> bucket_for(const Batch& batch) const;

  size_t plan_bytes() const;
  size_t plans() const { return plans_.size(); }
  const Graph& graph() const { return graph_; }
  Backend& backend() { return backend_; }

 private:
  Backend& backend_;
  const Weights& weights_;
  const Graph& graph_;
  const BucketTable& table_;
  std::string stage_;
  std::map<Bucket, std::unique_ptr<Plan>> plans_;
};

// Checks that every op's operands agree (rows, widths, weight shapes) and names the first that does
// not. Graph builders call it once; backends rely on it.
Status validate(const Graph& graph);

}  // namespace tandem::ir

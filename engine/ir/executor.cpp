// Executor: bucket choice and plan cache.
#include "engine/ir/executor.h"

namespace tandem::ir {

const char* to_string(Precision p) { return p == Precision::kF32 ? "f32" : "f16"; }

Result<Precision> parse_precision(std::string_view text) {
  if (text == "f32") return Precision::kF32;
  if (text == "f16") return Precision::kF16;
  return Error::make(ErrorKind::kInvalidArgument, "precision '{}' is not one of f32, f16", text);
}

Executor::Executor(Backend& backend, const Weights& weights, const Graph& graph, const BucketTable& table,
                   std::string stage)
    : backend_(backend), weights_(weights), graph_(graph), table_(table), stage_(std::move(stage)) {}

Result<Bucket> Executor::bucket_for(const Batch& batch) const {
  return table_.smallest(stage_, batch.tokens(), batch.seqs(), batch.num_markers());
}

Status Executor::prepare(Bucket bucket) {
  if (plans_.count(bucket)) return {};
  TANDEM_ASSIGN(auto plan, backend_.lower(weights_, graph_, bucket));
  plans_.emplace(bucket, std::move(plan));
  return {};
}

Status Executor::run(const Batch& batch, State* state, Outputs& out) {
  TANDEM_ASSIGN(Bucket bucket, bucket_for(batch));
  TANDEM_TRY(prepare(bucket));
  return backend_.run(*plans_.at(bucket), batch, state, out);
}

size_t Executor::plan_bytes() const {
  size_t total = 0;
  for (const auto& [b, p] : plans_) total += p->bytes();
  return total;
}

}  // namespace tandem::ir

// Executor: bucket choice and plan cache.
#include "engine/ir/executor.h"

namespace tandem::ir {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kF32: return "f32";
    case Precision::kF16: return "f16";
    case Precision::kBF16: return "bf16";
  }
  return "?";
}

Result<Precision> parse_precision(std::string_view text) {
  for (Precision p : {Precision::kF32, Precision::kF16, Precision::kBF16}) {
    if (text == to_string(p)) return p;
  }
  return Error::make(ErrorKind::kInvalidArgument, "precision '{}' is not one of f32, f16, bf16", text);
}

size_t storage_bytes(Storage s) {
  switch (s) {
    case Storage::kF32:
    case Storage::kU32: return 4;
    case Storage::kF16:
    case Storage::kBF16: return 2;
  }
  return 4;
}

const char* to_string(Storage s) {
  switch (s) {
    case Storage::kF32: return "f32";
    case Storage::kF16: return "f16";
    case Storage::kBF16: return "bf16";
    case Storage::kU32: return "u32";
  }
  return "?";
}

Status check_supported(const Backend& backend, const Graph& graph) {
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    Status s = backend.supports(graph, graph.ops[i]);
    if (!s.ok()) {
      return std::move(s).context(fmt::format("the {} backend cannot run graph op {} ({})", backend.caps().name, i,
                                              op_name(graph.ops[i])));
    }
  }
  return {};
}

Executor::Executor(Backend& backend, const Weights& weights, const Graph& graph, const BucketTable& table,
                   std::string stage)
    : backend_(backend), weights_(weights), graph_(graph), table_(table), stage_(std::move(stage)) {}

Result<Bucket> Executor::bucket_for(const Batch& batch) const {
  return table_.smallest(stage_, batch.tokens(), batch.seqs(), batch.num_picks());
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

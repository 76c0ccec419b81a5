// Role names and the small queries on a loaded Deployment (config.h).
#include "config/config.h"

#include <fmt/format.h>

namespace tandem::config {

const char* to_string(Role role) {
  switch (role) {
    case Role::kCoordinator: return "coordinator";
    case Role::kScorer: return "scorer";
    case Role::kTarget: return "target";
    case Role::kDrafter: return "drafter";
    case Role::kTargetDrafter: return "target+drafter";
  }
  return "unknown";
}

uint32_t Deployment::count(Role role) const {
  uint32_t n = 0;
  for (const Rank& r : ranks) n += r.role == role ? 1 : 0;
  return n;
}

const Model* Deployment::model(Role role) const {
  auto it = models.find(role);
  return it == models.end() ? nullptr : &it->second;
}

Result<ir::BucketTable> serving_buckets(const Deployment& d) {
  std::string text;
  for (const ir::Bucket& b : d.bucket_table.stage("compat")) {
    text += fmt::format("compat {} {} {}\n", b.tokens, b.seqs, b.picks);
    if (b.tokens >= d.batcher.max_batch_tokens) break;
  }
  return ir::BucketTable::parse(text, d.origin + " (serving buckets)");
}

}  // namespace tandem::config

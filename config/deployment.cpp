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
    case Role::kGenerator: return "generator";
  }
  return "unknown";
}

bool runs_target(Role role) { return role == Role::kTarget || role == Role::kGenerator; }
bool runs_drafter(Role role) { return role == Role::kDrafter || role == Role::kGenerator; }

const char* to_string(AdminAccess access) {
  switch (access) {
    case AdminAccess::kLoopback: return "loopback";
    case AdminAccess::kAll: return "all";
    case AdminAccess::kOff: return "off";
  }
  return "loopback";
}

const char* to_string(Verify v) {
  switch (v) {
    case Verify::kMatch: return "match";
    case Verify::kReject: return "reject";
  }
  return "unknown";
}

uint32_t Generation::block_for(uint32_t batch, uint32_t fallback) const {
  uint32_t block = fallback;
  for (const DraftStep& s : draft_schedule) {
    if (s.batch > batch) break;
    block = s.block;
  }
  return block;
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

bool Deployment::serves_generation() const {
  for (const Rank& r : ranks) {
    if (runs_target(r.role)) return true;
  }
  return false;
}

bool Deployment::serves_scoring() const { return count(Role::kScorer) > 0; }

Result<ir::BucketTable> serving_buckets(const Deployment& d) {
  std::string text;
  for (const ir::Bucket& b : d.bucket_table.stage("compat")) {
    text += fmt::format("compat {} {} {}\n", b.tokens, b.seqs, b.picks);
    if (b.tokens >= d.batcher.max_batch_tokens) break;
  }
  return ir::BucketTable::parse(text, d.origin + " (serving buckets)");
}

}  // namespace tandem::config

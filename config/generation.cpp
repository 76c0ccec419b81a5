// The `generation` section and drafter pairing (generation_impl.h): block size, slots, KV capacity,
// queue, verify mode, overlap and the draft-length schedule, each checked with its YAML path.
#include "config/generation_impl.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace tandem::config {
namespace {

constexpr std::array<std::string_view, 2> kVerifyNames = {"match", "reject"};
constexpr std::array<std::string_view, 2> kBooleans = {"true", "false"};

// The largest block the embedded 'drafter' buckets run (the rule of engine/models/dflash
// max_block_size: `seqs` blocks of B rows, B − 1 of them LM-head rows, per bucket). Target and drafter
// ranks lower the embedded tables, so this is the limit a deployment must stay within.
uint32_t max_block() {
  uint32_t most = 0;
  for (const ir::Bucket& b : ir::BucketTable::defaults().stage("drafter")) {
    if (b.seqs == 0) continue;
    most = std::max(most, std::min(b.tokens / b.seqs, b.picks / b.seqs + 1));
  }
  return most;
}

// 0 (where 0 is allowed) or 2..max_block(): a block drafts B − 1 tokens, so 1 would draft nothing.
Result<uint32_t> read_block(YamlMap& m, std::string_view key, uint32_t fallback, const char* zero_means) {
  const uint32_t most = max_block();
  TANDEM_ASSIGN(uint64_t v, m.uint(key, fallback, 0, most));
  if (v == 1) {
    return yaml_error(m.child(key), m.get(key),
                      fmt::format("1 drafts nothing; allowed: 0 ({}) or 2..{}", zero_means, most));
  }
  return static_cast<uint32_t>(v);
}

Result<std::vector<DraftStep>> read_schedule(YamlMap& m) {
  std::vector<DraftStep> out;
  YAML::Node list = m.get("draft_schedule");
  const YamlPlace place = m.child("draft_schedule");
  if (!list.IsDefined() || list.IsNull()) return out;
  if (!list.IsSequence() || list.size() == 0) {
    return yaml_error(place, list, "expected a list of {batch, block} entries with ascending batch sizes");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    TANDEM_ASSIGN(YamlMap e, YamlMap::of(list[i], {place.origin, fmt::format("{}[{}]", place.path, i)}));
    if (!list[i].IsMap()) return yaml_error(e.place(), list[i], "expected a mapping {batch: N, block: B}");
    if (!e.has("batch") || !e.has("block")) {
      return yaml_error(e.place(), list[i], "needs both 'batch' (requests decoding) and 'block' (0: no speculation)");
    }
    DraftStep s;
    TANDEM_ASSIGN(uint64_t batch, e.uint("batch", 1, 1, 1u << 20));
    s.batch = static_cast<uint32_t>(batch);
    TANDEM_ASSIGN(s.block, read_block(e, "block", 0, "no speculation"));
    if (!out.empty() && s.batch <= out.back().batch) {
      return yaml_error(e.child("batch"), e.get("batch"),
                        fmt::format("{} does not exceed the previous entry's batch {}; allowed: ascending batch sizes",
                                    s.batch, out.back().batch));
    }
    TANDEM_TRY(e.finish());
    out.push_back(s);
  }
  return out;
}

}  // namespace

Result<Generation> read_generation(YamlMap& top) {
  TANDEM_ASSIGN(YamlMap m, top.map("generation"));
  Generation out;
  TANDEM_ASSIGN(out.block_size, read_block(m, "block_size", 0, "the drafter's block_size"));
  TANDEM_ASSIGN(uint64_t slots, m.uint("slots", out.slots, 1, 4096));
  out.slots = static_cast<uint32_t>(slots);
  TANDEM_ASSIGN(uint64_t capacity, m.uint("kv_capacity", out.kv_capacity, 0, 1u << 24));
  if (capacity != 0 && capacity < 2 * uint64_t{max_block()}) {
    return yaml_error(m.child("kv_capacity"), m.get("kv_capacity"),
                      fmt::format("{} positions cannot hold a prompt and a block; allowed: 0 (the target's "
                                  "max_position_embeddings) or at least {}",
                                  capacity, 2 * max_block()));
  }
  out.kv_capacity = static_cast<uint32_t>(capacity);
  TANDEM_ASSIGN(uint64_t queue, m.uint("max_queue_requests", out.max_queue_requests, 1, 1u << 24));
  out.max_queue_requests = static_cast<uint32_t>(queue);
  TANDEM_ASSIGN(std::string verify, m.choice("verify", to_string(out.verify), kVerifyNames));
  out.verify = verify == "reject" ? Verify::kReject : Verify::kMatch;
  TANDEM_ASSIGN(std::string overlap, m.choice("overlap", out.overlap ? "true" : "false", kBooleans));
  out.overlap = overlap == "true";
  TANDEM_ASSIGN(std::string warm_up, m.choice("warm_up", out.warm_up ? "true" : "false", kBooleans));
  out.warm_up = warm_up == "true";
  TANDEM_ASSIGN(out.draft_schedule, read_schedule(m));
  TANDEM_TRY(m.finish());
  return out;
}

Result<int> read_drafter_target(YamlMap& rank, const YAML::Node& node, const std::vector<Rank>& ranks) {
  if (!rank.has("target")) {
    for (int r = static_cast<int>(ranks.size()) - 1; r > 0; --r) {
      if (ranks[static_cast<size_t>(r)].role == Role::kTarget) return r;
    }
    return yaml_error(rank.place(), node,
                      "a drafter drafts for a target rank listed before it, or the one named by 'target'; "
                      "allowed: a 'target' rank earlier in 'ranks', or target: <its index>");
  }
  const size_t here = ranks.size();
  TANDEM_ASSIGN(uint64_t t, rank.uint("target", 0, 1, 1u << 20));
  const YamlPlace place = rank.child("target");
  // Later ranks are not read yet: the check that the index is a target waits for check_generation.
  if (t == here) return yaml_error(place, rank.get("target"), fmt::format("{} is this drafter itself", t));
  return static_cast<int>(t);
}

Status check_generation(const Deployment& d, YamlMap& top) {
  const bool section = top.has("generation");
  if (section && !d.serves_generation()) {
    return yaml_error(top.child("generation"), top.get("generation"),
                      "no rank runs a target; allowed: a generation section with target or generator ranks");
  }
  for (size_t i = 0; i < d.ranks.size(); ++i) {
    const Rank& r = d.ranks[i];
    if (r.role != Role::kDrafter) continue;
    const YamlPlace place{top.place().origin, fmt::format("ranks[{}].target", i)};
    const YAML::Node rank_node = top.get("ranks")[i];
    const YAML::Node node = rank_node["target"].IsDefined() ? rank_node["target"] : rank_node;
    if (r.target < 0 || static_cast<size_t>(r.target) >= d.ranks.size()) {
      return yaml_error(place, node,
                        fmt::format("rank {} does not exist; allowed: the index of a target rank in 0..{}", r.target,
                                    d.ranks.size() - 1));
    }
    const Role paired = d.ranks[static_cast<size_t>(r.target)].role;
    if (paired != Role::kTarget) {
      return yaml_error(place, node,
                        fmt::format("rank {} is a {}; allowed: the index of a target rank (a generator drafts "
                                    "for itself)",
                                    r.target, to_string(paired)));
    }
  }
  return ok_status();
}

}  // namespace tandem::config

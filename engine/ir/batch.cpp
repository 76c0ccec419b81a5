// Batch construction and validation.
#include "engine/ir/batch.h"

#include <cmath>

namespace tandem::ir {

void Batch::add_sequence(const std::vector<uint32_t>& seq_ids, const std::vector<uint32_t>& seq_picks,
                         uint8_t type) {
  if (cu.empty()) cu.push_back(0);
  if (pcu.empty()) pcu.push_back(0);
  ids.insert(ids.end(), seq_ids.begin(), seq_ids.end());
  picks.insert(picks.end(), seq_picks.begin(), seq_picks.end());
  cu.push_back(static_cast<uint32_t>(ids.size()));
  pcu.push_back(static_cast<uint32_t>(picks.size()));
  qtype.push_back(type);
}

void Batch::clear() {
  ids.clear();
  cu.clear();
  picks.clear();
  pcu.clear();
  qtype.clear();
  start.clear();
  slot.clear();
  features.clear();
  feature_source = {};
  feature_rows.clear();
  sampling.clear();
  proposals.clear();
}

namespace {
Error bad(std::string message) { return Error(ErrorKind::kInvalidArgument, "batch." + std::move(message)); }

Status check_offsets(const std::vector<uint32_t>& off, const char* name, size_t seqs, size_t total,
                     const char* total_name) {
  if (off.size() != seqs + 1) {
    return bad(fmt::format("{} has {} entries, expected {} (sequences + 1)", name, off.size(), seqs + 1));
  }
  if (off[0] != 0) return bad(fmt::format("{}[0] = {}, expected 0", name, off[0]));
  for (size_t i = 1; i < off.size(); ++i) {
    if (off[i] < off[i - 1]) {
      return bad(fmt::format("{}[{}] = {} is less than {}[{}] = {}", name, i, off[i], name, i - 1, off[i - 1]));
    }
  }
  if (off.back() != total) {
    return bad(fmt::format("{}[{}] = {}, expected the number of {} ({})", name, seqs, off.back(), total_name,
                           total));
  }
  return {};
}
// Device feature rows: one per token, inside the source, of the graph's width and a float storage.
// RejectSample's proposals (batch.h): a sequence with them picks all its rows, samples, and has one
// proposal row per draft of f32 values (and u32 candidates as wide).
Status check_proposals(const Batch& b) {
  if (b.proposals.empty()) return {};
  const size_t seqs = b.qtype.size();
  if (b.proposals.size() != seqs) {
    return bad(fmt::format("proposals has {} entries, expected one per sequence ({})", b.proposals.size(), seqs));
  }
  for (uint32_t s = 0; s < seqs; ++s) {
    if (!b.has_proposals(s)) continue;
    const ProposalRows& p = b.proposals[s];
    const uint32_t len = b.cu[s + 1] - b.cu[s];
    bool all = b.pcu[s + 1] - b.pcu[s] == len;
    for (uint32_t m = b.pcu[s]; all && m < b.pcu[s + 1]; ++m) all = b.picks[m] == m - b.pcu[s];
    if (!all || len < 2) {
      return bad(fmt::format("proposals[{}] are given for a sequence of {} rows that does not pick each of them "
                             "(a verify block of at least one draft does)", s, len));
    }
    if (b.sampling.size() != seqs || !(b.sampling[s].temperature > 0.0f)) {
      return bad(fmt::format("proposals[{}] are given for a sequence that does not sample (rejection sampling "
                             "needs temperature > 0)", s));
    }
    const bool sparse = !p.dense();
    if (p.values.rows != len - 1 || p.values.width == 0 || p.values.stride < p.values.width ||
        p.values.storage != Storage::kF32 ||
        (sparse && (p.ids.rows != len - 1 || p.ids.width != p.values.width || p.ids.stride < p.ids.width ||
                    p.ids.storage != Storage::kU32))) {
      return bad(fmt::format("proposals[{}]: {} value rows of {} {} ({} apart) and {} candidate rows of {} {} for {} "
                             "drafts (f32 values, u32 candidates as wide)", s, p.values.rows, p.values.width,
                             to_string(p.values.storage), p.values.stride, p.ids.rows, p.ids.width,
                             to_string(p.ids.storage), len - 1));
    }
  }
  return {};
}

Status check_feature_rows(const Batch& b, uint32_t width) {
  const DeviceRows& src = b.feature_source;
  if (!b.features.empty()) {
    return bad(fmt::format("features has {} values and feature_rows {}: give one of them", b.features.size(),
                           b.feature_rows.size()));
  }
  if (b.feature_rows.size() != b.ids.size()) {
    return bad(fmt::format("feature_rows has {} entries, expected one per token ({})", b.feature_rows.size(),
                           b.ids.size()));
  }
  if (src.data == nullptr) return bad("feature_source has no data");
  if (src.width != width || src.stride < src.width) {
    return bad(fmt::format("feature_source rows are {} wide ({} apart), the graph reads rows of {}", src.width,
                           src.stride, width));
  }
  if (src.storage == Storage::kU32) return bad("feature_source holds u32 ids, not feature values");
  for (size_t i = 0; i < b.feature_rows.size(); ++i) {
    if (b.feature_rows[i] >= src.rows) {
      return bad(fmt::format("feature_rows[{}] = {} is outside the {} rows of feature_source", i, b.feature_rows[i],
                             src.rows));
    }
  }
  return {};
}
}  // namespace

Status check(const Batch& b, const BatchLimits& limits) {
  const size_t seqs = b.qtype.size();
  if (b.cu.empty() && b.pcu.empty() && seqs == 0 && b.ids.empty() && b.picks.empty()) return {};
  TANDEM_TRY(check_offsets(b.cu, "cu", seqs, b.ids.size(), "ids"));
  TANDEM_TRY(check_offsets(b.pcu, "pcu", seqs, b.picks.size(), "picks"));
  for (size_t s = 0; s < seqs; ++s) {
    if (b.qtype[s] >= limits.qtypes) {
      return bad(fmt::format("qtype[{}] = {} is not a question type (0..{})", s, b.qtype[s], limits.qtypes - 1));
    }
    const uint32_t len = b.cu[s + 1] - b.cu[s];
    for (uint32_t m = b.pcu[s]; m < b.pcu[s + 1]; ++m) {
      if (b.picks[m] >= len) {
        return bad(fmt::format("picks[{}] = {} is outside sequence {} of {} tokens", m, b.picks[m], s, len));
      }
    }
  }
  for (size_t i = 0; i < b.ids.size(); ++i) {
    if (b.ids[i] >= limits.vocab) {
      return bad(fmt::format("ids[{}] = {} is outside the vocabulary of {} tokens", i, b.ids[i], limits.vocab));
    }
  }
  if (limits.feature_width > 0 && b.device_features()) {
    TANDEM_TRY(check_feature_rows(b, limits.feature_width));
  } else if (limits.feature_width > 0) {
    const size_t want = b.ids.size() * limits.feature_width;
    if (b.features.size() != want) {
      return bad(fmt::format("features has {} values, expected {} ({} rows of {})", b.features.size(), want,
                             b.ids.size(), limits.feature_width));
    }
    for (size_t i = 0; i < b.features.size(); ++i) {
      if (!std::isfinite(b.features[i])) return bad(fmt::format("features[{}] is not finite", i));
    }
  } else if (!b.features.empty()) {
    return bad(fmt::format("features has {} values but this graph reads none", b.features.size()));
  } else if (b.device_features()) {
    return bad(fmt::format("feature_rows has {} entries but this graph reads none", b.feature_rows.size()));
  }
  TANDEM_TRY(check_proposals(b));
  if (limits.slots > 0) {
    if (b.start.size() != seqs) {
      return bad(fmt::format("start has {} entries, expected one per sequence ({})", b.start.size(), seqs));
    }
    if (b.slot.size() != seqs) {
      return bad(fmt::format("slot has {} entries, expected one per sequence ({})", b.slot.size(), seqs));
    }
    for (size_t s = 0; s < seqs; ++s) {
      if (b.slot[s] >= limits.slots) {
        return bad(fmt::format("slot[{}] = {} is outside the {} cache slots", s, b.slot[s], limits.slots));
      }
      for (size_t t = 0; t < s; ++t) {
        if (b.slot[t] == b.slot[s]) {
          return bad(fmt::format("slot[{}] = slot[{}] = {}: two sequences share a cache slot", t, s, b.slot[s]));
        }
      }
      const uint64_t end = uint64_t{b.start[s]} + (b.cu[s + 1] - b.cu[s]);
      if (end > limits.capacity) {
        return bad(fmt::format("start[{}] = {} plus {} rows passes the cache capacity of {} positions", s,
                               b.start[s], b.cu[s + 1] - b.cu[s], limits.capacity));
      }
    }
  } else if (!b.start.empty() || !b.slot.empty()) {
    return bad("start/slot are set but this graph has no caches");
  }
  return {};
}

}  // namespace tandem::ir

// Batch: the flattened, unpadded work of one plan run (scorer.md §2), plus what decoder graphs need
// (start positions, cache slots, feature rows, sampling parameters). check() validates every field once
// at the edge, so backends index without checking again.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/bucket.h"
#include "engine/ir/device_rows.h"
#include "engine/ir/sampling.h"

namespace tandem::ir {

struct Batch {
  std::vector<uint32_t> ids;      // every token, sequences end to end
  std::vector<uint32_t> cu;       // sequence starts, with the token total last (S + 1)
  // Rows picked out of each sequence for Rows::kPicks values (the scorer's option markers, a decoder's
  // logit rows), relative to their own sequence.
  std::vector<uint32_t> picks;
  std::vector<uint32_t> pcu;      // pick starts per sequence, with the pick total last (S + 1)
  std::vector<uint8_t> qtype;     // per sequence: 0 choice, 1 score, 2 noul
  // Decoders only (empty for the scorer, meaning 0 and the sequence index):
  std::vector<uint32_t> start;    // absolute position of each sequence's first row
  std::vector<uint32_t> slot;     // cache slot of each sequence
  std::vector<float> features;    // tokens × feature width, read by Input
  // Or Input reads them where a run left them (the target's tap rows): token r's row is row
  // feature_rows[r] of feature_source, copied on the device (a backend that does not own them fetches
  // them). features stays empty then.
  DeviceRows feature_source;
  std::vector<uint32_t> feature_rows;
  std::vector<SamplingParams> sampling;  // per sequence, read by Sample (empty: greedy for all)
  // Per sequence, read by RejectSample (empty: none for any): a verify block's proposals, one row per
  // draft. A sequence with proposals picks every row, the drafts being its rows 1.., and samples (T > 0).
  std::vector<ProposalRows> proposals;

  uint32_t tokens() const { return static_cast<uint32_t>(ids.size()); }
  uint32_t seqs() const { return cu.empty() ? 0 : static_cast<uint32_t>(cu.size() - 1); }
  uint32_t num_picks() const { return static_cast<uint32_t>(picks.size()); }
  uint32_t seq_len(uint32_t s) const { return cu[s + 1] - cu[s]; }
  uint32_t seq_start(uint32_t s) const { return start.empty() ? 0 : start[s]; }
  uint32_t seq_slot(uint32_t s) const { return slot.empty() ? s : slot[s]; }
  bool device_features() const { return !feature_rows.empty(); }
  bool has_proposals(uint32_t s) const { return s < proposals.size() && !proposals[s].empty(); }

  // Appends one sequence (picks relative to it). Builders for tests and the batcher.
  void add_sequence(const std::vector<uint32_t>& seq_ids, const std::vector<uint32_t>& seq_picks,
                    uint8_t type);
  void clear();
};

struct BatchLimits {
  uint32_t vocab = 0;
  uint32_t qtypes = 3;
  uint32_t feature_width = 0;  // rows of Batch::features must have this width when > 0
  uint32_t slots = 0;          // > 0: decoder batch; start and slot are required
  uint32_t capacity = 0;       // positions per slot; start + rows must fit
};

// Rejects a malformed batch with a kInvalidArgument error naming the field, index and values.
Status check(const Batch& batch, const BatchLimits& limits);

}  // namespace tandem::ir

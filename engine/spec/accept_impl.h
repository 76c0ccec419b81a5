// Accept rules of a verify row set (dflash.md §1.6, §1.8): rows 0..n of the target's logits for
// [tok, d_1 .. d_n] at positions start.. ; row i predicts position start + i + 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/spec/spec.h"

namespace tandem::spec {

struct Verdict {
  uint32_t accepted = 0;            // leading drafts kept
  std::vector<uint32_t> committed;  // d_1 .. d_accepted, then the bonus token
};

// Greedy (temperature 0) and sample-and-match: `tokens` holds the target's own token of each verify row
// (target_token for the position after it, picked by the backend's Sample op); a draft stays iff it
// equals its row's token, and the first row whose token differs, or the row after the last draft, gives
// the bonus. tokens.size() > drafts.size().
Verdict accept_match(std::span<const uint32_t> tokens, std::span<const uint32_t> drafts);

// Rejection sampling against the drafts' proposals (temperature > 0) on the host: ir::reject_block.
Verdict accept_reject(const ir::Tensor2& logits, std::span<const uint32_t> drafts,
                      std::span<const Proposal> proposals, const SamplingParams& sampling, uint32_t start);

// The verdict that rejection sampling on the target's device left in its ids rows (graph.h RejectSample):
// the committed tokens up to ir::kNoToken; anything but a prefix of the drafts and one token more is an
// internal error.
Result<Verdict> accept_device(std::span<const uint32_t> ids, std::span<const uint32_t> drafts);

}  // namespace tandem::spec

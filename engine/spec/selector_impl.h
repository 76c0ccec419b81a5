// The DFlash 2 candidate selector (dflash.md §3.3): per draft row the top-k of the head's logits,
// soft-capped, plus a low-rank bonus P[prev]·diag(S·h)·C[candidate]; a walk picks one candidate per row,
// each row's predecessor being the previous pick (the anchor for row 1).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/ir/backend.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/spec/spec.h"

namespace tandem::spec {

struct SelectorParams {
  uint32_t top_k = 16;
  float softcap = 0.0f;  // 0: no soft-capping
  float output_multiplier = 1.0f;
};
SelectorParams selector_params(const io::DFlashConfig& cfg);

struct Candidates {
  std::vector<uint32_t> ids;  // by value descending, ties to the lower id
  std::vector<float> values;  // the raw logits
};
Candidates top_k(std::span<const float> row, uint32_t k);

struct Walk {
  std::vector<uint32_t> path;             // one token per draft row
  std::vector<Candidates> candidates;     // per draft row
  std::vector<Proposal> proposals;        // per draft row: softmax(E / T) over its candidates (T > 0)
};

// logits: the draft rows over the draft vocabulary; sel: their S·h rows. temperature 0 walks greedily
// (argmax of E, ties to the lower k); otherwise it samples argmax(E / T + Gumbel), the Gumbel draws keyed
// to (seed, start + row, candidate), and records each row's proposal for rejection sampling.
Walk select(const ir::Tensor2& logits, const ir::Tensor2& sel, uint32_t anchor,
            const models::dflash::Codebooks& codebooks, const SelectorParams& params, float temperature,
            uint64_t seed, uint32_t start);

}  // namespace tandem::spec

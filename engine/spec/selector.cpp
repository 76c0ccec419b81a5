// Top-k candidates and the selector walk on the host (K·r work per row, dflash.md §3.3), each step as
// engine/ir/selector.h defines it (the backends' SelectorWalk op computes the same).
#include "engine/spec/selector_impl.h"
#include "engine/spec/sampling_impl.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/ir/selector.h"

namespace tandem::spec {

SelectorParams selector_params(const io::DFlashConfig& cfg) {
  return {cfg.selector_top_k, cfg.final_logit_softcapping, cfg.output_multiplier};
}

Candidates top_k(std::span<const float> row, uint32_t k) {
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(k, row.size()));
  Candidates c;
  c.ids.resize(n);
  c.values.resize(n);
  ir::top_k(row, n, c.ids, c.values);
  return c;
}

Walk select(const ir::Tensor2& logits, const ir::Tensor2& sel, uint32_t anchor,
            const models::dflash::Codebooks& codebooks, const SelectorParams& params, float temperature,
            uint64_t seed, uint32_t start) {
  const uint32_t rank = codebooks.rank();
  std::vector<float> pred(rank), succ(rank);
  std::vector<double> energy, q;
  Walk w;
  uint32_t prev = anchor;
  for (uint32_t r = 0; r < logits.rows; ++r) {
    Candidates c = top_k(std::span<const float>(logits.data).subspan(size_t{r} * logits.width, logits.width),
                         params.top_k);
    codebooks.predecessor(prev, pred);
    const auto sel_row = std::span<const float>(sel.data).subspan(size_t{r} * sel.width, rank);
    energy.assign(c.ids.size(), 0.0);
    q.assign(c.ids.size(), 0.0);
    for (size_t k = 0; k < c.ids.size(); ++k) {
      codebooks.successor(c.ids[k], succ);
      energy[k] = ir::selector_energy(c.values[k], pred, sel_row, succ, params.softcap, params.output_multiplier);
    }
    // Block row r + 1 drafts position start + r + 1.
    const uint32_t pick = ir::selector_pick(energy, temperature, seed, start + r + 1, q);
    Proposal proposal;
    if (temperature != 0.0f) {
      proposal.ids = c.ids;
      proposal.probs = q;
    }
    prev = c.ids[pick];
    w.path.push_back(prev);
    w.candidates.push_back(std::move(c));
    w.proposals.push_back(std::move(proposal));
  }
  return w;
}

}  // namespace tandem::spec

// Top-k candidates and the selector walk, on the host (K·r work per row, dflash.md §3.3).
#include "engine/spec/selector_impl.h"
#include "engine/spec/sampling_impl.h"

#include <algorithm>
#include <cmath>
#include <numeric>


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
  std::vector<double> bonus(rank), energy;
  Walk w;
  uint32_t prev = anchor;
  for (uint32_t r = 0; r < logits.rows; ++r) {
    Candidates c = top_k(std::span<const float>(logits.data).subspan(size_t{r} * logits.width, logits.width),
                         params.top_k);
    codebooks.predecessor(prev, pred);
    for (uint32_t j = 0; j < rank; ++j) bonus[j] = double{pred[j]} * sel.at(r, j);
    energy.assign(c.ids.size(), 0.0);
    for (size_t k = 0; k < c.ids.size(); ++k) {
      const double scaled = double{params.output_multiplier} * c.values[k];
      double e = params.softcap > 0.0f ? params.softcap * std::tanh(scaled / params.softcap) : scaled;
      codebooks.successor(c.ids[k], succ);
      for (uint32_t j = 0; j < rank; ++j) e += bonus[j] * succ[j];
      energy[k] = e;
    }
    size_t pick = 0;
    Proposal q;
    if (temperature == 0.0f) {
      for (size_t k = 1; k < energy.size(); ++k) {
        if (energy[k] > energy[pick]) pick = k;
      }
    } else {
      const double t = temperature;
      const double top = *std::max_element(energy.begin(), energy.end());
      double sum = 0.0, best = -INFINITY;
      for (size_t k = 0; k < energy.size(); ++k) {
        q.ids.push_back(c.ids[k]);
        q.probs.push_back(std::exp((energy[k] - top) / t));
        sum += q.probs.back();
        const double g = -std::log(-std::log(uniform_open(seed, start + r + 1, Stream::kGumbel,
                                                          static_cast<uint32_t>(k))));
        if (energy[k] / t + g > best) {
          best = energy[k] / t + g;
          pick = k;
        }
      }
      for (double& p : q.probs) p /= sum;
    }
    prev = c.ids[pick];
    w.path.push_back(prev);
    w.candidates.push_back(std::move(c));
    w.proposals.push_back(std::move(q));
  }
  return w;
}

}  // namespace tandem::spec

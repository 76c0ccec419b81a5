// Greedy picks, top-k, tempered top-p distributions and inverse-CDF sampling.
#include "engine/ir/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::ir {

double Distribution::prob(uint32_t id) const {
  // Selector proposals list candidates by rank, not id: a scan serves both.
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return probs[i];
  }
  return 0.0;
}

uint32_t argmax(std::span<const float> row) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

void top_k(std::span<const float> row, uint32_t k, std::span<uint32_t> ids, std::span<float> values) {
  std::vector<uint32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](uint32_t a, uint32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  for (uint32_t i = 0; i < k; ++i) {
    ids[i] = order[i];
    values[i] = row[order[i]];
  }
}

Distribution tempered(std::span<const float> row, float temperature, float top_p) {
  const double t = temperature;
  const float top = *std::max_element(row.begin(), row.end());
  std::vector<double> p(row.size());
  double sum = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    p[i] = std::exp((static_cast<double>(row[i]) - top) / t);
    sum += p[i];
  }
  std::vector<uint32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0u);
  size_t keep = order.size();
  if (top_p < 1.0f) {
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return p[a] > p[b]; });
    double mass = 0.0;
    keep = 0;
    while (keep < order.size() && mass < top_p * sum) mass += p[order[keep++]];
    keep = std::max<size_t>(keep, 1);
    order.resize(keep);
    std::sort(order.begin(), order.end());
  }
  Distribution d;
  d.ids = std::move(order);
  double kept = 0.0;
  for (uint32_t id : d.ids) kept += p[id];
  d.probs.reserve(keep);
  for (uint32_t id : d.ids) d.probs.push_back(p[id] / kept);
  return d;
}

uint32_t sample(const Distribution& dist, double u) {
  double cdf = 0.0;
  for (size_t i = 0; i < dist.ids.size(); ++i) {
    cdf += dist.probs[i];
    if (u < cdf) return dist.ids[i];
  }
  // Rounding left the total just under 1: the last id with mass takes the remainder.
  for (size_t i = dist.ids.size(); i-- > 0;) {
    if (dist.probs[i] > 0.0) return dist.ids[i];
  }
  return dist.ids.empty() ? 0 : dist.ids.back();
}

uint32_t sample_token(std::span<const float> row, const SamplingParams& sampling, uint32_t position,
                      Stream stream) {
  if (sampling.temperature == 0.0f) return argmax(row);
  return sample(tempered(row, sampling.temperature, sampling.top_p), uniform(sampling.seed, position, stream));
}

}  // namespace tandem::ir

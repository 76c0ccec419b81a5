// The DFlash 2 selector step (selector.h): the energy's fixed-order sum and the greedy or Gumbel pick.
#include "engine/ir/selector.h"

#include <array>
#include <cmath>

#include "engine/ir/sampling.h"

namespace tandem::ir {

double selector_cap(float value, float softcap, float multiplier) {
  const double scaled = double{multiplier} * double{value};
  return softcap > 0.0f ? double{softcap} * std::tanh(scaled / double{softcap}) : scaled;
}

double selector_energy(float value, std::span<const float> pred, std::span<const float> sel,
                       std::span<const float> succ, float softcap, float multiplier) {
  std::array<double, kSelectorLanes> lane{};
  for (size_t j = 0; j < pred.size(); ++j) {
    // pred · sel is exact in f64 (two 24-bit significands); the product with succ rounds once.
    const double bonus = double{pred[j]} * double{sel[j]};
    const double term = bonus * double{succ[j]};
    lane[j % kSelectorLanes] = lane[j % kSelectorLanes] + term;
  }
  for (uint32_t m = kSelectorLanes / 2; m > 0; m >>= 1) {
    std::array<double, kSelectorLanes> next{};
    for (uint32_t l = 0; l < kSelectorLanes; ++l) next[l] = lane[l] + lane[l ^ m];
    lane = next;
  }
  return selector_cap(value, softcap, multiplier) + lane[0];
}

uint32_t selector_pick(std::span<const double> energy, float temperature, uint64_t seed, uint32_t position,
                       std::span<double> q) {
  uint32_t pick = 0;
  if (temperature == 0.0f) {
    for (uint32_t k = 1; k < energy.size(); ++k) {
      if (energy[k] > energy[pick]) pick = k;
    }
    for (double& p : q) p = 0.0;
    return pick;
  }
  const double t = temperature;
  double top = energy[0];
  for (double e : energy) top = e > top ? e : top;
  double sum = 0.0, best = -INFINITY;
  for (uint32_t k = 0; k < energy.size(); ++k) {
    q[k] = std::exp((energy[k] - top) / t);
    sum += q[k];
    const double g = -std::log(-std::log(uniform_open(seed, position, Stream::kGumbel, k)));
    if (energy[k] / t + g > best) {
      best = energy[k] / t + g;
      pick = k;
    }
  }
  for (double& p : q) p /= sum;
  return pick;
}

}  // namespace tandem::ir

// Pearson's chi-square test for the sampling tests (the CPU library's and the CUDA round's): the
// statistic over joint-outcome cells, pooling cells that expect fewer than 5, and a critical value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tandem::testing {

// Outcome (the tokens a request produced) -> probability or count.
using Joint = std::map<std::vector<uint32_t>, double>;

// The 0.0001 upper quantile of chi-square with `df` degrees of freedom (Wilson-Hilferty).
inline double chi_critical(size_t df) {
  const double d = static_cast<double>(df), z = 3.7190;
  return d * std::pow(1.0 - 2.0 / (9.0 * d) + z * std::sqrt(2.0 / (9.0 * d)), 3.0);
}

// Pearson's statistic of `observed` counts out of `n` against `expected_p`, and its degrees of freedom;
// cells expecting fewer than 5 are pooled into one.
inline std::pair<double, size_t> chi_square(const Joint& expected_p, const Joint& observed, double n) {
  double chi = 0.0, pool_e = 0.0, pool_o = 0.0;
  size_t cells = 0;
  for (const auto& [key, p] : expected_p) {
    const double e = n * p;
    const double o = observed.count(key) ? observed.at(key) : 0.0;
    if (e < 5.0) {
      pool_e += e;
      pool_o += o;
      continue;
    }
    chi += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pool_e > 0.0) {
    chi += (pool_o - pool_e) * (pool_o - pool_e) / std::max(pool_e, 1e-9);
    ++cells;
  }
  return {chi, cells - 1};
}

}  // namespace tandem::testing

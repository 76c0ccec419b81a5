// Host wall time around each synchronous call (a run copies its outputs back before it returns), so a
// latency includes the launches and copies a caller sees; percentiles over the calls.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"

namespace tandem::bench {

struct Timing {
  std::vector<double> ms;
  double pct(double p) const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0.0 : s[std::min(s.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(s.size())))];
  }
  nlohmann::json json() const {
    return {{"p50_ms", pct(50)}, {"p95_ms", pct(95)}, {"p99_ms", pct(99)}, {"calls", ms.size()}};
  }
};

Result<Timing> time_calls(const std::function<Status()>& call, int warmup, int calls);

}  // namespace tandem::bench

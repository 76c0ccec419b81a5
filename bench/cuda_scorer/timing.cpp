#include "bench/cuda_scorer/timing.h"

#include <algorithm>
#include <chrono>

namespace tandem::bench {

Result<Timing> time_calls(const std::function<Status()>& call, int warmup, int calls) {
  for (int i = 0; i < warmup; ++i) TANDEM_TRY(call());
  Timing t;
  t.ms.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    TANDEM_TRY(call());
    t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return t;
}

}  // namespace tandem::bench

// Microseconds since a steady-clock point: the phase timings ranks report (round, settle, draft, verify).
#pragma once

#include <chrono>
#include <cstdint>

namespace tandem {

inline uint64_t us_since(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace tandem

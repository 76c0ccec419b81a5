// The benchmarks' command-line values: counts and comma-separated lists of numbers, one parser for every
// benchmark, so a bad value is refused with its flag named (never thrown from std::stoul, never silently a default).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/result.h"

namespace tandem::bench {

struct NumberListRules {
  bool integral = true;  // counts (whole numbers) or positive reals
  double max = double(1u << 20);
  bool allow_b = false;  // "B" stands for each drafter's block size, read as 0
};

// "1,8,32" as positive numbers in (0, max]; `flag` names the value in the error.
inline Result<std::vector<double>> number_list(std::string_view flag, std::string_view text, NumberListRules r = {}) {
  std::vector<double> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item(text.substr(at, end - at));
    at = end + 1;
    if (r.allow_b && item == "B") {
      out.push_back(0.0);
      continue;
    }
    char* stop = nullptr;
    const double v = item.empty() ? 0.0 : std::strtod(item.c_str(), &stop);
    const bool in_range = !item.empty() && *stop == '\0' && v > 0 && v <= r.max;  // false for NaN too
    if (!in_range || (r.integral && v != static_cast<double>(static_cast<uint64_t>(v)))) {
      return Error::make(ErrorKind::kInvalidArgument, "{}: '{}' is not {} in {}..{}{} (a comma-separated list)", flag,
                         item, r.integral ? "a count" : "a number", r.integral ? "1" : "0 (excluded)", r.max,
                         r.allow_b ? ", or B" : "");
    }
    out.push_back(v);
  }
  return out;
}

// Counts, as number_list with whole numbers in 1..max.
inline Result<std::vector<uint32_t>> count_list(std::string_view flag, std::string_view text,
                                                uint32_t max = 1u << 20) {
  TANDEM_ASSIGN(const std::vector<double> v, number_list(flag, text, {true, double(max), false}));
  return std::vector<uint32_t>(v.begin(), v.end());
}

// Exactly `n` counts ("K,COLS": n = 2; one count: n = 1).
inline Result<std::vector<uint32_t>> counts_of(std::string_view flag, std::string_view text, size_t n,
                                               uint32_t max = 1u << 20) {
  TANDEM_ASSIGN(std::vector<uint32_t> v, count_list(flag, text, max));
  if (v.size() != n) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: '{}' has {} values, {} wanted", flag, text, v.size(), n);
  }
  return v;
}

inline Result<uint32_t> count(std::string_view flag, std::string_view text, uint32_t max = 1u << 20) {
  TANDEM_ASSIGN(const std::vector<uint32_t> v, counts_of(flag, text, 1, max));
  return v.front();
}

// The value, or "TOOL: the error" on stderr and exit status 1: a benchmark's command line has no caller to return to.
template <typename T>
T value_or_exit(std::string_view tool, Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(tool.size()), tool.data(), r.error().message().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

}  // namespace tandem::bench

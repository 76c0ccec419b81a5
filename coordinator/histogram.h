// Histogram: a Prometheus histogram (cumulative buckets, sum, count) rendered in text format. Not
// thread-safe: its owner locks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::coordinator {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name` with the labels ("" or `k="v",...`).
  void render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace tandem::coordinator

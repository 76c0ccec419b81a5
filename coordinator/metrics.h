// The scoring metrics of serving.md "Metrics worth having", in Prometheus text format: counters and
// histograms (never summaries, so replicas aggregate). Thread-safe; gauges that belong to other
// objects (queue depth, rank states) are passed in when rendering.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/generation_metrics.h"
#include "coordinator/histogram.h"
#include "engine/ir/bucket.h"

namespace tandem::coordinator {

// What a rank looks like at render time.
struct RankGauge {
  int rank = 0;
  std::string role;
  bool up = false;
  uint32_t inflight_batches = 0;
  uint64_t weight_bytes = 0;
  uint64_t plan_bytes = 0;
  uint64_t state_bytes = 0;  // KV and context caches of a generation rank
};

class Metrics {
 public:
  void count_request(std::string_view endpoint, unsigned status, double seconds);
  void count_questions(std::string_view qtype, uint64_t n);
  void observe_queue_seconds(double seconds);
  void observe_batch(const ir::Bucket& bucket, uint32_t sequences, uint32_t tokens);
  void observe_run(int rank, const ir::Bucket& bucket, double seconds);
  void count_batch_failure(int rank);

  // Ends with generation()'s figures.
  std::string render(size_t queue_depth, const std::vector<RankGauge>& ranks) const;
  // What /v1/completions and the round scheduler record (generation_metrics.h).
  GenerationMetrics& generation() { return generation_; }
  const GenerationMetrics& generation() const { return generation_; }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, unsigned>, uint64_t> requests_;
  std::map<std::string, Histogram> request_seconds_;
  std::map<std::string, uint64_t> questions_;
  Histogram queue_seconds_{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}};
  std::map<std::string, Histogram> batch_sequences_;
  std::map<std::string, Histogram> batch_tokens_;
  std::map<std::pair<int, std::string>, Histogram> run_seconds_;
  std::map<int, uint64_t> batch_failures_;
  GenerationMetrics generation_;
};

}  // namespace tandem::coordinator

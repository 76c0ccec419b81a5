// GenerationMetrics: the generation figures of /metrics (Prometheus text, counters and histograms only).
// The HTTP side records what it sees per request (tokens generated, time to first token, inter-token
// time, drafted and accepted tokens, acceptance per block position, finish reasons, cancellations) and
// degraded pairings; the rank-level families (rounds, phases, bytes, KV slots) are the scheduler's own
// (scheduler_metrics.h). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coordinator/generation_service.h"
#include "coordinator/histogram.h"

namespace tandem::coordinator {

class GenerationMetrics {
 public:
  GenerationMetrics();

  // The HTTP side, per request (`endpoint`: "/v1/completions" or "/v1/chat/completions").
  void count_tokens(std::string_view endpoint, uint64_t n);
  void observe_first_token(double seconds);  // from the request's arrival
  void observe_inter_token(double seconds, uint64_t tokens);  // a round's gap, once per token it brought
  // The change in a request's speculative totals between two events.
  void count_speculative(const SpeculativeStats& before, const SpeculativeStats& after);
  void count_finish(std::string_view endpoint, std::string_view reason);  // "length", "stop", "failed", ...
  void count_cancelled(std::string_view reason);  // "client_gone", "timeout", "stop_string"

  // A target/drafter pairing that serves without speculation (its drafter is down...), or nullopt when
  // it is whole again. /health names them.
  void set_degraded(const std::string& pairing, std::optional<std::string> why);
  std::vector<std::pair<std::string, std::string>> degraded() const;

  void render(std::string& out) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> tokens_;
  Histogram first_token_;
  Histogram inter_token_;
  uint64_t drafted_ = 0;
  uint64_t accepted_ = 0;
  uint64_t rounds_seen_ = 0;  // rounds of requests, from their events
  Histogram acceptance_length_;
  std::vector<uint64_t> accepted_per_position_;
  std::map<std::pair<std::string, std::string>, uint64_t> finishes_;
  std::map<std::string, uint64_t> cancelled_;
  std::map<std::string, std::string> degraded_;
};

}  // namespace tandem::coordinator

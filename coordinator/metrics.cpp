// Metrics and their Prometheus text rendering (metrics.h).
#include "coordinator/metrics.h"

#include <fmt/format.h>

namespace tandem::coordinator {
namespace {

const std::vector<double> kSecondsBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
const std::vector<double> kSequenceBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
const std::vector<double> kTokenBounds = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

Histogram& slot(std::map<std::string, Histogram>& m, const std::string& key, const std::vector<double>& bounds) {
  return m.try_emplace(key, bounds).first->second;
}

}  // namespace

void Metrics::count_request(std::string_view endpoint, unsigned status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{std::string(endpoint), status}];
  slot(request_seconds_, std::string(endpoint), kSecondsBounds).observe(seconds);
}

void Metrics::count_questions(std::string_view qtype, uint64_t n) {
  std::lock_guard lock(mutex_);
  questions_[std::string(qtype)] += n;
}

void Metrics::observe_queue_seconds(double seconds) {
  std::lock_guard lock(mutex_);
  queue_seconds_.observe(seconds);
}

void Metrics::observe_batch(const ir::Bucket& bucket, uint32_t sequences, uint32_t tokens) {
  std::lock_guard lock(mutex_);
  const std::string b = ir::to_string(bucket);
  slot(batch_sequences_, b, kSequenceBounds).observe(sequences);
  slot(batch_tokens_, b, kTokenBounds).observe(tokens);
}

void Metrics::observe_run(int rank, const ir::Bucket& bucket, double seconds) {
  std::lock_guard lock(mutex_);
  run_seconds_.try_emplace({rank, ir::to_string(bucket)}, kSecondsBounds).first->second.observe(seconds);
}

void Metrics::count_batch_failure(int rank) {
  std::lock_guard lock(mutex_);
  ++batch_failures_[rank];
}

std::string Metrics::render(size_t queue_depth, const std::vector<RankGauge>& ranks) const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "tandem_requests_total", "counter", "HTTP requests by endpoint and status.");
  for (const auto& [key, n] : requests_) {
    out += fmt::format("tandem_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  }
  header(out, "tandem_request_duration_seconds", "histogram", "Time from a complete request to its response.");
  for (const auto& [endpoint, h] : request_seconds_) {
    h.render(out, "tandem_request_duration_seconds", fmt::format("endpoint=\"{}\"", endpoint));
  }
  header(out, "tandem_questions_total", "counter", "Sequences scored, by question type.");
  for (const auto& [qtype, n] : questions_) out += fmt::format("tandem_questions_total{{qtype=\"{}\"}} {}\n", qtype, n);
  header(out, "tandem_queue_depth", "gauge", "Sequences waiting for a batch.");
  out += fmt::format("tandem_queue_depth {}\n", queue_depth);
  header(out, "tandem_queue_time_seconds", "histogram", "Time a sequence waited from admission to dispatch.");
  queue_seconds_.render(out, "tandem_queue_time_seconds", "");
  header(out, "tandem_batch_sequences", "histogram", "Sequences per dispatched batch, by bucket.");
  for (const auto& [b, h] : batch_sequences_) h.render(out, "tandem_batch_sequences", fmt::format("bucket=\"{}\"", b));
  header(out, "tandem_batch_tokens", "histogram", "Tokens per dispatched batch, by bucket.");
  for (const auto& [b, h] : batch_tokens_) h.render(out, "tandem_batch_tokens", fmt::format("bucket=\"{}\"", b));
  header(out, "tandem_plan_run_seconds", "histogram", "Plan run time on the worker, by rank and bucket.");
  for (const auto& [key, h] : run_seconds_) {
    h.render(out, "tandem_plan_run_seconds", fmt::format("rank=\"{}\",bucket=\"{}\"", key.first, key.second));
  }
  header(out, "tandem_batch_failures_total", "counter", "Batches a rank failed or lost.");
  for (const auto& [rank, n] : batch_failures_) out += fmt::format("tandem_batch_failures_total{{rank=\"{}\"}} {}\n", rank, n);
  header(out, "tandem_rank_up", "gauge", "1 when the rank is loaded and answering heartbeats.");
  for (const auto& r : ranks) out += fmt::format("tandem_rank_up{{rank=\"{}\",role=\"{}\"}} {}\n", r.rank, r.role, r.up ? 1 : 0);
  header(out, "tandem_rank_inflight_batches", "gauge", "Batches sent to the rank and not yet answered.");
  for (const auto& r : ranks) out += fmt::format("tandem_rank_inflight_batches{{rank=\"{}\"}} {}\n", r.rank, r.inflight_batches);
  header(out, "tandem_rank_memory_bytes", "gauge",
         "Backend memory in use per rank: weights, plans and the KV (or drafter context) cache.");
  for (const auto& r : ranks) {
    out += fmt::format("tandem_rank_memory_bytes{{rank=\"{}\",kind=\"weights\"}} {}\n", r.rank, r.weight_bytes);
    out += fmt::format("tandem_rank_memory_bytes{{rank=\"{}\",kind=\"plans\"}} {}\n", r.rank, r.plan_bytes);
    out += fmt::format("tandem_rank_memory_bytes{{rank=\"{}\",kind=\"kv_cache\"}} {}\n", r.rank, r.state_bytes);
  }
  generation_.render(out);
  return out;
}

}  // namespace tandem::coordinator

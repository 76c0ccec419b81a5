// GenerationMetrics (generation_metrics.h).
#include "coordinator/generation_metrics.h"

#include <fmt/format.h>

namespace tandem::coordinator {
namespace {

const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10};
const std::vector<double> kGapBounds = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1};
const std::vector<double> kLengthBounds = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16};
const std::vector<double> kPhaseBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25};

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

GenerationMetrics::GenerationMetrics()
    : first_token_(kLatencyBounds), inter_token_(kGapBounds), acceptance_length_(kLengthBounds) {}

void GenerationMetrics::count_tokens(std::string_view endpoint, uint64_t n) {
  std::lock_guard lock(mutex_);
  tokens_[std::string(endpoint)] += n;
}

void GenerationMetrics::observe_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  first_token_.observe(seconds);
}

void GenerationMetrics::observe_inter_token(double seconds, uint64_t tokens) {
  if (tokens == 0) return;
  std::lock_guard lock(mutex_);
  // A round brings several tokens at once: each is seen `seconds / tokens` after the one before.
  for (uint64_t i = 0; i < tokens; ++i) inter_token_.observe(seconds / static_cast<double>(tokens));
}

void GenerationMetrics::count_speculative(const SpeculativeStats& before, const SpeculativeStats& after) {
  std::lock_guard lock(mutex_);
  const uint32_t rounds = after.rounds > before.rounds ? after.rounds - before.rounds : 0;
  const uint32_t accepted = after.accepted > before.accepted ? after.accepted - before.accepted : 0;
  drafted_ += after.drafted > before.drafted ? after.drafted - before.drafted : 0;
  accepted_ += accepted;
  rounds_seen_ += rounds;
  // Tokens each round committed: its accepted drafts and the target's own token (the mean when one
  // event covers several rounds).
  for (uint32_t r = 0; r < rounds; ++r) acceptance_length_.observe(1.0 + static_cast<double>(accepted) / rounds);
  if (accepted_per_position_.size() < after.accepted_per_position.size()) {
    accepted_per_position_.resize(after.accepted_per_position.size(), 0);
  }
  for (size_t i = 0; i < after.accepted_per_position.size(); ++i) {
    const uint32_t was = i < before.accepted_per_position.size() ? before.accepted_per_position[i] : 0;
    if (after.accepted_per_position[i] > was) accepted_per_position_[i] += after.accepted_per_position[i] - was;
  }
}

void GenerationMetrics::count_finish(std::string_view endpoint, std::string_view reason) {
  std::lock_guard lock(mutex_);
  ++finishes_[{std::string(endpoint), std::string(reason)}];
}

void GenerationMetrics::count_cancelled(std::string_view reason) {
  std::lock_guard lock(mutex_);
  ++cancelled_[std::string(reason)];
}




void GenerationMetrics::set_degraded(const std::string& pairing, std::optional<std::string> why) {
  std::lock_guard lock(mutex_);
  if (why) {
    degraded_[pairing] = std::move(*why);
  } else {
    degraded_.erase(pairing);
  }
}

std::vector<std::pair<std::string, std::string>> GenerationMetrics::degraded() const {
  std::lock_guard lock(mutex_);
  return {degraded_.begin(), degraded_.end()};
}

void GenerationMetrics::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  header(out, "tandem_generation_tokens_total", "counter", "Tokens generated, by endpoint.");
  for (const auto& [endpoint, n] : tokens_) {
    out += fmt::format("tandem_generation_tokens_total{{endpoint=\"{}\"}} {}\n", endpoint, n);
  }
  header(out, "tandem_generation_time_to_first_token_seconds", "histogram",
         "Time from a complete request to its first generated token.");
  first_token_.render(out, "tandem_generation_time_to_first_token_seconds", "");
  header(out, "tandem_generation_inter_token_seconds", "histogram",
         "Time between generated tokens of a request (a round's gap shared by its tokens).");
  inter_token_.render(out, "tandem_generation_inter_token_seconds", "");
  header(out, "tandem_generation_drafted_tokens_total", "counter", "Draft tokens proposed to the target.");
  out += fmt::format("tandem_generation_drafted_tokens_total {}\n", drafted_);
  header(out, "tandem_generation_accepted_tokens_total", "counter", "Draft tokens the target accepted.");
  out += fmt::format("tandem_generation_accepted_tokens_total {}\n", accepted_);
  header(out, "tandem_generation_request_rounds_total", "counter",
         "Rounds that committed tokens, summed over requests.");
  out += fmt::format("tandem_generation_request_rounds_total {}\n", rounds_seen_);
  header(out, "tandem_generation_acceptance_length", "histogram", "Tokens a round committed for a request.");
  acceptance_length_.render(out, "tandem_generation_acceptance_length", "");
  header(out, "tandem_generation_accepted_tokens_per_position_total", "counter",
         "Accepted draft tokens by block position (1: the first draft).");
  for (size_t i = 0; i < accepted_per_position_.size(); ++i) {
    out += fmt::format("tandem_generation_accepted_tokens_per_position_total{{position=\"{}\"}} {}\n", i + 1,
                       accepted_per_position_[i]);
  }
  header(out, "tandem_generation_finished_total", "counter", "Finished generations by endpoint and finish reason.");
  for (const auto& [key, n] : finishes_) {
    out += fmt::format("tandem_generation_finished_total{{endpoint=\"{}\",reason=\"{}\"}} {}\n", key.first,
                       key.second, n);
  }
  header(out, "tandem_generation_cancelled_total", "counter",
         "Generations cancelled: the client left, its deadline passed, or a stop string matched.");
  for (const auto& [reason, n] : cancelled_) {
    out += fmt::format("tandem_generation_cancelled_total{{reason=\"{}\"}} {}\n", reason, n);
  }
  header(out, "tandem_generation_pairing_degraded", "gauge", "1 for a target/drafter pairing serving without drafts.");
  for (const auto& [pairing, why] : degraded_) {
    out += fmt::format("tandem_generation_pairing_degraded{{pairing=\"{}\"}} 1\n", pairing);
  }
}

}  // namespace tandem::coordinator

// Job: one HTTP request's sequences on their way through the queue, the batcher and the workers, and
// its single outcome: all results, the first error, or cancelled (the client left or timed out). The
// outcome is decided once (an atomic state), so a late result, a dead rank and a timeout can race
// without a request answered twice or never.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "coordinator/api_types.h"

namespace tandem::coordinator {

using Clock = std::chrono::steady_clock;

struct SequenceResult {
  std::vector<float> logits;
  std::array<float, 2> act{};
};

class Job : public std::enable_shared_from_this<Job> {
 public:
  // Runs once, on whichever thread decides the outcome (never for a cancelled job).
  using Done = std::function<void(Job&)>;

  Job(std::vector<SequenceInput> sequences, Clock::time_point deadline, Done done);

  size_t size() const { return sequences_.size(); }
  const SequenceInput& sequence(size_t i) const { return sequences_[i]; }
  Clock::time_point created() const { return created_; }
  Clock::time_point deadline() const { return deadline_; }

  // One sequence's answer. Only the control-plane thread calls it, for distinct indices.
  void complete(size_t i, SequenceResult result);
  // The first of fail/cancel/last complete wins; the others do nothing.
  void fail(ApiError error);
  void cancel();
  bool finished() const { return state_.load() != kPending; }
  bool cancelled() const { return state_.load() == kCancelled; }

  // Valid in the Done callback and after: the results (all sequences) or the error.
  const std::vector<SequenceResult>& results() const { return results_; }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  enum State : int { kPending, kDone, kFailing, kFailed, kCancelled };
  bool settle(State to);

  std::vector<SequenceInput> sequences_;
  std::vector<SequenceResult> results_;
  Clock::time_point created_;
  Clock::time_point deadline_;
  Done done_;
  std::atomic<size_t> remaining_;
  std::atomic<int> state_{kPending};
  std::optional<ApiError> error_;
};

// One queued sequence: a job and the index of the sequence in it.
struct WorkItem {
  std::shared_ptr<Job> job;
  uint32_t index = 0;
  uint32_t tokens() const { return static_cast<uint32_t>(job->sequence(index).ids.size()); }
  uint32_t markers() const { return static_cast<uint32_t>(job->sequence(index).markers.size()); }
};

}  // namespace tandem::coordinator

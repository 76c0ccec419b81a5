// Job (job.h).
#include "coordinator/job.h"

namespace tandem::coordinator {

Job::Job(std::vector<SequenceInput> sequences, Clock::time_point deadline, Done done)
    : sequences_(std::move(sequences)),
      results_(sequences_.size()),
      created_(Clock::now()),
      deadline_(deadline),
      done_(std::move(done)),
      remaining_(sequences_.size()) {}

bool Job::settle(State to) {
  int expected = kPending;
  return state_.compare_exchange_strong(expected, to);
}

void Job::complete(size_t i, SequenceResult result) {
  if (finished()) return;
  results_[i] = std::move(result);
  // acq_rel: the thread that takes the count to zero sees every earlier result write.
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1 && settle(kDone) && done_) done_(*this);
}

void Job::fail(ApiError error) {
  // Winning kFailing makes this thread the only writer of error_; readers look after kFailed.
  if (!settle(kFailing)) return;
  error_ = std::move(error);
  state_.store(kFailed);
  if (done_) done_(*this);
}

void Job::cancel() { settle(kCancelled); }

}  // namespace tandem::coordinator

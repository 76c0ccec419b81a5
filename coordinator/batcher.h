// Batcher: the bounded admission queue and the "batcher" thread (architecture.md "Scoring flow"). It
// packs queued sequences into batches under a token budget (the smallest serving bucket that holds
// them), waits up to batcher.max_wait_us for a batch to fill, and sends each to the least loaded
// scorer rank with room (several batches in flight per rank), through the control plane's queue.
#pragma once

#include <memory>
#include <optional>

#include "config/config.h"
#include "coordinator/job.h"
#include "coordinator/metrics.h"
#include "coordinator/rank_table.h"
#include "worker/worker.h"

namespace tandem::coordinator {

// A frame for the control plane to send.
struct Dispatch {
  int rank = 0;
  std::vector<uint8_t> frame;
};

class Batcher {
 public:
  Batcher(const config::Deployment& deployment, const ir::BucketTable& buckets, RankTable& ranks,
          worker::BlockingQueue<Dispatch>& outbox, Metrics& metrics);
  ~Batcher();  // stops the thread; anything still queued fails with 503

  // Queues all of a job's sequences or none: 429 when the queue would overflow, 503 when no scorer
  // rank is alive.
  std::optional<ApiError> submit(const std::shared_ptr<Job>& job);
  size_t depth() const;
  // Fails everything queued with `error`, refuses new work with it, and stops the thread.
  void stop(const ApiError& error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::coordinator

// The packing step of the batcher (architecture.md "Scoring flow"): how many sequences from the front
// of the queue go into the next batch. First come first served: it never skips ahead to a smaller
// sequence, so none waits forever behind later ones.
#pragma once

#include <deque>

#include "coordinator/job.h"
#include "engine/ir/bucket.h"

namespace tandem::coordinator {

struct PackLimits {
  uint32_t max_tokens = 0;                   // batcher.max_batch_tokens
  const ir::BucketTable* buckets = nullptr;  // the serving buckets; the batch must fit one of them
};

struct Pack {
  size_t count = 0;  // items from the front
  uint32_t tokens = 0;
  uint32_t seqs = 0;
  uint32_t markers = 0;
  ir::Bucket bucket;  // the smallest that holds the batch
  bool full = false;  // waiting would not add more: the next item does not fit, or tokens are at the limit
};

class PackBatch {
 public:
  explicit PackBatch(PackLimits limits) : limits_(limits) {}
  // Admission makes every item fit a batch alone, so count >= 1 for a non-empty queue.
  Pack operator()(const std::deque<WorkItem>& queue) const;

 private:
  PackLimits limits_;
};

}  // namespace tandem::coordinator

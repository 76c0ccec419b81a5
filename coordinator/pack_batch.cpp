// PackBatch (pack_batch.h).
#include "coordinator/pack_batch.h"

namespace tandem::coordinator {

Pack PackBatch::operator()(const std::deque<WorkItem>& queue) const {
  Pack p;
  for (const WorkItem& item : queue) {
    const uint32_t t = p.tokens + item.tokens();
    const uint32_t m = p.markers + item.markers();
    // Over the budget only alone (admission forbids it; a stalled queue head would be worse).
    const bool budget = t <= limits_.max_tokens || p.count == 0;
    auto bucket = budget ? limits_.buckets->smallest("compat", t, p.seqs + 1, m)
                         : Result<ir::Bucket>(Error(ErrorKind::kCapacity, "over budget"));
    if (!bucket.ok()) {
      p.full = true;
      break;
    }
    p.bucket = bucket.value();
    p.tokens = t;
    p.markers = m;
    p.seqs += 1;
    p.count += 1;
  }
  if (p.tokens >= limits_.max_tokens) p.full = true;
  return p;
}

}  // namespace tandem::coordinator

// The rank-level generation metrics (serving.md "Metrics worth having") in Prometheus text format,
// rendered from the RoundScheduler's views: rounds, round time by phase, tokens, drafts, bytes moved
// between ranks, KV slots in use per target rank and context slots per drafter, the queue. For /metrics
// next to the scoring metrics; RoundScheduler::problem() is /health's line for a degraded pairing.
#pragma once

#include <string>

#include "coordinator/round_scheduler.h"

namespace tandem::coordinator {

std::string render_scheduler_metrics(const RoundScheduler& scheduler);

}  // namespace tandem::coordinator

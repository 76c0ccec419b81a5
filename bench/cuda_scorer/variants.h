// Every backend variant end to end (--variants): the TANDEM_CUDA_* switches set as options, each on its own
// backend, with W1, W3 (one batch, split) and 4,096-token p50s and its logits against the first variant's.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/cuda_scorer/options.h"
#include "bench/cuda_scorer/workloads.h"
#include "engine/models/decision/decision_model.h"

namespace tandem::bench {

nlohmann::json run_variants(const Options& o, const models::decision::DecisionModel& model, const Workloads& w);

}  // namespace tandem::bench

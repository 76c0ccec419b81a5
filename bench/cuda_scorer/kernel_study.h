// The attention kernels on the workloads' shapes, and every cuBLASLt candidate of the W1 plan's and the
// 4,096-token plan's GEMM shapes, timed one by one (--study; engine/cuda/study_impl.h).
#pragma once

#include <nlohmann/json.hpp>

#include "bench/cuda_scorer/options.h"
#include "bench/cuda_scorer/workloads.h"
#include "engine/ir/backend.h"
#include "engine/ir/graph.h"

namespace tandem::bench {

nlohmann::json run_study(const Options& o, ir::Backend& backend, const ir::Weights& weights, const ir::Graph& graph,
                         const Workloads& w, const ir::Executor& exec);

}  // namespace tandem::bench

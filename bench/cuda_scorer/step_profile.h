// Each step's device time in one plan (--profile): from a graph replay with event nodes between steps
// or, if that fails, from host launches one by one; by category, by GEMM shape, and the slowest steps.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/ir/backend.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"
#include "engine/ir/graph.h"

namespace tandem::bench {

nlohmann::json profile(ir::Backend& backend, const ir::Weights& w, const ir::Graph& g, const ir::Batch& batch,
                       const ir::Bucket& bucket, const char* name);

}  // namespace tandem::bench

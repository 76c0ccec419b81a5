// The ModernBERT-large compat shape (28 layers, d 1024, 16 heads, GeGLU 2624, vocab 50,368, 2 head layers)
// as a DecisionModel with random FP16 weights, built in memory; --tiny: 4 layers of d 128.
#pragma once

#include <memory>

#include "engine/core/result.h"
#include "engine/models/decision/decision_model.h"

namespace tandem::bench {

Result<std::unique_ptr<models::decision::DecisionModel>> make_model(bool tiny);

}  // namespace tandem::bench

// Checks a weight source against the weights a graph references, before any upload: every tensor is
// present with the shape the graph needs, and errors name the tensor, its shape and the expected one.
#pragma once

#include <string>
#include <string_view>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/ir/graph.h"

namespace tandem::models::qwen3 {

// Parts of a stacked WeightRef ([gate; up]) each hold an equal share of dim 0. `origin` names the
// checkpoint in errors ("tests/fixtures/qwen3/tiny").
Status check_weights(const WeightSource& source, const ir::Graph& graph, std::string_view origin);

}  // namespace tandem::models::qwen3

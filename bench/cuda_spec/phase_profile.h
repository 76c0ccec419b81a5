// --profile: one round's phases (settle, draft, verify) run with the CUDA backend's step profiling on
// (cuda_backend.h set_step_profiling), so the benchmark says where a phase's device time goes: its plan
// steps summed by category (the op's name) and the slowest steps.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "engine/ir/backend.h"

namespace tandem::bench {

// Runs `phase` with step profiling on and returns {"steps_ms", "step_launches", "categories": {name:
// {"steps", "ms"}} (largest first), "slowest": [{"label", "ms", "launches"}] (8)}; a summary goes to stderr under `what`.
Result<nlohmann::ordered_json> profile_phase(ir::Backend& backend, const std::string& what,
                                             const std::function<Status()>& phase);
// The same summary of the steps gathered since set_step_profiling(backend, true), for a caller that turns the
// profiling on and off itself (one plain decode step inside a decode loop).
Result<nlohmann::ordered_json> summarize_profile(const ir::Backend& backend, const std::string& what);

}  // namespace tandem::bench

// Test harness for the speculative loop: a target and an optional drafter on one CPU backend, and
// runners that generate for many requests batched (one generate() call) or alone (one call each).
#pragma once

#include <memory>
#include <vector>

#include "engine/ir/backend.h"
#include "engine/spec/spec.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::spec::testing {

struct Harness {
  std::unique_ptr<ir::Backend> backend;
  std::unique_ptr<models::qwen3::Target> target;
  std::unique_ptr<models::dflash::Drafter> drafter;  // null: plain decoding only
};

// Target taps are the drafter's target_layer_ids (none without a drafter).
Harness make_harness(const tandem::testing::TinyTarget& target, const tandem::testing::TinyDrafter* drafter,
                     uint32_t slots, uint32_t capacity, bool host_logits = false);

// Slots are the request indices (batched) or 0 (alone). Fails the test on any error.
std::vector<Request> run_batched(Harness& h, const std::vector<RequestParams>& params, bool speculative,
                                 const GenerateOptions& options);
std::vector<Request> run_alone(Harness& h, const std::vector<RequestParams>& params, bool speculative,
                               const GenerateOptions& options);

std::vector<uint32_t> generated(const Request& r);

}  // namespace tandem::spec::testing

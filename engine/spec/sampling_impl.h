// Sampling a token from a logits row (dflash.md §1.8): engine/spec uses the IR's definitions
// (engine/ir/sampling.h), so the host accept rules and a backend's Sample op agree.
#pragma once

#include "engine/ir/sampling.h"
#include "engine/spec/spec.h"

namespace tandem::spec {

using ir::argmax;
using ir::sample;
using ir::Stream;
using ir::tempered;
using ir::uniform;
using ir::uniform_open;

// The target's token for `position` (ir::sample_token): plain decoding and every verify rule use it.
inline uint32_t target_token(std::span<const float> row, const SamplingParams& sampling, uint32_t position) {
  return ir::sample_token(row, sampling, position);
}

}  // namespace tandem::spec

// Sampling a token from a logits row (dflash.md §1.8): greedy argmax, and the tempered, top-p filtered
// distribution that every verify rule treats as the target's p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec/spec.h"

namespace tandem::spec {

// The first index of the largest value (ties to the lower id).
uint32_t argmax(std::span<const float> row);

// softmax(row / temperature) (temperature > 0), restricted to the smallest set of most probable ids whose
// mass reaches top_p (ties in probability to the lower id), renormalized; ids ascending.
Proposal tempered(std::span<const float> row, float temperature, float top_p);

// Inverse CDF in ascending id order with a draw u in [0, 1).
uint32_t sample(const Proposal& dist, double u);

// The target's token for `position` from its logits row: argmax at temperature 0, else a sample of
// tempered() with the kTarget draw of (seed, position). Plain decoding and every verify rule use this.
uint32_t target_token(std::span<const float> row, const SamplingParams& sampling, uint32_t position);

}  // namespace tandem::spec

// Token choice from a logits row (dflash.md §1.8): greedy argmax, the tempered top-p distribution, and
// counter-based random draws. These define the IR's Argmax, TopK and Sample ops, which every backend
// must compute exactly so, and engine/spec's accept rules, which treat sample_token() as the target's p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem::ir {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, ties to the lower id)
  float top_p = 1.0f;        // nucleus of the tempered distribution
  uint64_t seed = 0;         // with the position, decides every random draw
};

// What a draw is for; one stream per purpose keeps draws for one position independent.
enum class Stream : uint32_t {
  kTarget = 1,    // the target's own sample of a position (plain decoding, match, bonus tokens)
  kAccept = 2,    // rejection sampling's accept test
  kResidual = 3,  // rejection sampling's resample from norm(max(p − q, 0))
  kDraft = 4,     // a v1 drafter's sampled proposal
  kGumbel = 5,    // the v2 selector walk's Gumbel noise (index = candidate)
};

// A draw is a pure function of (seed, position, stream, index), never of a generator's history, so
// results do not depend on batch composition, round boundaries, block size or the backend.
// SplitMix64's finalizer: a bijection on 64 bits with full avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint64_t draw_bits(uint64_t seed, uint64_t position, Stream stream, uint32_t index) {
  uint64_t h = mix64(seed);
  h = mix64(h ^ position);
  return mix64(h ^ ((uint64_t{static_cast<uint32_t>(stream)} << 32) | index));
}

// Uniform in [0, 1) with 53 random bits.
constexpr double uniform(uint64_t seed, uint64_t position, Stream stream, uint32_t index = 0) {
  return static_cast<double>(draw_bits(seed, position, stream, index) >> 11) * 0x1.0p-53;
}

// Uniform in (0, 1): never 0, for logarithms.
constexpr double uniform_open(uint64_t seed, uint64_t position, Stream stream, uint32_t index = 0) {
  return (static_cast<double>(draw_bits(seed, position, stream, index) >> 11) + 0.5) * 0x1.0p-53;
}

// A distribution over token ids: ids with probabilities summing to 1.
struct Distribution {
  std::vector<uint32_t> ids;
  std::vector<double> probs;
  double prob(uint32_t id) const;
};

// The first index of the largest value (ties to the lower id).
uint32_t argmax(std::span<const float> row);

// The k largest values in descending order, ties to the lower id (k <= row.size()).
void top_k(std::span<const float> row, uint32_t k, std::span<uint32_t> ids, std::span<float> values);

// softmax(row / temperature) (temperature > 0), restricted to the smallest set of most probable ids whose
// mass reaches top_p (ties in probability to the lower id), renormalized; ids ascending.
Distribution tempered(std::span<const float> row, float temperature, float top_p);

// Inverse CDF in ascending id order with a draw u in [0, 1).
uint32_t sample(const Distribution& dist, double u);

// The token for `position` from a logits row: argmax at temperature 0, else a sample of tempered() with
// the `stream` draw of (seed, position). A target row at position p fills position p + 1; a drafter's
// block row (kDraft) fills its own.
uint32_t sample_token(std::span<const float> row, const SamplingParams& sampling, uint32_t position,
                      Stream stream = Stream::kTarget);

}  // namespace tandem::ir

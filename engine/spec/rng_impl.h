// Counter-based random draws (dflash.md §1.8): a draw is a pure function of (seed, position, stream,
// index), never of a generator's history, so results do not depend on batch composition, round
// boundaries, block size or whether a drafter runs at all.
#pragma once

#include <cstdint>

namespace tandem::spec {

// What a draw is for; one stream per purpose keeps draws for one position independent.
enum class Stream : uint32_t {
  kTarget = 1,    // the target's own sample of a position (plain decoding, match, bonus tokens)
  kAccept = 2,    // rejection sampling's accept test
  kResidual = 3,  // rejection sampling's resample from norm(max(p − q, 0))
  kDraft = 4,     // a v1 drafter's sampled proposal
  kGumbel = 5,    // the v2 selector walk's Gumbel noise (index = candidate)
};

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

}  // namespace tandem::spec

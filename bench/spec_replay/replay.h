// The benchmarks' declared replay drafter (issue 10): the real drafter's settle and block forward run as
// always (a round costs what it costs), then the ids it proposed are replaced by the target's own greedy
// continuation cut to a chosen acceptance length, so tokens/s at acceptance 1..B can be measured with
// random weights (which accept nothing). Bench-only: no engine code or `tandem` command can reach it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/spec/spec.h"

namespace tandem::bench {

// The acceptance length (accepted drafts + 1, what verify() records) of every round: `mean` in [1, block].
// A fractional mean alternates the lengths around it so that the first n rounds sum to floor(n · mean)
// (6.5: 6, 7, 6, 7, ...; 3.25: 3, 3, 3, 4, ...): over an even number of rounds 6.5 is exact.
class ReplaySchedule {
 public:
  static Result<ReplaySchedule> make(double mean, uint32_t block);
  uint32_t length(uint32_t round) const;
  double mean() const { return mean_; }
  uint32_t block() const { return block_; }

 private:
  ReplaySchedule(double mean, uint32_t block) : mean_(mean), block_(block) {}
  double mean_;
  uint32_t block_;
};

// Plain greedy decoding of `tokens` tokens after each prompt, on slots 0..n−1, all in one batch (prefill,
// then one-row verify steps, as spec::generate without a drafter; stop ids ignored): the continuations a
// replay draws from. Temperature must be 0. A target with taps leaves them on the device (CUDA) or drops
// them after each step (host), since no drafter reads them. `step_done`, when set, runs after the prefill
// and after every decode step (the benchmark marks the stream there to time plain decoding).
Result<std::vector<std::vector<uint32_t>>> greedy_continuations(models::qwen3::Target& target,
                                                                std::span<const spec::RequestParams> params,
                                                                uint32_t tokens,
                                                                const std::function<Status()>& step_done = {});

// Replaces each request's drafts (from spec::draft, any drafter) with its continuation: for a round of
// schedule length L, drafts 1..L−1 are the continuation's tokens at their positions and draft L (when
// L < B) is one the target's greedy pick cannot be, so a greedy verify accepts exactly L − 1. Errors when
// a continuation is too short for the round, naming the slot, position and length. Returns how many
// requests had already left their continuation (a target whose verify picks differ from its plain decode).
Result<uint32_t> replay_drafts(const ReplaySchedule& schedule, std::span<spec::Request* const> requests,
                               std::span<const std::vector<uint32_t>> continuations, uint32_t vocab,
                               std::vector<spec::Draft>& drafts);

}  // namespace tandem::bench

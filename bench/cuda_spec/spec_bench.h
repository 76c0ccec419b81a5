// The speculative decode benchmark on CUDA (issue 10): a Qwen3-8B-shaped random BF16 target with a DFlash
// v1 (b16) and a DFlash 2 (b8) drafter of the z-lab 8B shape, or tiny ones for the emulator. Times of
// settle, draft, verify and the whole round per batch and acceptance length (the replay drafter of
// bench/spec_replay: the real drafter runs, its ids are replaced), tokens/s against plain decoding in the
// same run, and the drafter's share of a round. Device time between CUDA events on the backend's stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/models/dflash/dflash_quant.h"

namespace tandem::bench {

struct SpecBenchArgs {
  bool tiny = false;                       // 2-layer d-128 target, 1-layer drafters: the emulator's run
  ir::Precision precision = ir::Precision::kBF16;
  std::vector<uint32_t> batches;           // empty: 1, 8, 32 (tiny: 1, 2)
  std::vector<double> acceptances;         // empty: 1, 3, 6.5 and B; 0 stands for each drafter's B
  uint32_t warmup = 0, rounds = 0;         // 0: 2 and 8 (tiny: 1 and 2); rounds even keeps 6.5 exact
  uint32_t context = 0;                    // prompt tokens per sequence; 0: 512 (tiny: 16)
  // Drafter formats measured besides BF16 (issue 14); a format the backend refuses is reported, not fatal.
  std::vector<models::dflash::Quantization> quantizations;
  // Every drafter drafts over the head's first W rows only (DrafterOptions::draft_vocab); nullopt: the whole
  // vocabulary. The head is the target's, BF16 in every format, so this is where a drafter's own bytes show.
  std::optional<uint32_t> draft_vocab;
  // Block layers run q, k and v as one GEMM (DrafterOptions::fuse_qkv); --separate-qkv: three, to measure it.
  bool fuse_qkv = true;
  // One more round after the timed ones with the backend's step profiling on: each run's "profile" says where
  // settle, draft and verify spend their device time (phase_profile.h).
  bool profile = false;
  // When set, the JSON so far is written here after every batch, so a run cut short keeps what it measured.
  std::string json_path;
};

// Runs everything and returns the JSON (progress and a summary line per run on stderr).
Result<nlohmann::ordered_json> run_spec_bench(const SpecBenchArgs& args);

}  // namespace tandem::bench

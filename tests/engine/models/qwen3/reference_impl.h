// An independent reference for tests: Qwen3 and DFlash v1/v2 forwards written naively in double precision
// from the HF / dflash.md formulas (no IR, no backend), over any weight source.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/io/hf_config.h"

namespace tandem::testing {

using Rows = std::vector<std::vector<double>>;

struct TargetRef {
  Rows logits;                     // per position
  std::map<uint32_t, Rows> hidden;  // residual stream after each layer, per position
};
TargetRef reference_target(const WeightSource& w, const io::Qwen3Config& cfg, const std::vector<uint32_t>& ids);

struct BlockRef {
  Rows logits;    // block rows 1..B−1 over the full vocabulary
  Rows selector;  // v2: S·h of the same rows
};
// taps: the joined tap rows of context positions 0..a−1; the anchor sits at position a.
BlockRef reference_block(const WeightSource& drafter, const io::DFlashConfig& cfg, const WeightSource& target,
                         const io::Qwen3Config& target_cfg, const Rows& taps, uint32_t anchor, uint32_t block);

}  // namespace tandem::testing

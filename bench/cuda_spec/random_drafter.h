// Random BF16 DFlash drafters for the speculative benchmark: a z-lab Qwen3-8B-DFlash-b16-shaped v1 (5
// layers, taps [1,9,17,25,33], block 16) and a DFlash 2 of the same size (block 8, top-16, rank 256), or
// tiny ones for the emulator; the config goes through the checkpoint parser, as a real config.json does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/io/hf_config.h"
#include "engine/io/safetensors.h"

namespace tandem::bench {

struct DrafterShape {
  std::string name;  // "v1", "v2": the benchmark's key
  uint32_t version = 1;
  uint32_t layers = 5, heads = 32, kv_heads = 8, head_dim = 128, ffn = 12288;
  std::vector<uint32_t> taps = {1, 9, 17, 25, 33};
  uint32_t block = 16;
  uint32_t mask = 151669;
  // DFlash 2 (dflash.md §3.1)
  uint32_t conv_taps = 2, conv_group = 16, rank = 256, top_k = 16;
  float softcap = 20.0f, out_mult = 0.19611613f;
  static DrafterShape v1_8b();
  static DrafterShape v2_8b();
  static DrafterShape tiny(uint32_t version);  // 1 layer of d 128, taps [0, 1], block 8
};

struct RandomDrafter {
  io::DFlashConfig cfg;
  std::shared_ptr<const io::HostTensors> weights;
};

// For a target of this config (hidden size, vocabulary, depth, RoPE); the weights' scale keeps activations
// ordinary (matrices of variance 1/fan_in, norms near 1, the conv near identity).
Result<RandomDrafter> random_drafter(const DrafterShape& s, const io::Qwen3Config& target, uint64_t seed);

}  // namespace tandem::bench

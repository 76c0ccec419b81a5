// Random BF16 weights for a Qwen3 target of any shape (the Qwen3-8B shape by default), generated in
// parallel into host tensors: a timing does not look at the values, it only needs ordinary activations.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/io/hf_config.h"
#include "engine/io/safetensors.h"

namespace tandem::bench {

struct DecoderShape {
  uint32_t layers = 36, hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, ffn = 12288, vocab = 151936;
  float rope_theta = 1e6f;
  uint32_t max_positions = 40960;
  static DecoderShape tiny();  // 2 layers, d 128: the emulator's smoke run
};

io::Qwen3Config qwen3_config(const DecoderShape& s);
// One BF16 tensor of uniform values in center ± half, generated in parallel (the drafters' too).
io::HostTensor random_bf16(const std::string& name, std::vector<uint64_t> shape, float center, float half,
                           uint64_t seed);
uint64_t random_mix(uint64_t x);  // SplitMix64's finalizer: seeds for successive tensors
std::unique_ptr<io::HostTensors> random_target(const DecoderShape& s, uint64_t seed);

}  // namespace tandem::bench

// Test helpers: random tiny Qwen3 targets and DFlash v1/v2 drafters in memory (the public tensor layouts),
// and writers that put them on disk as HF checkpoint directories (config.json + safetensors).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/hf_config.h"
#include "engine/io/safetensors.h"

namespace tandem::testing {

// Deterministic values from a seed (SplitMix64), the same on every platform.
class Rand {
 public:
  explicit Rand(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                   // [0, 1)
  float symmetric(float scale);       // [-scale, scale)
  uint32_t below(uint32_t n);         // [0, n)
  std::vector<float> fill(size_t n, float scale);

 private:
  uint64_t state_;
};

struct TargetShape {
  uint32_t vocab = 48, hidden = 32, layers = 4, heads = 4, kv_heads = 2, head_dim = 8, ffn = 64;
  bool tied = false;
  bool bias = false;
  std::optional<uint32_t> window;  // makes the odd layers sliding
  float rope_theta = 10000.0f;
};

struct TinyTarget {
  io::Qwen3Config cfg;
  std::shared_ptr<io::HostTensors> weights;
  std::vector<io::HostTensor> tensors;  // the same tensors, for writing to disk
  nlohmann::json config;                // what cfg was parsed from
};
TinyTarget random_target(const TargetShape& shape, uint64_t seed, DType dtype = DType::kF32);

struct DrafterShape {
  uint32_t version = 1;
  uint32_t layers = 2, heads = 4, kv_heads = 2, head_dim = 8, ffn = 48;
  std::vector<uint32_t> taps = {1, 2};
  uint32_t block = 8;
  uint32_t mask = 0;  // mask_token_id
  std::optional<uint32_t> window;   // makes the odd layers sliding (causal unless is_causal says otherwise)
  std::optional<bool> is_causal;    // the top-level key, absent by default
  // v2
  uint32_t conv_taps = 2, group = 8, rank = 6, top_k = 4;
  float softcap = 5.0f, out_mult = 0.8f;
};

struct TinyDrafter {
  io::DFlashConfig cfg;
  std::shared_ptr<io::HostTensors> weights;
  std::vector<io::HostTensor> tensors;
  nlohmann::json config;
};
TinyDrafter random_drafter(const io::Qwen3Config& target, const DrafterShape& shape, uint64_t seed);

// Adds (or replaces) a tensor in both views of a model.
void put(std::vector<io::HostTensor>& tensors, io::HostTensors& source, io::HostTensor t);

// HF checkpoint directories; shards > 1 splits the tensors over files with model.safetensors.index.json.
void write_target_dir(const std::string& dir, const TinyTarget& t, int shards = 1);
void write_drafter_dir(const std::string& dir, const TinyDrafter& d);
// A fresh empty directory under the system temp dir.
std::string temp_dir(const std::string& name);

}  // namespace tandem::testing

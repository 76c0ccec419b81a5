// Helpers for the decision model tests: a tiny random checkpoint in the compat layout (tensor names
// written out from scorer.md §1, independently of the graph builder), in memory or as a directory.
#pragma once

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/io/hf_config.h"
#include "engine/io/laya_config.h"
#include "engine/io/safetensors.h"

namespace tandem::models::decision::testing {

struct TinyShape {
  uint32_t d = 128, heads = 2, inter = 96, layers = 4, vocab = 97, local_attention = 8, head_layers = 2;
};

inline io::ModernBertConfig tiny_encoder(const TinyShape& s = {}) {
  io::ModernBertConfig c;
  c.vocab_size = s.vocab;
  c.hidden_size = s.d;
  c.intermediate_size = s.inter;
  c.num_hidden_layers = s.layers;
  c.num_attention_heads = s.heads;
  c.head_dim = s.d / s.heads;
  c.local_attention = s.local_attention;
  c.global_layer.resize(s.layers);
  for (uint32_t i = 0; i < s.layers; ++i) c.global_layer[i] = i % 3 == 0;
  c.cls_token_id = 1;
  c.sep_token_id = 2;
  c.pad_token_id = 3;
  c.mask_token_id = 4;
  return c;
}

inline io::LayaAgentConfig tiny_laya(const TinyShape& s = {}) {
  io::LayaAgentConfig c;
  c.head_layers = s.head_layers;
  c.temperature = {1.6369f, 1.2514f, 1.9834f};
  c.has_temperature = true;
  c.temperature_by_options[0][2] = 1.5f;
  return c;
}

// Every tensor of the compat checkpoint, with its shape.
inline std::vector<std::pair<std::string, std::vector<uint64_t>>> compat_tensor_list(const TinyShape& s) {
  const uint64_t d = s.d, i2 = 2ull * s.inter;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> t = {
      {"encoder.embeddings.tok_embeddings.weight", {s.vocab, d}},
      {"encoder.embeddings.norm.weight", {d}},
      {"encoder.final_norm.weight", {d}},
      {"type_emb.weight", {3, d}},
      {"scorer.0.weight", {d}},
      {"scorer.0.bias", {d}},
      {"scorer.1.weight", {d, d}},
      {"scorer.1.bias", {d}},
      {"scorer.3.weight", {1, d}},
      {"scorer.3.bias", {1}},
      {"act_head.0.weight", {256, d + 4}},
      {"act_head.0.bias", {256}},
      {"act_head.2.weight", {2, 256}},
      {"act_head.2.bias", {2}},
      {"temperature", {3}},
  };
  for (uint32_t n = 0; n < s.layers; ++n) {
    const std::string p = "encoder.layers." + std::to_string(n) + ".";
    if (n > 0) t.push_back({p + "attn_norm.weight", {d}});
    t.push_back({p + "attn.Wqkv.weight", {3 * d, d}});
    t.push_back({p + "attn.Wo.weight", {d, d}});
    t.push_back({p + "mlp_norm.weight", {d}});
    t.push_back({p + "mlp.Wi.weight", {i2, d}});
    t.push_back({p + "mlp.Wo.weight", {d, s.inter}});
  }
  for (uint32_t l = 0; l < s.head_layers; ++l) {
    const std::string p = "head.layers." + std::to_string(l) + ".";
    t.push_back({p + "self_attn.in_proj_weight", {3 * d, d}});
    t.push_back({p + "self_attn.in_proj_bias", {3 * d}});
    t.push_back({p + "self_attn.out_proj.weight", {d, d}});
    t.push_back({p + "self_attn.out_proj.bias", {d}});
    t.push_back({p + "linear1.weight", {4 * d, d}});
    t.push_back({p + "linear1.bias", {4 * d}});
    t.push_back({p + "linear2.weight", {d, 4 * d}});
    t.push_back({p + "linear2.bias", {d}});
    for (const char* norm : {"norm1", "norm2"}) {
      t.push_back({p + norm + ".weight", {d}});
      t.push_back({p + norm + ".bias", {d}});
    }
  }
  return t;
}

// Values of a scale that keeps every layer relevant: norms near 1, small biases, matrices of unit gain.
inline std::vector<float> tiny_values(const std::string& name, const std::vector<uint64_t>& shape, std::mt19937& rng) {
  uint64_t n = 1;
  for (uint64_t x : shape) n *= x;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  const bool is_norm = name.find("norm") != std::string::npos || name == "scorer.0.weight";
  for (float& x : v) {
    const float z = normal(rng);
    if (name == "temperature") {
      x = 1.0f + 0.5f * std::abs(z);
    } else if (is_norm && name.ends_with("weight")) {
      x = 1.0f + 0.1f * z;
    } else if (name.ends_with("bias")) {
      x = 0.05f * z;
    } else if (shape.size() == 2 && name.find("emb") == std::string::npos) {
      x = z / std::sqrt(static_cast<float>(shape[1]));
    } else {
      x = z;
    }
  }
  return v;
}

inline std::vector<io::HostTensor> tiny_tensors(const TinyShape& s = {}, uint32_t seed = 1234,
                                                DType dtype = DType::kF32) {
  std::mt19937 rng(seed);
  std::vector<io::HostTensor> out;
  for (const auto& [name, shape] : compat_tensor_list(s)) {
    out.push_back(io::HostTensor::from_f32(name, shape, tiny_values(name, shape, rng), dtype));
  }
  return out;
}

inline std::unique_ptr<io::HostTensors> to_source(const std::vector<io::HostTensor>& tensors) {
  auto src = std::make_unique<io::HostTensors>();
  for (const io::HostTensor& t : tensors) src->add(t);
  return src;
}

// Writes `text` to dir/rel, creating folders.
inline void write_text(const std::filesystem::path& dir, const std::string& rel, const std::string& text) {
  std::filesystem::create_directories((dir / rel).parent_path());
  std::ofstream(dir / rel) << text;
}

// The tiny model as a directory in the public layout: model.safetensors, encoder/config.json (with or
// without mask_token_id) and rl_agent_config.json.
inline bool write_tiny_model(const std::filesystem::path& dir, DType dtype = DType::kF32, bool with_mask = true) {
  std::filesystem::create_directories(dir);
  if (!io::write_safetensors((dir / "model.safetensors").string(), tiny_tensors({}, 1234, dtype)).ok()) return false;
  write_text(dir, "encoder/config.json", std::string(R"({"vocab_size": 97, "hidden_size": 128,
    "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 2, "local_attention": 8,
    "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
    "pad_token_id": 3, "cls_token_id": 1, "sep_token_id": 2)") + (with_mask ? R"(, "mask_token_id": 4})" : "}"));
  write_text(dir, "rl_agent_config.json", R"({"head_layers": 2, "temperature": [1.6369, 1.2514, 1.9834],
    "temperature_by_options": {"choice": {"2": 1.5}}, "note": "test"})");
  return true;
}

// A fresh, empty folder under the system temp folder, removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("tandem_" + tag + "_" + std::to_string(std::random_device{}()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tandem::models::decision::testing

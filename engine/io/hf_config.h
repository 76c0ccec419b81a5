// Hugging Face config.json readers for the models tandem runs: ModernBERT (both key layouts: the
// original global_rope_theta/local_rope_theta/global_attn_every_n_layers and transformers 5's
// layer_types/rope_parameters), Qwen3, and DFlash drafters (v1 and v2). Every error names the file and
// the JSON key at fault with the value found and what is allowed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/core/result.h"
#include "engine/io/quant_config.h"

namespace tandem::io {

Result<nlohmann::json> read_json_file(const std::string& path);

struct ModernBertConfig {
  uint32_t vocab_size = 0;
  uint32_t hidden_size = 0;
  uint32_t intermediate_size = 0;  // I of GeGLU (Wi is [2I, d])
  uint32_t num_hidden_layers = 0;
  uint32_t num_attention_heads = 0;
  uint32_t head_dim = 0;           // hidden_size / heads
  float norm_eps = 1e-5f;
  bool norm_bias = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  uint32_t local_attention = 128;  // HF's full window; keys within local_attention / 2 are visible
  std::vector<bool> global_layer;  // per layer: true = full attention, false = sliding window
  float global_rope_theta = 160000.0f;
  float local_rope_theta = 10000.0f;
  std::string hidden_activation = "gelu";
  uint32_t max_position_embeddings = 8192;  // HF ModernBertConfig's default when the file has none
  uint32_t pad_token_id = 0, cls_token_id = 0, sep_token_id = 0;
  std::optional<uint32_t> mask_token_id;  // not in every config
};
Result<ModernBertConfig> parse_modernbert_config(const nlohmann::json& j, const std::string& origin);
Result<ModernBertConfig> load_modernbert_config(const std::string& path);

struct Qwen3Config {
  uint32_t vocab_size = 0;
  uint32_t hidden_size = 0;
  uint32_t intermediate_size = 0;
  uint32_t num_hidden_layers = 0;
  uint32_t num_attention_heads = 0;
  uint32_t num_key_value_heads = 0;
  uint32_t head_dim = 0;  // explicit in Qwen3 configs; hidden / heads when absent
  float rms_norm_eps = 1e-6f;
  float rope_theta = 1e6f;  // rope_theta, or rope_parameters.rope_theta (transformers 5)
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  uint32_t max_position_embeddings = 0;
  std::optional<uint32_t> sliding_window;  // set only when use_sliding_window is true (as transformers)
  // Per layer: true = sliding window, from layer_types or (without it) use_sliding_window +
  // max_window_layers as Qwen3Config derives it. Never true unless sliding_window is set.
  std::vector<bool> sliding_layer;
  std::vector<uint32_t> eos_token_ids;     // eos_token_id, a number or a list
  std::optional<uint32_t> bos_token_id;
  std::string origin;                      // the file (or label) it was parsed from, for messages
};
Result<Qwen3Config> parse_qwen3_config(const nlohmann::json& j, const std::string& origin);
Result<Qwen3Config> load_qwen3_config(const std::string& path);

// A DFlash drafter: the Qwen3 layer shapes plus dflash_config (dflash.md §1, §3.1).
struct DFlashConfig {
  Qwen3Config layers;                  // the drafter's own layer shapes (hidden_size = H)
  uint32_t block_size = 16;            // top level or dflash_config
  uint32_t num_target_layers = 0;      // depth of the target the drafter was made for (for the tap rule);
                                       // 0 = not in the file (only allowed with explicit target_layer_ids)
  std::vector<uint32_t> target_layer_ids;  // dflash_config.target_layer_ids, or the rule of §1.2
  uint32_t mask_token_id = 0;
  std::optional<uint32_t> target_hidden_size;  // fc input is taps · this; defaults to hidden_size
  // Block rows attend causally among themselves, per layer (z-lab dflash/model.py Qwen3DFlashAttention):
  // the top-level is_causal (or vLLM's dflash_config.causal) sets every layer; without it a
  // sliding_attention layer is causal and a full_attention layer is not.
  std::optional<bool> causal;          // the explicit key, when the file has one
  std::vector<bool> causal_layer;      // resolved, one entry per layer
  // DFlash 2 (version 2 when conv_kernel_size is present):
  uint32_t version = 1;
  uint32_t conv_kernel_size = 0;       // taps of the dynamic convolution
  uint32_t conv_group_size = 0;
  uint32_t selector_rank = 0;
  uint32_t selector_top_k = 0;
  float final_logit_softcapping = 0.0f;  // 0 = none
  float output_multiplier = 1.0f;
  float input_embedding_scale = 1.0f;
  std::optional<QuantConfig> quantization;  // quantization_config: the checkpoint's modules are quantized
};
// The tap rule of dflash.md §1.2: L == 1 -> [N / 2]; else round(1 + i·(N − 4)/(L − 1)), with Python's
// round (halves to even).
std::vector<uint32_t> default_target_layer_ids(uint32_t target_layers, uint32_t draft_layers);
Result<DFlashConfig> parse_dflash_config(const nlohmann::json& j, const std::string& origin);
Result<DFlashConfig> load_dflash_config(const std::string& path);

}  // namespace tandem::io

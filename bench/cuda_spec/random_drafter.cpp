// Random drafters (random_drafter.h): the config as JSON through io::parse_dflash_config, the tensors in
// the public z-lab layouts (DFlashDraftModel, DFlash2DraftModel with the candidate_selector prefix).
#include "bench/cuda_spec/random_drafter.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "bench/cuda_decoder/random_target.h"

namespace tandem::bench {

DrafterShape DrafterShape::v1_8b() {
  DrafterShape s;
  s.name = "v1";
  return s;
}

DrafterShape DrafterShape::v2_8b() {
  DrafterShape s;
  s.name = "v2";
  s.version = 2;
  s.block = 8;
  return s;
}

DrafterShape DrafterShape::tiny(uint32_t version) {
  DrafterShape s;
  s.name = version == 2 ? "v2" : "v1";
  s.version = version;
  s.layers = 1;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.ffn = 256;
  s.taps = {0, 1};
  s.block = 8;
  s.mask = 511;
  s.rank = 16;
  s.top_k = 4;
  return s;
}

Result<RandomDrafter> random_drafter(const DrafterShape& s, const io::Qwen3Config& target, uint64_t seed) {
  const uint32_t h = target.hidden_size;
  nlohmann::json j = {{"architectures", {s.version == 2 ? "DFlash2DraftModel" : "DFlashDraftModel"}},
                      {"vocab_size", target.vocab_size}, {"hidden_size", h}, {"intermediate_size", s.ffn},
                      {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads}, {"head_dim", s.head_dim}, {"rms_norm_eps", 1e-6},
                      {"rope_theta", target.rope_theta}, {"max_position_embeddings", target.max_position_embeddings},
                      {"num_target_layers", target.num_hidden_layers}, {"block_size", s.block},
                      {"tie_word_embeddings", false}};
  nlohmann::json d = {{"target_layer_ids", s.taps}, {"mask_token_id", s.mask}};
  if (s.version == 2) {
    d["conv_kernel_size"] = s.conv_taps;
    d["conv_group_size"] = s.conv_group;
    d["selector_rank"] = s.rank;
    d["selector_top_k"] = s.top_k;
    d["final_logit_softcapping"] = s.softcap;
    d["output_multiplier"] = s.out_mult;
  }
  j["dflash_config"] = d;
  TANDEM_ASSIGN(io::DFlashConfig cfg, io::parse_dflash_config(j, "random drafter " + s.name));
  auto w = std::make_shared<io::HostTensors>();
  uint64_t k = seed;
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols) {
    w->add(random_bf16(name, {rows, cols}, 0.0f, std::sqrt(3.0f / static_cast<float>(cols)), random_mix(++k)));
  };
  auto norm = [&](const std::string& name, uint64_t n) { w->add(random_bf16(name, {n}, 1.0f, 0.1f, random_mix(++k))); };
  const uint64_t tw = uint64_t{h} * s.taps.size(), q = uint64_t{s.heads} * s.head_dim, kv = uint64_t{s.kv_heads} * s.head_dim;
  matrix("fc.weight", h, tw);
  norm("hidden_norm.weight", h);
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    norm(p + "input_layernorm.weight", h);
    norm(p + "post_attention_layernorm.weight", h);
    matrix(p + "self_attn.q_proj.weight", q, h);
    matrix(p + "self_attn.k_proj.weight", kv, h);
    matrix(p + "self_attn.v_proj.weight", kv, h);
    matrix(p + "self_attn.o_proj.weight", h, q);
    norm(p + "self_attn.q_norm.weight", s.head_dim);
    norm(p + "self_attn.k_norm.weight", s.head_dim);
    matrix(p + "mlp.gate_proj.weight", s.ffn, h);
    matrix(p + "mlp.up_proj.weight", s.ffn, h);
    matrix(p + "mlp.down_proj.weight", h, s.ffn);
    if (s.version != 2) continue;
    const uint64_t groups = h / s.conv_group;
    for (const char* conv : {"attention_conv.", "mlp_conv."}) {
      // Taps near one half each: the conv mixes a row with its predecessor without growing it.
      w->add(random_bf16(p + conv + "base_kernel", {2, s.conv_taps, h}, 0.5f, 0.1f, random_mix(++k)));
      w->add(random_bf16(p + conv + "kernel_projection.weight", {2 * s.conv_taps * groups, h}, 0.0f,
                         0.1f / std::sqrt(static_cast<float>(h)), random_mix(++k)));
    }
  }
  norm("norm.weight", h);
  if (s.version == 2) {
    matrix("candidate_selector.hidden_projection.weight", s.rank, h);
    w->add(random_bf16("candidate_selector.predecessor_codebook", {target.vocab_size, s.rank}, 0.0f, 1.0f,
                       random_mix(++k)));
    w->add(random_bf16("candidate_selector.successor_codebook", {target.vocab_size, s.rank}, 0.0f, 1.0f,
                       random_mix(++k)));
  }
  return RandomDrafter{std::move(cfg), std::move(w)};
}

}  // namespace tandem::bench

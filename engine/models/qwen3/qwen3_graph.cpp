// The Qwen3 target graph: embedding, pre-norm layers with a KV cache each, tap capture, final norm and
// LM head over marker rows (HF Qwen3ForCausalLM semantics; dflash.md §1.2 for taps).
#include "engine/models/qwen3/qwen3_model.h"
#include "engine/models/qwen3/qwen3_layer.h"

namespace tandem::models::qwen3 {

Status check_config(const io::Qwen3Config& cfg, std::string_view origin) {
  if (cfg.vocab_size == 0 || cfg.hidden_size == 0 || cfg.intermediate_size == 0 || cfg.num_hidden_layers == 0 ||
      cfg.num_attention_heads == 0 || cfg.num_key_value_heads == 0 || cfg.head_dim == 0) {
    return Error::make(ErrorKind::kFormat,
                       "{}: vocab_size {}, hidden_size {}, intermediate_size {}, num_hidden_layers {}, "
                       "num_attention_heads {}, num_key_value_heads {} and head_dim {} must all be positive",
                       origin, cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers,
                       cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
  }
  if (cfg.num_attention_heads % cfg.num_key_value_heads != 0) {
    return Error::make(ErrorKind::kFormat, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                       origin, cfg.num_attention_heads, cfg.num_key_value_heads);
  }
  if (cfg.head_dim % 2 != 0) {
    return Error::make(ErrorKind::kFormat, "{}: head_dim {} is odd; rotate-half RoPE needs it even", origin,
                       cfg.head_dim);
  }
  return {};
}

std::string embed_name(const std::string& prefix) { return prefix + "model.embed_tokens.weight"; }

std::string head_name(const io::Qwen3Config& cfg, const std::string& prefix) {
  return cfg.tie_word_embeddings ? embed_name(prefix) : prefix + "lm_head.weight";
}

Result<ir::Graph> build_target_graph(const io::Qwen3Config& cfg, std::span<const uint32_t> tap_layers,
                                     bool host_logits, const std::string& prefix) {
  for (size_t i = 0; i < tap_layers.size(); ++i) {
    if (tap_layers[i] >= cfg.num_hidden_layers) {
      return Error::make(ErrorKind::kInvalidArgument, "tap layer {} (entry {}) is beyond the target's {} layers",
                         tap_layers[i], i, cfg.num_hidden_layers);
    }
  }
  const uint32_t h = cfg.hidden_size;
  ir::Graph g;
  const ir::WeightId embed = g.add_weight({embed_name(prefix)}, {cfg.vocab_size, h});
  const ir::Val x = g.add_val(ir::Rows::kTokens, h, "x");
  g.add_op(ir::Embed{embed, x});
  std::optional<ir::Val> taps;
  if (!tap_layers.empty()) taps = g.add_val(ir::Rows::kTokens, static_cast<uint32_t>(tap_layers.size()) * h, "taps");
  for (uint32_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerShape s = layer_shape(cfg, l);
    const LayerWeights w = add_layer_weights(g, s, prefix + "model.layers." + std::to_string(l) + ".", /*fused_qkv=*/true);
    const uint32_t cache = g.add_cache("kv." + std::to_string(l), s.kv_width());
    add_layer(g, s, w, x, cache, /*causal=*/true, "layer." + std::to_string(l));
    for (size_t i = 0; i < tap_layers.size(); ++i) {
      if (tap_layers[i] == l) g.add_op(ir::Tap{x, *taps, static_cast<uint32_t>(i) * h});
    }
  }
  const ir::Val last = g.add_val(ir::Rows::kPicks, h, "last");
  g.add_op(ir::PickRows{x, last});
  const ir::Val normed = g.add_val(ir::Rows::kPicks, h, "final_norm");
  g.add_op(ir::RmsNorm{last, g.add_weight({prefix + "model.norm.weight"}, {h}), cfg.rms_norm_eps, normed});
  const ir::Val logits = g.add_val(ir::Rows::kPicks, cfg.vocab_size, "logits");
  g.add_op(ir::Gemm{normed, g.add_weight({head_name(cfg, prefix)}, {cfg.vocab_size, h}), std::nullopt,
                    ir::Epilogue::kNone, logits});
  const ir::Val ids = g.add_val(ir::Rows::kPicks, 1, "ids", ir::Elem::kU32);
  g.add_op(ir::Sample{logits, cfg.vocab_size, ids});
  // Rejection sampling of the verify blocks given proposals (a pass-by for the others), so only token
  // ids leave the device in a round (dflash.md §1.8).
  g.add_op(ir::RejectSample{logits, cfg.vocab_size, ids});
  g.add_output("ids", ids);  // kIdsOutput
  g.add_output("logits", logits, host_logits ? ir::Placement::kHost : ir::Placement::kDevice);
  if (taps) g.add_output("taps", *taps, ir::Placement::kDevice);
  TANDEM_TRY(ir::validate(g));
  return g;
}

}  // namespace tandem::models::qwen3

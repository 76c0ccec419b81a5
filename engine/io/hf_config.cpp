// Hugging Face config.json readers for ModernBERT (both key layouts), Qwen3 and DFlash drafters. The
// defaults and key precedence follow transformers' own config classes (4.x and 5.x), so a file that
// save_pretrained wrote reads as transformers reads it. DFlash keys follow dflash.md §1.2 and §3.1.
#include "engine/io/hf_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/io/json_fields_impl.h"
#include "engine/io/json_parse_impl.h"

namespace tandem::io {
namespace {

using nlohmann::json;

constexpr std::string_view kFullAttention = "full_attention";
constexpr std::string_view kSlidingAttention = "sliding_attention";

// Sane bounds: far above any published model, low enough that sizes derived from them cannot overflow.
constexpr uint32_t kMaxVocab = 1u << 24;
constexpr uint32_t kMaxHidden = 1u << 16;
constexpr uint32_t kMaxIntermediate = 1u << 20;
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxHeads = 1024;
constexpr uint32_t kMaxHeadDim = 1024;
constexpr double kMaxRopeTheta = 1e12;

struct CoreShape {
  uint32_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0, num_attention_heads = 0;
};

Result<CoreShape> read_core_shape(const JsonFields& f) {
  CoreShape s;
  TANDEM_ASSIGN(s.vocab_size, f.u32("vocab_size", 1, kMaxVocab));
  TANDEM_ASSIGN(s.hidden_size, f.u32("hidden_size", 1, kMaxHidden));
  TANDEM_ASSIGN(s.intermediate_size, f.u32("intermediate_size", 1, kMaxIntermediate));
  TANDEM_ASSIGN(s.num_hidden_layers, f.u32("num_hidden_layers", 1, kMaxLayers));
  TANDEM_ASSIGN(s.num_attention_heads, f.u32("num_attention_heads", 1, kMaxHeads));
  return s;
}

// Copies the shared shape fields into a family's config.
template <class Config>
void set_core_shape(const CoreShape& s, Config& c) {
  c.vocab_size = s.vocab_size;
  c.hidden_size = s.hidden_size;
  c.intermediate_size = s.intermediate_size;
  c.num_hidden_layers = s.num_hidden_layers;
  c.num_attention_heads = s.num_attention_heads;
}

// hidden_size / num_attention_heads, which must be exact and even (RoPE rotates pairs).
Result<uint32_t> derived_head_dim(const JsonFields& f, const CoreShape& s) {
  if (s.hidden_size % s.num_attention_heads != 0) {
    return f.loc("num_attention_heads")
        .error(ErrorKind::kFormat, fmt::format("{} heads do not divide hidden_size {}", s.num_attention_heads,
                                               s.hidden_size));
  }
  return s.hidden_size / s.num_attention_heads;
}

Status check_even_head_dim(const JsonLoc& loc, uint32_t head_dim) {
  if (head_dim % 2 == 0) return ok_status();
  return loc.error(ErrorKind::kFormat, fmt::format("head_dim {} is odd; RoPE needs an even head_dim", head_dim));
}

// A token id that must index the vocabulary.
Status check_token_id(const JsonLoc& loc, uint32_t id, uint32_t vocab_size) {
  if (id < vocab_size) return ok_status();
  return loc.error(ErrorKind::kFormat, fmt::format("token id {} is outside the vocabulary (vocab_size {})", id,
                                                   vocab_size));
}

// layer_types: one "full_attention" or "sliding_attention" per layer; true marks a sliding layer.
Result<std::vector<bool>> parse_layer_types(const JsonFields& f, uint32_t num_layers) {
  const json& v = *f.find("layer_types");
  const JsonLoc loc = f.loc("layer_types");
  if (!v.is_array()) {
    return loc.error(ErrorKind::kFormat, fmt::format("expected a list, found {}", describe_json(v)));
  }
  if (v.size() != num_layers) {
    return loc.error(ErrorKind::kFormat, fmt::format("has {} entries, but num_hidden_layers is {}", v.size(),
                                                     num_layers));
  }
  std::vector<bool> sliding(num_layers);
  for (size_t i = 0; i < v.size(); ++i) {
    const bool known = v[i].is_string() && (v[i] == kFullAttention || v[i] == kSlidingAttention);
    if (!known) {
      return loc.index(i).error(ErrorKind::kFormat,
                                fmt::format("expected \"{}\" or \"{}\", found {}", kFullAttention, kSlidingAttention,
                                            describe_json(v[i])));
    }
    sliding[i] = v[i] == kSlidingAttention;
  }
  return sliding;
}

// One RoPE parameter object: its type must be "default" (plain RoPE; tandem implements no scaling), and
// its rope_theta, when present, is returned. Legacy rope_scaling spells the type "type".
Result<std::optional<double>> parse_rope_entry(const JsonFields& rope) {
  for (const char* key : {"rope_type", "type"}) {
    TANDEM_ASSIGN(const std::optional<std::string> type, rope.opt_string(key));
    if (type && *type != "default") {
      return rope.loc(key).error(ErrorKind::kUnsupported,
                                 fmt::format("RoPE scaling \"{}\" is not supported (only \"default\")", *type));
    }
  }
  return rope.opt_number("rope_theta", 1e-3, kMaxRopeTheta);
}

// transformers' legacy rope_scaling: null, or an object whose type must be "default".
Status check_rope_scaling(const JsonFields& f) {
  TANDEM_ASSIGN(const std::optional<JsonFields> scaling, f.opt_object("rope_scaling"));
  if (!scaling) return ok_status();
  TANDEM_TRY(parse_rope_entry(*scaling));
  return ok_status();
}

// Picks the theta from rope_parameters (transformers 5) or the flat key (4.x): global_rope_theta,
// local_rope_theta or rope_theta, named in the message. Both, disagreeing, is an error.
struct FlatTheta {
  std::string_view key;
  std::optional<double> value;
};
Result<double> pick_theta(const JsonLoc& nested_loc, std::optional<double> nested, FlatTheta flat_theta,
                          double fallback) {
  const std::optional<double> flat = flat_theta.value;
  if (nested && flat && *nested != *flat) {
    return nested_loc.error(ErrorKind::kFormat,
                            fmt::format("{} disagrees with \"{}\" = {}", *nested, flat_theta.key, *flat));
  }
  if (nested) return *nested;
  if (flat) return *flat;
  return fallback;
}

// Token ids HF allows as a number or a list (eos_token_id).
Result<std::vector<uint32_t>> parse_id_list(const JsonFields& f, std::string_view key, uint32_t vocab_size) {
  std::vector<uint32_t> ids;
  const json* v = f.find(key);
  if (!v) return ids;
  const JsonLoc loc = f.loc(key);
  if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      TANDEM_ASSIGN(const uint32_t id, json_to_u32((*v)[i], loc.index(i)));
      TANDEM_TRY(check_token_id(loc.index(i), id, vocab_size));
      ids.push_back(id);
    }
    return ids;
  }
  TANDEM_ASSIGN(const uint32_t id, json_to_u32(*v, loc));
  TANDEM_TRY(check_token_id(loc, id, vocab_size));
  ids.push_back(id);
  return ids;
}

Result<std::optional<uint32_t>> parse_opt_token_id(const JsonFields& f, std::string_view key, uint32_t vocab_size) {
  TANDEM_ASSIGN(const std::optional<uint32_t> id, f.opt_u32(key));
  if (id) {
    TANDEM_TRY(check_token_id(f.loc(key), *id, vocab_size));
  }
  return id;
}

Result<uint32_t> parse_token_id_or(const JsonFields& f, std::string_view key, uint32_t fallback,
                                   uint32_t vocab_size) {
  TANDEM_ASSIGN(const uint32_t id, f.u32_or(key, fallback));
  TANDEM_TRY(check_token_id(f.loc(key), id, vocab_size));
  return id;
}

}  // namespace

// ---- ModernBERT ----

Result<ModernBertConfig> parse_modernbert_config(const json& j, const std::string& origin) {
  TANDEM_ASSIGN(const JsonFields f, JsonFields::of(j, JsonLoc(origin)));
  TANDEM_ASSIGN(const CoreShape s, read_core_shape(f));
  ModernBertConfig c;
  set_core_shape(s, c);
  TANDEM_ASSIGN(c.head_dim, derived_head_dim(f, s));
  TANDEM_TRY(check_even_head_dim(f.loc("hidden_size"), c.head_dim));
  TANDEM_ASSIGN(c.norm_eps, f.f32_or("norm_eps", 1e-5f, 0.0, 1.0));
  TANDEM_ASSIGN(c.norm_bias, f.bool_or("norm_bias", false));
  TANDEM_ASSIGN(c.attention_bias, f.bool_or("attention_bias", false));
  TANDEM_ASSIGN(c.mlp_bias, f.bool_or("mlp_bias", false));
  TANDEM_ASSIGN(const std::optional<std::string> activation, f.opt_string("hidden_activation"));
  if (activation) c.hidden_activation = *activation;

  // transformers 5 turned local_attention into a sliding_window property (half the window); a config
  // that names sliding_window sets local_attention = 2 · sliding_window, as the property setter does.
  TANDEM_ASSIGN(c.local_attention, f.u32_or("local_attention", 128, 2, 1u << 30));
  TANDEM_ASSIGN(const std::optional<uint32_t> half_window, f.opt_u32("sliding_window", 1, 1u << 29));
  if (half_window) c.local_attention = 2 * *half_window;

  // Layer pattern: layer_types (transformers 5) wins; else layer i is global iff i % every_n == 0.
  TANDEM_ASSIGN(const uint32_t every_n, f.u32_or("global_attn_every_n_layers", 3, 1, kMaxLayers));
  c.global_layer.assign(c.num_hidden_layers, false);
  if (f.has("layer_types")) {
    TANDEM_ASSIGN(const std::vector<bool> sliding, parse_layer_types(f, c.num_hidden_layers));
    for (uint32_t i = 0; i < c.num_hidden_layers; ++i) c.global_layer[i] = !sliding[i];
  } else {
    for (uint32_t i = 0; i < c.num_hidden_layers; ++i) c.global_layer[i] = i % every_n == 0;
  }

  // RoPE theta per layer kind: rope_parameters.{full,sliding}_attention.rope_theta (transformers 5) or
  // global_rope_theta / local_rope_theta (4.x). In 4.x a null local_rope_theta means local layers use
  // the global theta.
  TANDEM_TRY(check_rope_scaling(f));
  std::optional<double> nested_global, nested_local;
  TANDEM_ASSIGN(const std::optional<JsonFields> rope, f.opt_object("rope_parameters"));
  if (rope) {
    for (const auto& [key, value] : rope->value().items()) {
      if (key != kFullAttention && key != kSlidingAttention) {
        return rope->loc(key).error(ErrorKind::kUnsupported,
                                    fmt::format("ModernBERT rope_parameters has one entry per layer type (\"{}\", "
                                                "\"{}\")", kFullAttention, kSlidingAttention));
      }
    }
    for (const std::string_view kind : {kFullAttention, kSlidingAttention}) {
      TANDEM_ASSIGN(const std::optional<JsonFields> entry, rope->opt_object(kind));
      if (!entry) continue;
      TANDEM_ASSIGN(const std::optional<double> theta, parse_rope_entry(*entry));
      (kind == kFullAttention ? nested_global : nested_local) = theta;
    }
  }
  FlatTheta flat_global{"global_rope_theta", std::nullopt};
  FlatTheta flat_local{"local_rope_theta", std::nullopt};
  TANDEM_ASSIGN(flat_global.value, f.opt_number(flat_global.key, 1e-3, kMaxRopeTheta));
  TANDEM_ASSIGN(flat_local.value, f.opt_number(flat_local.key, 1e-3, kMaxRopeTheta));
  const JsonLoc global_loc = f.loc("rope_parameters").key(kFullAttention).key("rope_theta");
  const JsonLoc local_loc = f.loc("rope_parameters").key(kSlidingAttention).key("rope_theta");
  TANDEM_ASSIGN(const double global_theta, pick_theta(global_loc, nested_global, flat_global, 160000.0));
  const auto local_it = j.find("local_rope_theta");
  const double local_fallback = local_it != j.end() && local_it->is_null() ? global_theta : 10000.0;
  TANDEM_ASSIGN(const double local_theta, pick_theta(local_loc, nested_local, flat_local, local_fallback));
  c.global_rope_theta = static_cast<float>(global_theta);
  c.local_rope_theta = static_cast<float>(local_theta);

  TANDEM_ASSIGN(c.max_position_embeddings, f.u32_or("max_position_embeddings", c.max_position_embeddings, 1));
  TANDEM_ASSIGN(c.pad_token_id, parse_token_id_or(f, "pad_token_id", 50283, c.vocab_size));
  TANDEM_ASSIGN(c.cls_token_id, parse_token_id_or(f, "cls_token_id", 50281, c.vocab_size));
  TANDEM_ASSIGN(c.sep_token_id, parse_token_id_or(f, "sep_token_id", 50282, c.vocab_size));
  TANDEM_ASSIGN(c.mask_token_id, parse_opt_token_id(f, "mask_token_id", c.vocab_size));
  return c;
}

Result<ModernBertConfig> load_modernbert_config(const std::string& path) {
  TANDEM_ASSIGN(const json j, read_json_file(path));
  return parse_modernbert_config(j, path);
}

// ---- Qwen3 ----

Result<Qwen3Config> parse_qwen3_config(const json& j, const std::string& origin) {
  TANDEM_ASSIGN(const JsonFields f, JsonFields::of(j, JsonLoc(origin)));
  TANDEM_ASSIGN(const CoreShape s, read_core_shape(f));
  Qwen3Config c;
  set_core_shape(s, c);
  TANDEM_ASSIGN(c.num_key_value_heads, f.u32_or("num_key_value_heads", s.num_attention_heads, 1, kMaxHeads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return f.loc("num_key_value_heads")
        .error(ErrorKind::kFormat, fmt::format("{} key/value heads do not divide num_attention_heads {}",
                                               c.num_key_value_heads, c.num_attention_heads));
  }
  // Qwen3 states head_dim; heads · head_dim need not equal hidden_size (Qwen3-0.6B: 16 · 128 vs 1024).
  TANDEM_ASSIGN(const std::optional<uint32_t> head_dim, f.opt_u32("head_dim", 1, kMaxHeadDim));
  if (head_dim) {
    c.head_dim = *head_dim;
  } else {
    TANDEM_ASSIGN(c.head_dim, derived_head_dim(f, s));
  }
  TANDEM_TRY(check_even_head_dim(f.loc(head_dim ? "head_dim" : "hidden_size"), c.head_dim));
  TANDEM_ASSIGN(c.rms_norm_eps, f.f32_or("rms_norm_eps", 1e-6f, 0.0, 1.0));

  // RoPE: rope_parameters (transformers 5) or rope_theta + rope_scaling (4.x); the 4.x default theta.
  TANDEM_TRY(check_rope_scaling(f));
  std::optional<double> nested_theta;
  TANDEM_ASSIGN(const std::optional<JsonFields> rope, f.opt_object("rope_parameters"));
  if (rope) {
    TANDEM_ASSIGN(nested_theta, parse_rope_entry(*rope));
  }
  TANDEM_ASSIGN(const std::optional<double> flat_theta, f.opt_number("rope_theta", 1e-3, kMaxRopeTheta));
  const JsonLoc nested_loc = f.loc("rope_parameters").key("rope_theta");
  TANDEM_ASSIGN(const double theta, pick_theta(nested_loc, nested_theta, {"rope_theta", flat_theta}, 10000.0));
  c.rope_theta = static_cast<float>(theta);

  TANDEM_ASSIGN(c.tie_word_embeddings, f.bool_or("tie_word_embeddings", false));
  TANDEM_ASSIGN(c.attention_bias, f.bool_or("attention_bias", false));
  TANDEM_ASSIGN(c.max_position_embeddings, f.u32_or("max_position_embeddings", 32768, 1));

  // Sliding window as Qwen3Config sets it: sliding_window only counts when use_sliding_window is true
  // (an absent sliding_window defaults to 4096, an explicit null means none); without layer_types,
  // layers from max_window_layers on slide. One leniency: when use_sliding_window is absent and
  // layer_types names sliding layers, a numeric sliding_window applies (transformers would fail at the
  // first forward of such a file, so no runnable config reads differently).
  const json* use_key = f.find("use_sliding_window");
  TANDEM_ASSIGN(const bool use_sliding_window, f.bool_or("use_sliding_window", false));
  TANDEM_ASSIGN(const std::optional<uint32_t> window_value, f.opt_u32("sliding_window", 1));
  std::optional<uint32_t> window;
  if (use_sliding_window) window = j.contains("sliding_window") ? window_value : std::optional<uint32_t>(4096);
  TANDEM_ASSIGN(const uint32_t max_window_layers, f.u32_or("max_window_layers", 28));
  if (f.has("layer_types")) {
    TANDEM_ASSIGN(c.sliding_layer, parse_layer_types(f, c.num_hidden_layers));
    const bool any_sliding = std::find(c.sliding_layer.begin(), c.sliding_layer.end(), true) != c.sliding_layer.end();
    if (any_sliding && !use_key) window = window_value;
    for (size_t i = 0; i < c.sliding_layer.size(); ++i) {
      if (c.sliding_layer[i] && !window) {
        return f.loc("layer_types").index(i).error(
            ErrorKind::kFormat, "is \"sliding_attention\" but no window is set (sliding_window must be a number "
                                "and use_sliding_window not false)");
      }
    }
  } else {
    c.sliding_layer.assign(c.num_hidden_layers, false);
    for (uint32_t i = 0; i < c.num_hidden_layers; ++i) {
      c.sliding_layer[i] = window.has_value() && i >= max_window_layers;
    }
  }
  c.sliding_window = window;

  TANDEM_ASSIGN(c.eos_token_ids, parse_id_list(f, "eos_token_id", c.vocab_size));
  TANDEM_ASSIGN(c.bos_token_id, parse_opt_token_id(f, "bos_token_id", c.vocab_size));
  c.origin = origin;
  return c;
}

Result<Qwen3Config> load_qwen3_config(const std::string& path) {
  TANDEM_ASSIGN(const json j, read_json_file(path));
  return parse_qwen3_config(j, path);
}

// ---- DFlash drafters ----

std::vector<uint32_t> default_target_layer_ids(uint32_t target_layers, uint32_t draft_layers) {
  if (draft_layers == 0) return {};
  if (draft_layers == 1) return {target_layers / 2};
  // round(1 + i·(N − 4)/(L − 1)) with Python's round (half to even), in exact integer arithmetic. A
  // target shallower than 4 layers gives negative values, clamped to 0 (parse_dflash_config rejects it).
  const int64_t span = int64_t{target_layers} - 4;
  const int64_t den = int64_t{draft_layers} - 1;
  std::vector<uint32_t> ids;
  ids.reserve(draft_layers);
  for (int64_t i = 0; i < int64_t{draft_layers}; ++i) {
    const int64_t num = den + i * span;  // (1 + i·span/den) · den
    int64_t q = num / den;
    int64_t r = num % den;
    if (r < 0) {  // floor division
      r += den;
      --q;
    }
    if (2 * r > den || (2 * r == den && (q % 2 != 0))) ++q;
    ids.push_back(static_cast<uint32_t>(std::max<int64_t>(q, 0)));
  }
  return ids;
}

namespace {

// A DFlash key may sit in dflash_config or at the top level (published drafters use both); when both
// hold it they must agree. Returns the value (nullptr when absent) and where it was found.
struct DFlashKey {
  const json* value = nullptr;
  JsonLoc loc;
};

Result<DFlashKey> dflash_key(const JsonFields& top, const std::optional<JsonFields>& nested, std::string_view key) {
  const json* outer = top.find(key);
  const json* inner = nested ? nested->find(key) : nullptr;
  if (outer && inner && *outer != *inner) {
    return nested->loc(key).error(ErrorKind::kFormat, fmt::format("{} disagrees with the top-level \"{}\" = {}",
                                                                  describe_json(*inner), key, describe_json(*outer)));
  }
  if (inner) return DFlashKey{inner, nested->loc(key)};
  return DFlashKey{outer, top.loc(key)};
}

Result<std::optional<uint32_t>> dflash_u32(const JsonFields& top, const std::optional<JsonFields>& nested,
                                           std::string_view key, uint32_t lo, uint32_t hi) {
  TANDEM_ASSIGN(const DFlashKey k, dflash_key(top, nested, key));
  if (!k.value) return std::optional<uint32_t>();
  TANDEM_ASSIGN(const uint32_t x, json_to_u32(*k.value, k.loc, lo, hi));
  return std::optional<uint32_t>(x);
}

Result<std::optional<double>> dflash_number(const JsonFields& top, const std::optional<JsonFields>& nested,
                                            std::string_view key, double lo, double hi) {
  TANDEM_ASSIGN(const DFlashKey k, dflash_key(top, nested, key));
  if (!k.value) return std::optional<double>();
  TANDEM_ASSIGN(const double x, json_to_number(*k.value, k.loc, lo, hi));
  return std::optional<double>(x);
}

// Features of some published drafters that tandem's DFlash graphs do not implement: refused by name
// rather than silently ignored.
Status refuse_unsupported(const JsonFields& top, const std::optional<JsonFields>& nested) {
  for (const char* key : {"attention_sink_bias", "use_swa"}) {
    TANDEM_ASSIGN(const DFlashKey k, dflash_key(top, nested, key));
    if (!k.value) continue;
    TANDEM_ASSIGN(const bool on, json_to_bool(*k.value, k.loc));
    if (on) return k.loc.error(ErrorKind::kUnsupported, "is not supported by tandem's DFlash drafter");
  }
  TANDEM_ASSIGN(const std::optional<double> partial, top.opt_number("partial_rotary_factor", 0.0, 1.0));
  if (partial && *partial != 1.0) {
    return top.loc("partial_rotary_factor").error(ErrorKind::kUnsupported, "partial RoPE is not supported");
  }
  return ok_status();
}

bool names_dflash2(const JsonFields& top) {
  const json* arch = top.find("architectures");
  if (!arch || !arch->is_array()) return false;
  return std::any_of(arch->begin(), arch->end(), [](const json& a) { return a == "DFlash2DraftModel"; });
}

Result<std::vector<uint32_t>> parse_target_layer_ids(const DFlashKey& k, uint32_t num_target_layers) {
  if (!k.value->is_array() || k.value->empty()) {
    return k.loc.error(ErrorKind::kFormat, fmt::format("expected a non-empty list of layer indices, found {}",
                                                       describe_json(*k.value)));
  }
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < k.value->size(); ++i) {
    TANDEM_ASSIGN(const uint32_t id, json_to_u32((*k.value)[i], k.loc.index(i), 0, kMaxLayers));
    if (num_target_layers != 0 && id >= num_target_layers) {
      return k.loc.index(i).error(ErrorKind::kFormat, fmt::format("tap layer {} is beyond the target's {} layers "
                                                                  "(num_target_layers)", id, num_target_layers));
    }
    ids.push_back(id);
  }
  return ids;
}

// DFlash 2 keys (dflash.md §3.1): the dynamic convolution and the candidate selector.
Status parse_dflash2(const JsonFields& top, const std::optional<JsonFields>& nested, DFlashConfig& c) {
  const uint32_t hidden = c.layers.hidden_size;
  TANDEM_ASSIGN(const std::optional<uint32_t> taps, dflash_u32(top, nested, "conv_kernel_size", 1, 64));
  c.conv_kernel_size = *taps;
  TANDEM_ASSIGN(const DFlashKey group_key, dflash_key(top, nested, "conv_group_size"));
  TANDEM_ASSIGN(const std::optional<uint32_t> group, dflash_u32(top, nested, "conv_group_size", 1, hidden));
  if (!group) return nested ? nested->missing("conv_group_size") : top.missing("conv_group_size");
  if (hidden % *group != 0) {
    return group_key.loc.error(ErrorKind::kFormat, fmt::format("{} does not divide hidden_size {}", *group, hidden));
  }
  c.conv_group_size = *group;
  TANDEM_ASSIGN(const std::optional<uint32_t> rank, dflash_u32(top, nested, "selector_rank", 1, kMaxHidden));
  c.selector_rank = rank.value_or(0);  // 0: read from the codebook shapes
  const uint32_t top_k_max = std::min<uint32_t>(c.layers.vocab_size, 1024);
  TANDEM_ASSIGN(const std::optional<uint32_t> top_k, dflash_u32(top, nested, "selector_top_k", 1, top_k_max));
  c.selector_top_k = top_k.value_or(16);
  TANDEM_ASSIGN(const std::optional<double> cap, dflash_number(top, nested, "final_logit_softcapping", 0.0, 1e6));
  c.final_logit_softcapping = static_cast<float>(cap.value_or(0.0));
  TANDEM_ASSIGN(const std::optional<double> mult, dflash_number(top, nested, "output_multiplier", -1e6, 1e6));
  c.output_multiplier = static_cast<float>(mult.value_or(1.0));
  TANDEM_ASSIGN(const std::optional<double> scale, dflash_number(top, nested, "input_embedding_scale", -1e6, 1e6));
  c.input_embedding_scale = static_cast<float>(scale.value_or(1.0));
  return ok_status();
}

}  // namespace

Result<DFlashConfig> parse_dflash_config(const json& j, const std::string& origin) {
  DFlashConfig c;
  TANDEM_ASSIGN(c.layers, parse_qwen3_config(j, origin));
  TANDEM_ASSIGN(const JsonFields top, JsonFields::of(j, JsonLoc(origin)));
  TANDEM_ASSIGN(const std::optional<JsonFields> nested, top.opt_object("dflash_config"));
  TANDEM_TRY(refuse_unsupported(top, nested));

  TANDEM_ASSIGN(const std::optional<uint32_t> block, dflash_u32(top, nested, "block_size", 2, 1024));
  c.block_size = block.value_or(16);
  TANDEM_ASSIGN(const std::optional<uint32_t> n_target, dflash_u32(top, nested, "num_target_layers", 1, kMaxLayers));
  c.num_target_layers = n_target.value_or(0);  // 0: unknown (only with explicit target_layer_ids)
  TANDEM_ASSIGN(const DFlashKey ids_key, dflash_key(top, nested, "target_layer_ids"));
  if (ids_key.value) {
    TANDEM_ASSIGN(c.target_layer_ids, parse_target_layer_ids(ids_key, c.num_target_layers));
  } else {
    const uint32_t draft_layers = c.layers.num_hidden_layers;
    if (!n_target) {
      return top.loc("num_target_layers")
          .error(ErrorKind::kNotFound, "missing, and dflash_config.target_layer_ids is absent too: the taps are "
                                       "unknown");
    }
    if (draft_layers > 1 && c.num_target_layers < 4) {
      return top.loc("num_target_layers")
          .error(ErrorKind::kFormat, fmt::format("{} is too shallow for the default tap rule (needs >= 4 layers "
                                                 "for {} draft layers)", c.num_target_layers, draft_layers));
    }
    c.target_layer_ids = default_target_layer_ids(c.num_target_layers, draft_layers);
  }

  TANDEM_ASSIGN(const DFlashKey mask_key, dflash_key(top, nested, "mask_token_id"));
  if (!mask_key.value) return nested ? nested->missing("mask_token_id") : top.missing("mask_token_id");
  TANDEM_ASSIGN(c.mask_token_id, json_to_u32(*mask_key.value, mask_key.loc));
  TANDEM_TRY(check_token_id(mask_key.loc, c.mask_token_id, c.layers.vocab_size));
  TANDEM_ASSIGN(c.target_hidden_size, dflash_u32(top, nested, "target_hidden_size", 1, kMaxHidden));

  // Causality per layer, z-lab's rule (dflash/model.py, Qwen3DFlashAttention.__init__: `is_causal =
  // getattr(config, "is_causal", None)`; `layer_type == "sliding_attention" if is_causal is None else
  // bool(is_causal)`). z-lab reads the top-level is_causal only; vLLM (qwen3_dflash.py,
  // _dflash_layer_causal) also reads dflash_config.causal, so both count and must agree.
  const std::optional<JsonFields> no_nested;
  TANDEM_ASSIGN(const DFlashKey is_causal_key, dflash_key(top, no_nested, "is_causal"));
  TANDEM_ASSIGN(const DFlashKey causal_key, dflash_key(top, nested, "causal"));
  for (const DFlashKey* k : {&is_causal_key, &causal_key}) {
    if (!k->value) continue;
    TANDEM_ASSIGN(const bool value, json_to_bool(*k->value, k->loc));
    if (c.causal && *c.causal != value) {
      return k->loc.error(ErrorKind::kFormat, fmt::format("{} disagrees with is_causal = {}", value, *c.causal));
    }
    c.causal = value;
  }
  c.causal_layer.resize(c.layers.num_hidden_layers);
  for (uint32_t l = 0; l < c.layers.num_hidden_layers; ++l) {
    c.causal_layer[l] = c.causal.value_or(c.layers.sliding_layer[l]);
  }

  TANDEM_ASSIGN(c.quantization, parse_quant_config(j, origin));
  TANDEM_ASSIGN(const DFlashKey conv_key, dflash_key(top, nested, "conv_kernel_size"));
  if (conv_key.value) {
    c.version = 2;
    TANDEM_TRY(parse_dflash2(top, nested, c));
  } else if (names_dflash2(top)) {
    return (nested ? nested->loc("conv_kernel_size") : top.loc("conv_kernel_size"))
        .error(ErrorKind::kNotFound, "missing, but architectures names DFlash2DraftModel");
  } else {
    for (const char* key : {"conv_group_size", "selector_rank", "selector_top_k"}) {
      TANDEM_ASSIGN(const DFlashKey k, dflash_key(top, nested, key));
      if (k.value) return k.loc.error(ErrorKind::kFormat, "is a DFlash 2 key, but conv_kernel_size is missing");
    }
  }
  return c;
}

Result<DFlashConfig> load_dflash_config(const std::string& path) {
  TANDEM_ASSIGN(const json j, read_json_file(path));
  return parse_dflash_config(j, path);
}

}  // namespace tandem::io

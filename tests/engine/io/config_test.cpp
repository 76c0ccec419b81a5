// engine/io HF configs: ModernBERT in both key layouts (4.x and transformers 5), Qwen3 (4.x and 5.x
// rope keys, sliding windows, eos lists), DFlash v1/v2 drafters (published config.json files), and
// malformed configs rejected with the file, key and fault in the message.
#include "engine/io/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/engine/io/safetensors_test_util.h"

namespace tandem::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// answerdotai/ModernBERT-base config.json as transformers 4.x wrote it.
const char* const kModernBertClassic = R"({
  "architectures": ["ModernBertForMaskedLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 50281, "classifier_activation": "gelu", "classifier_bias": false, "classifier_dropout": 0.0,
  "classifier_pooling": "mean", "cls_token_id": 50281, "decoder_bias": true, "deterministic_flash_attn": false,
  "embedding_dropout": 0.0, "eos_token_id": 50282, "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
  "gradient_checkpointing": false, "hidden_activation": "gelu", "hidden_size": 768, "initializer_cutoff_factor": 2.0,
  "initializer_range": 0.02, "intermediate_size": 1152, "layer_norm_eps": 1e-05, "local_attention": 128,
  "local_rope_theta": 10000.0, "max_position_embeddings": 8192, "mlp_bias": false, "mlp_dropout": 0.0,
  "model_type": "modernbert", "norm_bias": false, "norm_eps": 1e-05, "num_attention_heads": 12,
  "num_hidden_layers": 22, "pad_token_id": 50283, "position_embedding_type": "absolute", "sep_token_id": 50282,
  "tie_word_embeddings": true, "torch_dtype": "float32", "transformers_version": "4.47.0.dev0", "vocab_size": 50368
})";

// The same model as transformers 5 saves it: layer_types and per-layer-type rope_parameters replace the
// theta keys; global_attn_every_n_layers stays (its __init__ keeps the attribute).
json modernbert_v5() {
  json j = json::parse(kModernBertClassic);
  j.erase("global_rope_theta");
  j.erase("local_rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  j["transformers_version"] = "5.17.0";
  j["layer_types"] = json::array();
  for (int i = 0; i < 22; ++i) j["layer_types"].push_back(i % 3 == 0 ? "full_attention" : "sliding_attention");
  j["rope_parameters"] = {{"full_attention", {{"rope_theta", 160000.0}, {"rope_type", "default"}}},
                          {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}};
  return j;
}

void expect_same(const ModernBertConfig& a, const ModernBertConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.norm_bias, b.norm_bias);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.mlp_bias, b.mlp_bias);
  EXPECT_EQ(a.local_attention, b.local_attention);
  EXPECT_EQ(a.global_layer, b.global_layer);
  EXPECT_EQ(a.global_rope_theta, b.global_rope_theta);
  EXPECT_EQ(a.local_rope_theta, b.local_rope_theta);
  EXPECT_EQ(a.hidden_activation, b.hidden_activation);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.cls_token_id, b.cls_token_id);
  EXPECT_EQ(a.sep_token_id, b.sep_token_id);
  EXPECT_EQ(a.mask_token_id, b.mask_token_id);
}

TEST(ModernBertConfig, ClassicLayout) {
  auto c = parse_modernbert_config(json::parse(kModernBertClassic), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->vocab_size, 50368u);
  EXPECT_EQ(c->hidden_size, 768u);
  EXPECT_EQ(c->intermediate_size, 1152u);
  EXPECT_EQ(c->num_hidden_layers, 22u);
  EXPECT_EQ(c->num_attention_heads, 12u);
  EXPECT_EQ(c->head_dim, 64u);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_EQ(c->local_attention, 128u);
  EXPECT_EQ(c->global_rope_theta, 160000.0f);
  EXPECT_EQ(c->local_rope_theta, 10000.0f);
  EXPECT_EQ(c->hidden_activation, "gelu");
  EXPECT_EQ(c->cls_token_id, 50281u);
  EXPECT_EQ(c->sep_token_id, 50282u);
  EXPECT_EQ(c->pad_token_id, 50283u);
  EXPECT_FALSE(c->mask_token_id.has_value());
  ASSERT_EQ(c->global_layer.size(), 22u);
  for (size_t i = 0; i < 22; ++i) EXPECT_EQ(c->global_layer[i], i % 3 == 0) << "layer " << i;
}

TEST(ModernBertConfig, BothLayoutsGiveTheSameConfig) {
  auto classic = parse_modernbert_config(json::parse(kModernBertClassic), "classic/config.json");
  auto v5 = parse_modernbert_config(modernbert_v5(), "v5/config.json");
  ASSERT_TRUE(classic.ok()) << classic.error().message();
  ASSERT_TRUE(v5.ok()) << v5.error().message();
  expect_same(*classic, *v5);
}

TEST(ModernBertConfig, LayerTypesAndRopeParametersWinInTransformers5) {
  json j = modernbert_v5();
  for (size_t i = 0; i < 22; ++i) j["layer_types"][i] = i % 2 == 0 ? "full_attention" : "sliding_attention";
  j["rope_parameters"]["sliding_attention"]["rope_theta"] = 160000.0;  // mmBERT: one theta everywhere
  auto c = parse_modernbert_config(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  for (size_t i = 0; i < 22; ++i) EXPECT_EQ(c->global_layer[i], i % 2 == 0) << "layer " << i;
  EXPECT_EQ(c->local_rope_theta, 160000.0f);
}

TEST(ModernBertConfig, DefaultsAndLegacyNulls) {
  json j = json::parse(kModernBertClassic);
  for (const char* key : {"global_attn_every_n_layers", "global_rope_theta", "local_attention", "norm_eps",
                          "hidden_activation", "cls_token_id", "sep_token_id", "pad_token_id"}) {
    j.erase(key);
  }
  j["local_rope_theta"] = nullptr;  // 4.x: local layers then use the global theta
  j["global_rope_theta"] = 80000.0;
  j["mask_token_id"] = 50284;
  auto c = parse_modernbert_config(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->global_rope_theta, 80000.0f);
  EXPECT_EQ(c->local_rope_theta, 80000.0f);
  EXPECT_EQ(c->local_attention, 128u);
  EXPECT_EQ(c->cls_token_id, 50281u);
  EXPECT_EQ(c->mask_token_id, 50284u);
  EXPECT_TRUE(c->global_layer[3]);
  EXPECT_FALSE(c->global_layer[4]);
  j["sliding_window"] = 32;  // transformers 5's half-window property
  auto half = parse_modernbert_config(j, "config.json");
  ASSERT_TRUE(half.ok()) << half.error().message();
  EXPECT_EQ(half->local_attention, 64u);
}

// One malformed config: the edit, the expected kind, and the substrings the message must hold.
struct BadConfig {
  const char* label;
  std::function<void(json&)> edit;
  ErrorKind kind;
  std::vector<std::string> needles;
};

template <typename Parse>
void expect_rejected(const json& base, const std::vector<BadConfig>& cases, Parse parse) {
  for (const BadConfig& bad : cases) {
    SCOPED_TRACE(bad.label);
    json j = base;
    bad.edit(j);
    auto c = parse(j, "model/config.json");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().kind(), bad.kind) << c.error().message();
    EXPECT_THAT(c.error().message(), HasSubstr("model/config.json: ")) << "the message names the file";
    for (const std::string& needle : bad.needles) EXPECT_THAT(c.error().message(), HasSubstr(needle));
  }
}

TEST(ModernBertConfig, MalformedConfigs) {
  const std::vector<BadConfig> cases = {
      {"missing hidden_size", [](json& j) { j.erase("hidden_size"); }, ErrorKind::kNotFound,
       {"key \"hidden_size\": missing"}},
      {"hidden_size a string", [](json& j) { j["hidden_size"] = "768"; }, ErrorKind::kFormat,
       {"key \"hidden_size\": expected an integer", "found \"768\""}},
      {"negative layers", [](json& j) { j["num_hidden_layers"] = -2; }, ErrorKind::kFormat,
       {"key \"num_hidden_layers\": expected an integer in [1, 1024], found -2"}},
      {"heads not dividing hidden", [](json& j) { j["num_attention_heads"] = 10; }, ErrorKind::kFormat,
       {"key \"num_attention_heads\": 10 heads do not divide hidden_size 768"}},
      {"odd head_dim", [](json& j) { j["hidden_size"] = 780; }, ErrorKind::kFormat, {"head_dim 65 is odd"}},
      {"bad layer_types entry",
       [](json& j) {
         j = modernbert_v5();
         j["layer_types"][4] = "local_attention";
       },
       ErrorKind::kFormat, {"key \"layer_types[4]\": expected \"full_attention\" or \"sliding_attention\"",
                            "found \"local_attention\""}},
      {"layer_types too short",
       [](json& j) {
         j = modernbert_v5();
         j["layer_types"].erase(21);
       },
       ErrorKind::kFormat, {"key \"layer_types\": has 21 entries, but num_hidden_layers is 22"}},
      {"scaled rope",
       [](json& j) {
         j = modernbert_v5();
         j["rope_parameters"]["full_attention"]["rope_type"] = "yarn";
       },
       ErrorKind::kUnsupported, {"key \"rope_parameters.full_attention.rope_type\"", "\"yarn\" is not supported"}},
      {"rope_parameters not per layer type",
       [](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1.0}}; },
       ErrorKind::kUnsupported, {"key \"rope_parameters.rope_theta\"", "one entry per layer type"}},
      {"rope theta disagreeing",
       [](json& j) {
         j["rope_parameters"] = {{"full_attention", {{"rope_theta", 10.0}, {"rope_type", "default"}}}};
       },
       ErrorKind::kFormat, {"key \"rope_parameters.full_attention.rope_theta\": 10 disagrees with "
                            "\"global_rope_theta\" = 160000"}},
      {"negative theta", [](json& j) { j["local_rope_theta"] = -1.0; }, ErrorKind::kFormat,
       {"key \"local_rope_theta\": expected a number"}},
      {"cls id outside vocab", [](json& j) { j["cls_token_id"] = 50368; }, ErrorKind::kFormat,
       {"key \"cls_token_id\": token id 50368 is outside the vocabulary (vocab_size 50368)"}},
      {"norm_bias not a bool", [](json& j) { j["norm_bias"] = 0; }, ErrorKind::kFormat,
       {"key \"norm_bias\": expected true or false, found 0"}},
      {"every_n zero", [](json& j) { j["global_attn_every_n_layers"] = 0; }, ErrorKind::kFormat,
       {"key \"global_attn_every_n_layers\""}},
      {"not an object", [](json& j) { j = json::array(); }, ErrorKind::kFormat, {"expected an object"}},
  };
  expect_rejected(json::parse(kModernBertClassic), cases, parse_modernbert_config);
}

// ---- Qwen3 ----

// Qwen/Qwen3-0.6B config.json as transformers 4.51 wrote it.
const char* const kQwen3Classic = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
  "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936
})";

json qwen3_v5() {
  json j = json::parse(kQwen3Classic);
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_theta", 1000000}, {"rope_type", "default"}};
  j["layer_types"] = std::vector<std::string>(28, "full_attention");
  j["pad_token_id"] = nullptr;
  return j;
}

TEST(Qwen3Config, ClassicAndTransformers5Layouts) {
  for (const json& j : {json::parse(kQwen3Classic), qwen3_v5()}) {
    auto c = parse_qwen3_config(j, "config.json");
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->vocab_size, 151936u);
    EXPECT_EQ(c->hidden_size, 1024u);
    EXPECT_EQ(c->intermediate_size, 3072u);
    EXPECT_EQ(c->num_hidden_layers, 28u);
    EXPECT_EQ(c->num_attention_heads, 16u);
    EXPECT_EQ(c->num_key_value_heads, 8u);
    EXPECT_EQ(c->head_dim, 128u);  // 16 · 128 != 1024: Qwen3 states head_dim
    EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
    EXPECT_EQ(c->rope_theta, 1e6f);
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_FALSE(c->attention_bias);
    EXPECT_EQ(c->max_position_embeddings, 40960u);
    EXPECT_FALSE(c->sliding_window.has_value());
    EXPECT_EQ(c->sliding_layer, std::vector<bool>(28, false));
    EXPECT_EQ(c->eos_token_ids, std::vector<uint32_t>{151645});
    EXPECT_EQ(c->bos_token_id, 151643u);
  }
}

TEST(Qwen3Config, DefaultsEosListsAndSlidingWindows) {
  json j = json::parse(kQwen3Classic);
  for (const char* key : {"head_dim", "num_key_value_heads", "rope_theta", "bos_token_id", "tie_word_embeddings"}) {
    j.erase(key);
  }
  j["eos_token_id"] = {151645, 151643};
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 20;
  auto c = parse_qwen3_config(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->head_dim, 64u);  // hidden / heads
  EXPECT_EQ(c->num_key_value_heads, 16u);
  EXPECT_EQ(c->rope_theta, 10000.0f);  // transformers' default when the file names none
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->bos_token_id.has_value());
  EXPECT_EQ(c->eos_token_ids, (std::vector<uint32_t>{151645, 151643}));
  EXPECT_EQ(c->sliding_window, 4096u);
  for (size_t i = 0; i < 28; ++i) EXPECT_EQ(c->sliding_layer[i], i >= 20) << "layer " << i;

  j.erase("sliding_window");  // absent: Qwen3Config's default 4096
  j["layer_types"] = std::vector<std::string>(28, "full_attention");
  j["layer_types"][1] = "sliding_attention";
  auto typed = parse_qwen3_config(j, "config.json");
  ASSERT_TRUE(typed.ok()) << typed.error().message();
  EXPECT_EQ(typed->sliding_window, 4096u);
  for (size_t i = 0; i < 28; ++i) EXPECT_EQ(typed->sliding_layer[i], i == 1) << "layer " << i;

  j["use_sliding_window"] = false;  // transformers drops the window; the layer list then cannot slide
  j["layer_types"] = std::vector<std::string>(28, "full_attention");
  auto off = parse_qwen3_config(j, "config.json");
  ASSERT_TRUE(off.ok()) << off.error().message();
  EXPECT_FALSE(off->sliding_window.has_value());
  EXPECT_EQ(off->sliding_layer, std::vector<bool>(28, false));

  j.erase("use_sliding_window");  // absent (not false), with sliding layers listed: the window applies
  j["sliding_window"] = 6;
  j["layer_types"][0] = "sliding_attention";
  auto lenient = parse_qwen3_config(j, "config.json");
  ASSERT_TRUE(lenient.ok()) << lenient.error().message();
  EXPECT_EQ(lenient->sliding_window, 6u);
  for (size_t i = 0; i < 28; ++i) EXPECT_EQ(lenient->sliding_layer[i], i == 0) << "layer " << i;
  j["sliding_window"] = nullptr;
  auto no_window = parse_qwen3_config(j, "config.json");
  ASSERT_FALSE(no_window.ok());
  EXPECT_THAT(no_window.error().message(), HasSubstr("key \"layer_types[0]\": is \"sliding_attention\" but no window"));
}

TEST(Qwen3Config, MalformedConfigs) {
  const std::vector<BadConfig> cases = {
      {"missing hidden_size", [](json& j) { j.erase("hidden_size"); }, ErrorKind::kNotFound,
       {"key \"hidden_size\": missing"}},
      {"missing vocab_size", [](json& j) { j["vocab_size"] = nullptr; }, ErrorKind::kNotFound,
       {"key \"vocab_size\": missing"}},
      {"heads not dividing hidden without head_dim",
       [](json& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 24;
         j["num_key_value_heads"] = 8;
       },
       ErrorKind::kFormat, {"key \"num_attention_heads\": 24 heads do not divide hidden_size 1024"}},
      {"kv heads not dividing heads", [](json& j) { j["num_key_value_heads"] = 6; }, ErrorKind::kFormat,
       {"key \"num_key_value_heads\": 6 key/value heads do not divide num_attention_heads 16"}},
      {"odd head_dim", [](json& j) { j["head_dim"] = 127; }, ErrorKind::kFormat,
       {"key \"head_dim\"", "head_dim 127 is odd"}},
      {"yarn rope_scaling", [](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
       ErrorKind::kUnsupported, {"key \"rope_scaling.rope_type\"", "RoPE scaling \"yarn\" is not supported"}},
      {"legacy type key", [](json& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; },
       ErrorKind::kUnsupported, {"key \"rope_scaling.type\"", "\"linear\""}},
      {"llama3 rope_parameters",
       [](json& j) {
         j = qwen3_v5();
         j["rope_parameters"]["rope_type"] = "llama3";
       },
       ErrorKind::kUnsupported, {"key \"rope_parameters.rope_type\"", "\"llama3\""}},
      {"rope theta disagreeing", [](json& j) { j["rope_parameters"] = {{"rope_theta", 5e5}}; }, ErrorKind::kFormat,
       {"key \"rope_parameters.rope_theta\": 500000 disagrees with \"rope_theta\" = 1000000"}},
      {"bad layer_types entry",
       [](json& j) {
         j = qwen3_v5();
         j["layer_types"][2] = "sliding";
       },
       ErrorKind::kFormat, {"key \"layer_types[2]\": expected \"full_attention\" or \"sliding_attention\"",
                            "found \"sliding\""}},
      {"layer_types not strings",
       [](json& j) {
         j = qwen3_v5();
         j["layer_types"][0] = 1;
       },
       ErrorKind::kFormat, {"key \"layer_types[0]\"", "found 1"}},
      {"sliding layer without a window",
       [](json& j) {
         j = qwen3_v5();
         j["layer_types"][3] = "sliding_attention";
       },
       ErrorKind::kFormat, {"key \"layer_types[3]\": is \"sliding_attention\" but no window is set"}},
      {"eos outside vocab", [](json& j) { j["eos_token_id"] = {151645, 200000}; }, ErrorKind::kFormat,
       {"key \"eos_token_id[1]\": token id 200000 is outside the vocabulary (vocab_size 151936)"}},
      {"eos not a number", [](json& j) { j["eos_token_id"] = "</s>"; }, ErrorKind::kFormat,
       {"key \"eos_token_id\": expected an integer"}},
      {"rope_parameters not an object", [](json& j) { j["rope_parameters"] = json::array(); }, ErrorKind::kFormat,
       {"key \"rope_parameters\": expected an object, found an array of 0 elements"}},
  };
  expect_rejected(json::parse(kQwen3Classic), cases, parse_qwen3_config);
}

// ---- DFlash ----

// z-lab/Qwen3-8B-DFlash-b16 (dflash.md §1.1): a DFlash v1 drafter for a 36-layer target.
const char* const kDFlashV1 = R"({
  "architectures": ["DFlashDraftModel"], "attention_bias": false, "block_size": 16, "bos_token_id": 151643,
  "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}, "dtype": "bfloat16",
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288,
  "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention", "full_attention"],
  "max_position_embeddings": 40960, "max_window_layers": 5, "model_type": "qwen3", "num_attention_heads": 32,
  "num_hidden_layers": 5, "num_key_value_heads": 8, "num_target_layers": 36, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}, "sliding_window": null,
  "tie_word_embeddings": false, "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
})";

// z-lab/Qwen3.8-27B-DFlash2 config.json (published; dflash.md §3.1).
const char* const kDFlashV2 = R"({
  "architectures": ["DFlash2DraftModel"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": null,
  "is_causal": false,
  "dflash_config": {"block_size": 8, "conv_group_size": 16, "conv_kernel_size": 2, "mask_token_id": 248070,
                    "selector_rank": 256, "selector_top_k": 16, "target_layer_ids": [5, 19, 33, 47, 61]},
  "dtype": "bfloat16", "eos_token_id": 248044, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
  "initializer_range": 0.02, "intermediate_size": 17408,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                  "sliding_attention"],
  "max_position_embeddings": 262144, "max_window_layers": 5, "model_type": "qwen3", "num_attention_heads": 32,
  "num_hidden_layers": 5, "num_key_value_heads": 8, "num_target_layers": 64, "pad_token_id": 248044,
  "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000000, "rope_type": "default"},
  "sliding_window": 2048, "tie_word_embeddings": false, "transformers_version": "5.15.0", "use_cache": true,
  "use_sliding_window": true, "vocab_size": 248320
})";

TEST(DFlashConfig, TapRuleMatchesThePythonReference) {
  // Values of build_target_layer_ids (round() is Python's: halves to even), computed with CPython.
  const struct {
    uint32_t n, l;
    std::vector<uint32_t> ids;
  } cases[] = {
      {36, 5, {1, 9, 17, 25, 33}}, {36, 1, {18}},         {7, 3, {1, 2, 4}},
      {9, 3, {1, 4, 6}},           {64, 5, {1, 16, 31, 46, 61}}, {28, 4, {1, 9, 17, 25}},
      {48, 6, {1, 10, 19, 27, 36, 45}}, {40, 8, {1, 6, 11, 16, 22, 27, 32, 37}}, {5, 2, {1, 2}},
      {11, 5, {1, 3, 4, 6, 8}},    {13, 7, {1, 2, 4, 6, 7, 8, 10}},
  };
  for (const auto& c : cases) EXPECT_EQ(default_target_layer_ids(c.n, c.l), c.ids) << c.n << " " << c.l;
}

TEST(DFlashConfig, PublishedV1Drafter) {
  auto c = parse_dflash_config(json::parse(kDFlashV1), "drafter/config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->version, 1u);
  EXPECT_EQ(c->layers.hidden_size, 4096u);
  EXPECT_EQ(c->layers.num_hidden_layers, 5u);
  EXPECT_EQ(c->layers.rope_theta, 1e6f);
  EXPECT_EQ(c->block_size, 16u);
  EXPECT_EQ(c->num_target_layers, 36u);
  EXPECT_EQ(c->target_layer_ids, (std::vector<uint32_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(c->mask_token_id, 151669u);
  EXPECT_FALSE(c->causal.has_value());
  EXPECT_EQ(c->causal_layer, std::vector<bool>(5, false));  // full attention: non-causal
  EXPECT_FALSE(c->target_hidden_size.has_value());
  EXPECT_EQ(c->conv_kernel_size, 0u);

  json j = json::parse(kDFlashV1);  // without target_layer_ids the rule of dflash.md §1.2 gives the same
  j["dflash_config"].erase("target_layer_ids");
  j.erase("block_size");
  j["dflash_config"]["block_size"] = 16;
  j["target_hidden_size"] = 2560;
  auto rule = parse_dflash_config(j, "drafter/config.json");
  ASSERT_TRUE(rule.ok()) << rule.error().message();
  EXPECT_EQ(rule->target_layer_ids, (std::vector<uint32_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(rule->block_size, 16u);
  EXPECT_EQ(rule->target_hidden_size, 2560u);
}

TEST(DFlashConfig, PublishedV2Drafter) {
  auto c = parse_dflash_config(json::parse(kDFlashV2), "drafter/config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->version, 2u);
  EXPECT_EQ(c->block_size, 8u);
  EXPECT_EQ(c->num_target_layers, 64u);
  EXPECT_EQ(c->target_layer_ids, (std::vector<uint32_t>{5, 19, 33, 47, 61}));
  EXPECT_EQ(c->mask_token_id, 248070u);
  EXPECT_EQ(c->conv_kernel_size, 2u);
  EXPECT_EQ(c->conv_group_size, 16u);
  EXPECT_EQ(c->selector_rank, 256u);
  EXPECT_EQ(c->selector_top_k, 16u);
  EXPECT_EQ(c->final_logit_softcapping, 0.0f);
  EXPECT_EQ(c->output_multiplier, 1.0f);
  EXPECT_EQ(c->causal, false);
  EXPECT_EQ(c->causal_layer, std::vector<bool>(5, false));  // sliding, but is_causal says false
  EXPECT_EQ(c->layers.rope_theta, 1e7f);
  EXPECT_EQ(c->layers.sliding_window, 2048u);
  EXPECT_EQ(c->layers.sliding_layer, std::vector<bool>(5, true));
  EXPECT_FALSE(c->layers.bos_token_id.has_value());

  json j = json::parse(kDFlashV2);  // Muse-Glimmer-30B-DFlash2 sets the selector's value transform
  j["dflash_config"]["final_logit_softcapping"] = 20.0;
  j["dflash_config"]["output_multiplier"] = 0.19611613513818404;
  auto muse = parse_dflash_config(j, "drafter/config.json");
  ASSERT_TRUE(muse.ok()) << muse.error().message();
  EXPECT_EQ(muse->final_logit_softcapping, 20.0f);
  EXPECT_EQ(muse->output_multiplier, static_cast<float>(0.19611613513818404));
}

// Causality per layer as z-lab's Qwen3DFlashAttention sets it: an explicit top-level is_causal (or vLLM's
// dflash_config.causal) for every layer; else sliding_attention layers causal, full_attention ones not.
TEST(DFlashConfig, CausalityPerLayer) {
  const auto causal = [](const json& j) {
    auto c = parse_dflash_config(j, "drafter/config.json");
    EXPECT_TRUE(c.ok()) << c.error().message();
    return c.ok() ? c->causal_layer : std::vector<bool>{};
  };
  json v2 = json::parse(kDFlashV2);  // five sliding layers
  v2.erase("is_causal");
  EXPECT_EQ(causal(v2), std::vector<bool>(5, true));
  v2["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                       "full_attention"};
  EXPECT_EQ(causal(v2), (std::vector<bool>{true, false, true, false, false}));
  v2["is_causal"] = true;
  EXPECT_EQ(causal(v2), std::vector<bool>(5, true));
  v2["is_causal"] = false;
  EXPECT_EQ(causal(v2), std::vector<bool>(5, false));
  v2.erase("is_causal");
  v2["dflash_config"]["causal"] = false;
  EXPECT_EQ(causal(v2), std::vector<bool>(5, false));
  v2["dflash_config"]["causal"] = true;
  EXPECT_EQ(causal(v2), std::vector<bool>(5, true));

  json v1 = json::parse(kDFlashV1);  // without layer_types, Qwen3Config's rule: layers from max_window_layers slide
  v1.erase("layer_types");
  v1["use_sliding_window"] = true;
  v1["sliding_window"] = 4096;
  v1["max_window_layers"] = 3;
  EXPECT_EQ(causal(v1), (std::vector<bool>{false, false, false, true, true}));
}

// The shapes tools/make_dflash_fixture.py writes: v1 with taps by the rule and a full then a sliding
// layer, v2 with everything in dflash_config and a sliding then a full layer; neither says is_causal.
TEST(DFlashConfig, FixtureStyleDrafters) {
  const json base = {{"architectures", {"DFlashDraftModel"}}, {"model_type", "qwen3"}, {"hidden_size", 128},
                     {"intermediate_size", 256}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                     {"num_key_value_heads", 2}, {"head_dim", 32}, {"rms_norm_eps", 1e-6}, {"rope_theta", 100000.0},
                     {"vocab_size", 1000}, {"attention_bias", false}, {"tie_word_embeddings", false}};
  json v1 = base;
  v1["block_size"] = 8;
  v1["num_target_layers"] = 6;
  v1["dflash_config"] = {{"mask_token_id", 999}};
  v1["layer_types"] = {"full_attention", "sliding_attention"};
  v1["sliding_window"] = 6;
  v1["use_sliding_window"] = true;
  auto c1 = parse_dflash_config(v1, "v1/config.json");
  ASSERT_TRUE(c1.ok()) << c1.error().message();
  EXPECT_EQ(c1->version, 1u);
  EXPECT_EQ(c1->block_size, 8u);
  EXPECT_EQ(c1->target_layer_ids, (std::vector<uint32_t>{1, 3}));  // round(1 + i·2/1)
  EXPECT_EQ(c1->layers.rope_theta, 100000.0f);
  EXPECT_EQ(c1->layers.sliding_layer, (std::vector<bool>{false, true}));
  EXPECT_EQ(c1->layers.sliding_window, 6u);
  EXPECT_EQ(c1->causal_layer, (std::vector<bool>{false, true}));

  json v2 = base;
  v2["architectures"] = {"DFlash2DraftModel"};
  v2["layer_types"] = {"sliding_attention", "full_attention"};
  v2["sliding_window"] = 6;  // without use_sliding_window: the parser's leniency (Qwen3 section)
  v2["dflash_config"] = {{"block_size", 8}, {"num_target_layers", 6}, {"target_layer_ids", {0, 2, 4}},
                         {"mask_token_id", 999}, {"conv_kernel_size", 2}, {"conv_group_size", 16},
                         {"selector_rank", 16}, {"selector_top_k", 8}, {"final_logit_softcapping", 20.0},
                         {"output_multiplier", 0.5}};
  auto c2 = parse_dflash_config(v2, "v2/config.json");
  ASSERT_TRUE(c2.ok()) << c2.error().message();
  EXPECT_EQ(c2->version, 2u);
  EXPECT_EQ(c2->num_target_layers, 6u);
  EXPECT_EQ(c2->target_layer_ids, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(c2->layers.sliding_window, 6u);
  EXPECT_EQ(c2->layers.sliding_layer, (std::vector<bool>{true, false}));
  EXPECT_EQ(c2->causal_layer, (std::vector<bool>{true, false}));
  EXPECT_EQ(c2->conv_group_size, 16u);
  EXPECT_EQ(c2->selector_rank, 16u);
  EXPECT_EQ(c2->selector_top_k, 8u);
  EXPECT_EQ(c2->final_logit_softcapping, 20.0f);
  EXPECT_EQ(c2->output_multiplier, 0.5f);
}

TEST(DFlashConfig, MalformedConfigs) {
  const std::vector<BadConfig> cases = {
      {"tap beyond the target", [](json& j) { j["dflash_config"]["target_layer_ids"] = {1, 9, 36}; },
       ErrorKind::kFormat,
       {"key \"dflash_config.target_layer_ids[2]\": tap layer 36 is beyond the target's 36 layers"}},
      {"taps empty", [](json& j) { j["dflash_config"]["target_layer_ids"] = json::array(); }, ErrorKind::kFormat,
       {"key \"dflash_config.target_layer_ids\": expected a non-empty list"}},
      {"mask id outside vocab", [](json& j) { j["dflash_config"]["mask_token_id"] = 151936; }, ErrorKind::kFormat,
       {"key \"dflash_config.mask_token_id\": token id 151936 is outside the vocabulary (vocab_size 151936)"}},
      {"mask id missing", [](json& j) { j["dflash_config"].erase("mask_token_id"); }, ErrorKind::kNotFound,
       {"key \"dflash_config.mask_token_id\": missing"}},
      {"block sizes disagreeing", [](json& j) { j["dflash_config"]["block_size"] = 8; }, ErrorKind::kFormat,
       {"key \"dflash_config.block_size\": 8 disagrees with the top-level \"block_size\" = 16"}},
      {"block size 1", [](json& j) { j["block_size"] = 1; }, ErrorKind::kFormat,
       {"key \"block_size\": expected an integer in [2, 1024], found 1"}},
      {"no taps and no target depth",
       [](json& j) {
         j["dflash_config"].erase("target_layer_ids");
         j.erase("num_target_layers");
       },
       ErrorKind::kNotFound, {"key \"num_target_layers\": missing", "taps are unknown"}},
      {"target too shallow for the rule",
       [](json& j) {
         j["dflash_config"].erase("target_layer_ids");
         j["num_target_layers"] = 3;
       },
       ErrorKind::kFormat, {"key \"num_target_layers\": 3 is too shallow"}},
      {"attention sinks", [](json& j) { j["dflash_config"]["attention_sink_bias"] = true; }, ErrorKind::kUnsupported,
       {"key \"dflash_config.attention_sink_bias\": is not supported"}},
      {"partial rope", [](json& j) { j["partial_rotary_factor"] = 0.5; }, ErrorKind::kUnsupported,
       {"key \"partial_rotary_factor\""}},
      {"causal keys disagreeing",
       [](json& j) {
         j["is_causal"] = false;
         j["dflash_config"]["causal"] = true;
       },
       ErrorKind::kFormat, {"key \"dflash_config.causal\": true disagrees with is_causal = false"}},
      {"DFlash2 architecture without conv keys", [](json& j) { j["architectures"] = {"DFlash2DraftModel"}; },
       ErrorKind::kNotFound, {"key \"dflash_config.conv_kernel_size\": missing, but architectures names"}},
      {"DFlash2 key without conv_kernel_size", [](json& j) { j["dflash_config"]["selector_top_k"] = 16; },
       ErrorKind::kFormat, {"key \"dflash_config.selector_top_k\": is a DFlash 2 key"}},
      {"missing Qwen3 shape", [](json& j) { j.erase("intermediate_size"); }, ErrorKind::kNotFound,
       {"key \"intermediate_size\": missing"}},
  };
  expect_rejected(json::parse(kDFlashV1), cases, parse_dflash_config);

  const std::vector<BadConfig> v2_cases = {
      {"group not dividing hidden", [](json& j) { j["dflash_config"]["conv_group_size"] = 48; }, ErrorKind::kFormat,
       {"key \"dflash_config.conv_group_size\": 48 does not divide hidden_size 5120"}},
      {"group missing", [](json& j) { j["dflash_config"].erase("conv_group_size"); }, ErrorKind::kNotFound,
       {"key \"dflash_config.conv_group_size\": missing"}},
      {"conv taps zero", [](json& j) { j["dflash_config"]["conv_kernel_size"] = 0; }, ErrorKind::kFormat,
       {"key \"dflash_config.conv_kernel_size\": expected an integer in [1, 64], found 0"}},
      {"tap beyond 64 layers", [](json& j) { j["dflash_config"]["target_layer_ids"][4] = 64; }, ErrorKind::kFormat,
       {"key \"dflash_config.target_layer_ids[4]\": tap layer 64 is beyond the target's 64 layers"}},
      {"softcap negative", [](json& j) { j["dflash_config"]["final_logit_softcapping"] = -1.0; }, ErrorKind::kFormat,
       {"key \"dflash_config.final_logit_softcapping\""}},
  };
  expect_rejected(json::parse(kDFlashV2), v2_cases, parse_dflash_config);
}

// ---- Files ----

TEST(HfConfigFiles, LoadFromDiskAndRejectDuplicateKeys) {
  testing::TempDir dir;
  testing::write_file(dir.file("config.json"), kQwen3Classic);
  auto c = load_qwen3_config(dir.file("config.json"));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->hidden_size, 1024u);

  testing::write_file(dir.file("dup.json"), R"({"hidden_size": 1024, "hidden_size": 2048})");
  auto dup = load_qwen3_config(dir.file("dup.json"));
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.error().message(), HasSubstr("dup.json: duplicate key \"hidden_size\""));

  auto missing = load_modernbert_config(dir.file("absent.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("absent.json"));

  testing::write_file(dir.file("trunc.json"), R"({"hidden_size": 10)");
  auto trunc = load_dflash_config(dir.file("trunc.json"));
  ASSERT_FALSE(trunc.ok());
  EXPECT_THAT(trunc.error().message(), HasSubstr("trunc.json: invalid JSON"));
}

}  // namespace
}  // namespace tandem::io

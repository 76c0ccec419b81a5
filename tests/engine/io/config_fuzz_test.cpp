// engine/io config readers under random corruption: mutated config.json and rl_agent_config.json text
// goes through the strict parser and every config reader; each must return a value or an error naming
// the file, and never throw or crash (the sanitizer run checks memory safety). Seeded, so reproducible.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/io/hf_config.h"
#include "engine/io/json_parse_impl.h"
#include "engine/io/laya_config.h"

namespace tandem::io {
namespace {

const char* const kSeeds[] = {
    // A DFlash 2 drafter (also a valid Qwen3 config).
    R"({"architectures": ["DFlash2DraftModel"], "is_causal": false, "dflash_config": {"block_size": 8,
      "conv_group_size": 16, "conv_kernel_size": 2, "mask_token_id": 248070, "selector_rank": 256,
      "selector_top_k": 16, "target_layer_ids": [5, 19, 33, 47, 61]}, "eos_token_id": [248044, 1],
      "head_dim": 128, "hidden_size": 5120, "intermediate_size": 17408, "layer_types": ["sliding_attention",
      "sliding_attention", "full_attention", "sliding_attention", "sliding_attention"], "num_attention_heads": 32,
      "num_hidden_layers": 5, "num_key_value_heads": 8, "num_target_layers": 64, "rms_norm_eps": 1e-06,
      "rope_parameters": {"rope_theta": 10000000, "rope_type": "default"}, "sliding_window": 2048,
      "use_sliding_window": true, "vocab_size": 248320})",
    // A transformers 5 ModernBERT.
    R"({"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4,
      "vocab_size": 50368, "global_attn_every_n_layers": 3, "local_attention": 128, "norm_eps": 1e-05,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {"full_attention": {"rope_theta": 160000.0, "rope_type": "default"},
      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}, "cls_token_id": 50281})",
    // Laya.
    R"({"head_layers": 2, "max_len": 512, "head_max_len": 192, "temperature": {"choice": 1.6, "score": 1.2,
      "noul": 1.9}, "temperature_by_options": {"choice": {"2": 1.1, "4": 1.3}, "score": {"5": 0.9}}})",
};

template <typename T>
void expect_clean(const Result<T>& r) {
  if (!r.ok()) {
    EXPECT_EQ(r.error().message().rfind("fuzz.json", 0), 0u) << r.error().message();
  }
}

TEST(ConfigFuzz, MutatedConfigsNeverThrowOrCrash) {
  std::mt19937_64 rng(7);
  const char tokens[] = "{}[],:\"-.0123456789eE \\tfnul";
  int parsed = 0, accepted = 0;
  for (const char* seed : kSeeds) {
    for (int round = 0; round < 1500; ++round) {
      std::string text = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits; ++k) {
        const size_t at = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text[at] = tokens[rng() % (sizeof(tokens) - 1)];
            break;
          case 1:
            text.erase(at, 1 + rng() % 8);
            break;
          default:
            text.insert(at, 1, tokens[rng() % (sizeof(tokens) - 1)]);
            break;
        }
        if (text.empty()) text = "{";
      }
      auto j = parse_json_strict(text, "fuzz.json", 64);
      expect_clean(j);
      if (!j.ok()) continue;
      ++parsed;
      const auto modernbert = parse_modernbert_config(*j, "fuzz.json");
      const auto qwen3 = parse_qwen3_config(*j, "fuzz.json");
      const auto dflash = parse_dflash_config(*j, "fuzz.json");
      const auto laya = parse_laya_config(*j, "fuzz.json");
      expect_clean(modernbert);
      expect_clean(qwen3);
      expect_clean(dflash);
      expect_clean(laya);
      accepted += modernbert.ok() + qwen3.ok() + dflash.ok() + laya.ok();
    }
  }
  std::printf("%d mutants parsed as JSON, %d config reads accepted\n", parsed, accepted);
  EXPECT_GT(parsed, 100);
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace tandem::io

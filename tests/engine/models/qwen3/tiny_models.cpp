// Random tiny targets and drafters for tests, built through the same config parsers as real checkpoints.
#include "tests/engine/models/qwen3/tiny_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/ir/sampling.h"

namespace tandem::testing {

uint64_t Rand::next() { return ir::mix64(state_++); }
double Rand::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
float Rand::symmetric(float scale) { return static_cast<float>((2.0 * uniform() - 1.0) * scale); }
uint32_t Rand::below(uint32_t n) { return static_cast<uint32_t>(uniform() * n); }
std::vector<float> Rand::fill(size_t n, float scale) {
  std::vector<float> v(n);
  for (float& x : v) x = symmetric(scale);
  return v;
}

namespace {

using json = nlohmann::json;

std::vector<float> around_one(Rand& r, size_t n, float spread) {
  std::vector<float> v = r.fill(n, spread);
  for (float& x : v) x += 1.0f;
  return v;
}

float fan_in(uint32_t n) { return 1.5f / std::sqrt(static_cast<float>(n)); }

json layer_json(uint32_t vocab, uint32_t hidden, uint32_t layers, uint32_t heads, uint32_t kv, uint32_t hd,
                uint32_t ffn, std::optional<uint32_t> window, float theta) {
  json j = {{"vocab_size", vocab},       {"hidden_size", hidden},  {"intermediate_size", ffn},
            {"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv},
            {"head_dim", hd},            {"rms_norm_eps", 1e-6},    {"rope_theta", theta},
            {"max_position_embeddings", 4096}, {"eos_token_id", 1}};
  if (window) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = *window;
    json types = json::array();
    for (uint32_t l = 0; l < layers; ++l) types.push_back(l % 2 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  return j;
}

// The Qwen3 layer tensors under `prefix`.
void add_layer(std::vector<io::HostTensor>& out, Rand& r, const std::string& prefix, uint32_t hidden,
               uint32_t heads, uint32_t kv, uint32_t hd, uint32_t ffn, bool bias, DType dtype) {
  const uint64_t h = hidden, q = uint64_t{heads} * hd, k = uint64_t{kv} * hd;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape, std::vector<float> v) {
    out.push_back(io::HostTensor::from_f32(prefix + name, std::move(shape), v, dtype));
  };
  add("input_layernorm.weight", {h}, around_one(r, h, 0.2f));
  add("post_attention_layernorm.weight", {h}, around_one(r, h, 0.2f));
  add("self_attn.q_proj.weight", {q, h}, r.fill(q * h, fan_in(hidden)));
  add("self_attn.k_proj.weight", {k, h}, r.fill(k * h, fan_in(hidden)));
  add("self_attn.v_proj.weight", {k, h}, r.fill(k * h, fan_in(hidden)));
  add("self_attn.o_proj.weight", {h, q}, r.fill(h * q, fan_in(heads * hd)));
  add("self_attn.q_norm.weight", {hd}, around_one(r, hd, 0.2f));
  add("self_attn.k_norm.weight", {hd}, around_one(r, hd, 0.2f));
  add("mlp.gate_proj.weight", {ffn, h}, r.fill(ffn * h, fan_in(hidden)));
  add("mlp.up_proj.weight", {ffn, h}, r.fill(ffn * h, fan_in(hidden)));
  add("mlp.down_proj.weight", {h, ffn}, r.fill(h * ffn, fan_in(ffn)));
  if (bias) {
    add("self_attn.q_proj.bias", {q}, r.fill(q, 0.1f));
    add("self_attn.k_proj.bias", {k}, r.fill(k, 0.1f));
    add("self_attn.v_proj.bias", {k}, r.fill(k, 0.1f));
    add("self_attn.o_proj.bias", {h}, r.fill(h, 0.1f));
  }
}

std::shared_ptr<io::HostTensors> source_of(const std::vector<io::HostTensor>& tensors) {
  auto s = std::make_shared<io::HostTensors>();
  for (const auto& t : tensors) s->add(t);
  return s;
}

json target_json(const TargetShape& s) {
  json j = layer_json(s.vocab, s.hidden, s.layers, s.heads, s.kv_heads, s.head_dim, s.ffn, s.window, s.rope_theta);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["tie_word_embeddings"] = s.tied;
  j["attention_bias"] = s.bias;
  return j;
}

json drafter_json(const io::Qwen3Config& target, const DrafterShape& s) {
  json j = layer_json(target.vocab_size, target.hidden_size, s.layers, s.heads, s.kv_heads, s.head_dim, s.ffn,
                      s.window, target.rope_theta);
  j["architectures"] = {s.version == 2 ? "DFlash2DraftModel" : "DFlashDraftModel"};
  j["num_target_layers"] = target.num_hidden_layers;
  j["block_size"] = s.block;
  json d = {{"target_layer_ids", s.taps}, {"mask_token_id", s.mask}};
  if (s.version == 2) {
    d["conv_kernel_size"] = s.conv_taps;
    d["conv_group_size"] = s.group;
    d["selector_rank"] = s.rank;
    d["selector_top_k"] = s.top_k;
    d["final_logit_softcapping"] = s.softcap;
    d["output_multiplier"] = s.out_mult;
  }
  j["dflash_config"] = d;
  if (s.is_causal) j["is_causal"] = *s.is_causal;
  return j;
}

}  // namespace

TinyTarget random_target(const TargetShape& s, uint64_t seed, DType dtype) {
  Rand r(seed);
  TinyTarget t;
  const json j = target_json(s);
  auto cfg = io::parse_qwen3_config(j, "tiny target");
  EXPECT_TRUE(cfg.ok()) << cfg.error().message();
  t.cfg = *cfg;
  const uint64_t h = s.hidden, v = s.vocab;
  const float head_scale = std::sqrt(12.0f / static_cast<float>(s.hidden));
  t.tensors.push_back(io::HostTensor::from_f32("model.embed_tokens.weight", {v, h}, r.fill(v * h, head_scale), dtype));
  for (uint32_t l = 0; l < s.layers; ++l) {
    add_layer(t.tensors, r, "model.layers." + std::to_string(l) + ".", s.hidden, s.heads, s.kv_heads, s.head_dim,
              s.ffn, s.bias, dtype);
  }
  t.tensors.push_back(io::HostTensor::from_f32("model.norm.weight", {h}, around_one(r, h, 0.2f), dtype));
  if (!s.tied) {
    t.tensors.push_back(io::HostTensor::from_f32("lm_head.weight", {v, h}, r.fill(v * h, head_scale), dtype));
  }
  t.weights = source_of(t.tensors);
  t.config = j;
  return t;
}

TinyDrafter random_drafter(const io::Qwen3Config& target, const DrafterShape& s, uint64_t seed) {
  Rand r(seed);
  TinyDrafter d;
  const json j = drafter_json(target, s);
  auto cfg = io::parse_dflash_config(j, "tiny drafter");
  EXPECT_TRUE(cfg.ok()) << cfg.error().message();
  d.cfg = *cfg;
  const uint64_t h = target.hidden_size, tw = s.taps.size() * h;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape, std::vector<float> v) {
    d.tensors.push_back(io::HostTensor::from_f32(name, std::move(shape), v));
  };
  add("fc.weight", {h, tw}, r.fill(h * tw, fan_in(static_cast<uint32_t>(tw))));
  add("hidden_norm.weight", {h}, around_one(r, h, 0.2f));
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    add_layer(d.tensors, r, prefix, target.hidden_size, s.heads, s.kv_heads, s.head_dim, s.ffn, false, DType::kF32);
    if (s.version != 2) continue;
    const uint64_t taps = s.conv_taps, groups = h / s.group;
    for (const char* conv : {"attention_conv.", "mlp_conv."}) {
      std::vector<float> base = r.fill(2 * taps * h, 0.3f);
      for (uint64_t st = 0; st < 2; ++st) {
        for (uint64_t c = 0; c < h; ++c) base[(st * taps) * h + c] += 1.0f;  // tap 0 near identity
      }
      add(prefix + conv + "base_kernel", {2, taps, h}, base);
      add(prefix + conv + "kernel_projection.weight", {2 * taps * groups, h}, r.fill(2 * taps * groups * h, 0.1f));
    }
  }
  add("norm.weight", {h}, around_one(r, h, 0.2f));
  if (s.version == 2) {
    const uint64_t v = target.vocab_size, rank = s.rank;
    // The public layout; one codebook bare (as z-lab saves them), one with the ".weight" some exports add.
    add("candidate_selector.hidden_projection.weight", {rank, h}, r.fill(rank * h, fan_in(target.hidden_size)));
    add("candidate_selector.predecessor_codebook", {v, rank}, r.fill(v * rank, 1.0f));
    add("candidate_selector.successor_codebook.weight", {v, rank}, r.fill(v * rank, 1.0f));
  }
  d.weights = source_of(d.tensors);
  d.config = j;
  return d;
}

void put(std::vector<io::HostTensor>& tensors, io::HostTensors& source, io::HostTensor t) {
  auto it = std::find_if(tensors.begin(), tensors.end(), [&](const io::HostTensor& x) { return x.name == t.name; });
  if (it != tensors.end()) {
    *it = t;
  } else {
    tensors.push_back(t);
  }
  source.add(std::move(t));
}

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tandem-dec-" + name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

namespace {

void write_config(const std::string& dir, const json& j) {
  std::ofstream(dir + "/config.json") << j.dump(2);
}

void write_tensors(const std::string& dir, const std::vector<io::HostTensor>& tensors, int shards) {
  if (shards <= 1) {
    const Status st = io::write_safetensors(dir + "/model.safetensors", tensors);
    ASSERT_TRUE(st.ok()) << st.error().message();
    return;
  }
  json map = json::object();
  for (int s = 0; s < shards; ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards);
    std::vector<io::HostTensor> part;
    for (size_t i = static_cast<size_t>(s); i < tensors.size(); i += static_cast<size_t>(shards)) {
      part.push_back(tensors[i]);
      map[tensors[i].name] = file;
    }
    const Status st = io::write_safetensors(dir + "/" + file, part);
    ASSERT_TRUE(st.ok()) << st.error().message();
  }
  const json index = {{"metadata", json::object()}, {"weight_map", map}};
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump(2);
}

}  // namespace

void write_target_dir(const std::string& dir, const TinyTarget& t, int shards) {
  std::filesystem::create_directories(dir);
  write_config(dir, t.config);
  write_tensors(dir, t.tensors, shards);
}

void write_drafter_dir(const std::string& dir, const TinyDrafter& d) {
  std::filesystem::create_directories(dir);
  write_config(dir, d.config);
  write_tensors(dir, d.tensors, 1);
}

}  // namespace tandem::testing

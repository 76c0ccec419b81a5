// Random Qwen3 weights: every matrix uniform with variance 1/fan_in (unit gain), norms near 1, written as
// BF16 by several threads (the 8B shape is 16 GB).
#include "bench/cuda_decoder/random_target.h"

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/dtype.h"

namespace tandem::bench {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t random_mix(uint64_t x) { return mix(x); }

io::HostTensor random_bf16(const std::string& name, std::vector<uint64_t> shape, float center, float half,
                           uint64_t seed) {
  io::HostTensor t;
  t.name = name;
  t.dtype = DType::kBF16;
  t.shape = shape;
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  t.bytes.resize(n * 2);
  auto* out = reinterpret_cast<uint16_t*>(t.bytes.data());
  const unsigned threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < threads; ++w) {
    pool.emplace_back([=] {
      for (uint64_t i = w; i < n; i += threads) {
        const double u = static_cast<double>(mix(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 11) * 0x1.0p-53;
        out[i] = float_to_bf16(center + half * static_cast<float>(2.0 * u - 1.0));
      }
    });
  }
  for (std::thread& t2 : pool) t2.join();
  return t;
}

DecoderShape DecoderShape::tiny() {
  DecoderShape s;
  s.layers = 2;
  s.hidden = 128;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.ffn = 256;
  s.vocab = 512;
  s.max_positions = 4096;
  return s;
}

io::Qwen3Config qwen3_config(const DecoderShape& s) {
  io::Qwen3Config c;
  c.vocab_size = s.vocab;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.ffn;
  c.num_hidden_layers = s.layers;
  c.num_attention_heads = s.heads;
  c.num_key_value_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = s.rope_theta;
  c.max_position_embeddings = s.max_positions;
  c.tie_word_embeddings = false;
  c.sliding_layer.assign(s.layers, false);
  return c;
}

std::unique_ptr<io::HostTensors> random_target(const DecoderShape& s, uint64_t seed) {
  auto w = std::make_unique<io::HostTensors>();
  uint64_t k = seed;
  const float h = static_cast<float>(s.hidden);
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols) {
    w->add(random_bf16(name, {rows, cols}, 0.0f, std::sqrt(3.0f / static_cast<float>(cols)), mix(++k)));
  };
  auto norm = [&](const std::string& name, uint64_t n) { w->add(random_bf16(name, {n}, 1.0f, 0.1f, mix(++k))); };
  w->add(random_bf16("model.embed_tokens.weight", {s.vocab, s.hidden}, 0.0f, 1.0f, mix(++k)));
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    norm(p + "input_layernorm.weight", s.hidden);
    norm(p + "post_attention_layernorm.weight", s.hidden);
    matrix(p + "self_attn.q_proj.weight", uint64_t{s.heads} * s.head_dim, s.hidden);
    matrix(p + "self_attn.k_proj.weight", uint64_t{s.kv_heads} * s.head_dim, s.hidden);
    matrix(p + "self_attn.v_proj.weight", uint64_t{s.kv_heads} * s.head_dim, s.hidden);
    matrix(p + "self_attn.o_proj.weight", s.hidden, uint64_t{s.heads} * s.head_dim);
    norm(p + "self_attn.q_norm.weight", s.head_dim);
    norm(p + "self_attn.k_norm.weight", s.head_dim);
    matrix(p + "mlp.gate_proj.weight", s.ffn, s.hidden);
    matrix(p + "mlp.up_proj.weight", s.ffn, s.hidden);
    matrix(p + "mlp.down_proj.weight", s.hidden, s.ffn);
  }
  norm("model.norm.weight", s.hidden);
  matrix("lm_head.weight", s.vocab, s.hidden);
  (void)h;
  return w;
}

}  // namespace tandem::bench

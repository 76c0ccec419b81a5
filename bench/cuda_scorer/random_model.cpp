// Random weights scaled by how the graph reads each one, so activations stay ordinary.
#include "bench/cuda_scorer/random_model.h"

#include <cmath>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/models/decision/compat_graph_impl.h"

namespace tandem::bench {
namespace {

namespace decision = models::decision;

io::ModernBertConfig encoder(bool tiny) {
  io::ModernBertConfig c;
  c.vocab_size = 50368;
  c.hidden_size = tiny ? 128 : 1024;
  c.intermediate_size = tiny ? 192 : 2624;
  c.num_hidden_layers = tiny ? 4 : 28;
  c.num_attention_heads = tiny ? 2 : 16;
  c.head_dim = 64;
  c.local_attention = 128;
  c.global_layer.resize(c.num_hidden_layers);
  for (uint32_t i = 0; i < c.num_hidden_layers; ++i) c.global_layer[i] = i % 3 == 0;
  c.cls_token_id = 50281;
  c.sep_token_id = 50282;
  c.pad_token_id = 50283;
  c.mask_token_id = 50284;
  return c;
}

// How the graph reads each weight decides its random values: GEMM matrices of unit gain (uniform with
// variance 1/fan_in), norm scales near 1, small biases and norm shifts, unit-variance tables. The values
// only need to keep activations ordinary; a timing does not look at them.
struct Fill {
  float center = 0.0f, half_width = 1.0f;
};

std::map<std::string, Fill> fills(const ir::Graph& g) {
  std::map<std::string, Fill> out;
  auto set = [&](ir::WeightId id, Fill f) {
    for (const std::string& part : g.weight(id).parts) out[part] = f;
  };
  for (const ir::Op& op : g.ops) {
    if (const auto* gm = std::get_if<ir::Gemm>(&op)) {
      set(gm->w, {0.0f, std::sqrt(3.0f / static_cast<float>(g.weight(gm->w).shape[1]))});
      if (gm->b) set(*gm->b, {0.0f, 0.05f});
    } else if (const auto* ln = std::get_if<ir::LayerNorm>(&op)) {
      set(ln->w, {1.0f, 0.1f});
      if (ln->b) set(*ln->b, {0.0f, 0.05f});
    }
  }
  return out;
}

// splitmix64 mapped to [center - half_width, center + half_width).
void fill_uniform(std::vector<float>& v, Fill f, uint64_t& state) {
  for (float& x : v) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = f.center + f.half_width * (static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

}  // namespace

Result<std::unique_ptr<decision::DecisionModel>> make_model(bool tiny) {
  const io::ModernBertConfig enc = encoder(tiny);
  const io::LayaAgentConfig laya;
  TANDEM_ASSIGN(const ir::Graph graph, decision::build_compat_graph(enc, laya));
  const std::map<std::string, Fill> how = fills(graph);
  auto tensors = std::make_unique<io::HostTensors>();
  uint64_t state = 42;
  for (const ir::WeightRef& w : graph.weights) {
    for (const std::string& part : w.parts) {
      std::vector<uint64_t> shape = w.shape;
      shape[0] /= w.parts.size();
      uint64_t n = 1;
      for (uint64_t d : shape) n *= d;
      std::vector<float> v(n);
      const auto it = how.find(part);
      fill_uniform(v, it != how.end() ? it->second : Fill{0.0f, 1.7320508f}, state);
      tensors->add(io::HostTensor::from_f32(part, shape, v, DType::kF16));
    }
  }
  tensors->add(io::HostTensor::from_f32("temperature", {3}, {1.6369f, 1.2514f, 1.9834f}, DType::kF32));
  return decision::DecisionModel::from_parts(std::move(tensors), enc, laya);
}

}  // namespace tandem::bench

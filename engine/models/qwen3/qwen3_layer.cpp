// One Qwen3 decoder layer as IR ops (dflash.md §1.5; HF Qwen3DecoderLayer semantics).
#include "engine/models/qwen3/qwen3_layer.h"

namespace tandem::models::qwen3 {

LayerShape layer_shape(const io::Qwen3Config& cfg, uint32_t layer) {
  LayerShape s;
  s.hidden = cfg.hidden_size;
  s.heads = cfg.num_attention_heads;
  s.kv_heads = cfg.num_key_value_heads;
  s.head_dim = cfg.head_dim;
  s.ffn = cfg.intermediate_size;
  s.eps = cfg.rms_norm_eps;
  s.rope_theta = cfg.rope_theta;
  s.bias = cfg.attention_bias;
  if (layer < cfg.sliding_layer.size() && cfg.sliding_layer[layer] && cfg.sliding_window) {
    s.window = cfg.sliding_window;
  }
  return s;
}

LayerWeights add_layer_weights(ir::Graph& g, const LayerShape& s, const std::string& prefix, bool fused_qkv) {
  const uint64_t h = s.hidden;
  const std::string attn = prefix + "self_attn.";
  const std::string mlp = prefix + "mlp.";
  LayerWeights w;
  w.in_norm = g.add_weight({prefix + "input_layernorm.weight"}, {h});
  w.post_norm = g.add_weight({prefix + "post_attention_layernorm.weight"}, {h});
  const std::vector<uint64_t> qkv_rows{s.q_width(), s.kv_width(), s.kv_width()};
  if (fused_qkv) {
    w.qkv = g.add_stacked_weight({attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"}, qkv_rows,
                                 {s.qkv_width(), h});
  } else {
    w.q = g.add_weight({attn + "q_proj.weight"}, {s.q_width(), h});
    w.k = g.add_weight({attn + "k_proj.weight"}, {s.kv_width(), h});
    w.v = g.add_weight({attn + "v_proj.weight"}, {s.kv_width(), h});
  }
  w.o = g.add_weight({attn + "o_proj.weight"}, {h, s.q_width()});
  w.q_norm = g.add_weight({attn + "q_norm.weight"}, {s.head_dim});
  w.k_norm = g.add_weight({attn + "k_norm.weight"}, {s.head_dim});
  w.gate_up = g.add_weight({mlp + "gate_proj.weight", mlp + "up_proj.weight"}, {2ull * s.ffn, h});
  w.down = g.add_weight({mlp + "down_proj.weight"}, {h, s.ffn});
  if (s.bias) {
    if (fused_qkv) {
      w.qkv_bias = g.add_stacked_weight({attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"}, qkv_rows,
                                        {s.qkv_width()});
    } else {
      w.q_bias = g.add_weight({attn + "q_proj.bias"}, {s.q_width()});
      w.k_bias = g.add_weight({attn + "k_proj.bias"}, {s.kv_width()});
      w.v_bias = g.add_weight({attn + "v_proj.bias"}, {s.kv_width()});
    }
    w.o_bias = g.add_weight({attn + "o_proj.bias"}, {h});
  }
  return w;
}

KeyValue add_key_value(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u,
                       const std::string& tag) {
  const ir::Rows rows = g.info(u).rows;
  KeyValue kv{g.add_val(rows, s.kv_width(), tag + ".k"), g.add_val(rows, s.kv_width(), tag + ".v")};
  g.add_op(ir::Gemm{u, w.k, w.k_bias, ir::Epilogue::kNone, kv.k});
  g.add_op(ir::HeadRmsNorm{kv.k, w.k_norm, s.kv_heads, s.head_dim, s.eps, 0});
  g.add_op(ir::Rope{kv.k, 0, s.kv_heads, s.head_dim, s.rope_theta});
  g.add_op(ir::Gemm{u, w.v, w.v_bias, ir::Epilogue::kNone, kv.v});
  return kv;
}

void add_key_value_append(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, uint32_t cache,
                          bool stacked, const std::string& tag) {
  if (!stacked) {
    const KeyValue kv = add_key_value(g, s, w, u, tag);
    g.add_op(ir::CacheAppend{kv.k, kv.v, cache, 0, 0});
    return;
  }
  const uint64_t h = s.hidden;
  const uint32_t kv_width = s.kv_width();
  const ir::WeightId kv_w = g.add_stacked_weight({g.weight(w.k).parts.at(0), g.weight(w.v).parts.at(0)},
                                                 {kv_width, kv_width}, {2ull * kv_width, h});
  std::optional<ir::WeightId> kv_b;
  if (w.k_bias && w.v_bias) {
    kv_b = g.add_stacked_weight({g.weight(*w.k_bias).parts.at(0), g.weight(*w.v_bias).parts.at(0)},
                                {kv_width, kv_width}, {2ull * kv_width});
  }
  const ir::Val kv = g.add_val(g.info(u).rows, 2 * kv_width, tag + ".kv");
  g.add_op(ir::Gemm{u, kv_w, kv_b, ir::Epilogue::kNone, kv});
  g.add_op(ir::HeadRmsNorm{kv, w.k_norm, s.kv_heads, s.head_dim, s.eps, 0});
  g.add_op(ir::Rope{kv, 0, s.kv_heads, s.head_dim, s.rope_theta});
  g.add_op(ir::CacheAppend{kv, kv, cache, 0, kv_width});
}

ir::Val add_query(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, const std::string& tag) {
  const ir::Val q = g.add_val(g.info(u).rows, s.q_width(), tag + ".q");
  g.add_op(ir::Gemm{u, w.q, w.q_bias, ir::Epilogue::kNone, q});
  g.add_op(ir::HeadRmsNorm{q, w.q_norm, s.heads, s.head_dim, s.eps, 0});
  g.add_op(ir::Rope{q, 0, s.heads, s.head_dim, s.rope_theta});
  return q;
}

ir::Val add_cache_attention(ir::Graph& g, const LayerShape& s, ir::Val q, KeyValue kv, uint32_t cache,
                            bool causal, const std::string& tag) {
  // Every row's K/V is in the cache before any row attends: the CPU and CUDA backends run ops in order.
  g.add_op(ir::CacheAppend{kv.k, kv.v, cache, 0, 0});
  const ir::Val y = g.add_val(g.info(q).rows, s.q_width(), tag + ".attn");
  g.add_op(ir::CacheAttention{q, cache, s.heads, s.kv_heads, s.head_dim, causal, s.window, y, 0});
  return y;
}

ir::Val add_swiglu(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, const std::string& tag) {
  const ir::Rows rows = g.info(u).rows;
  const ir::Val gu = g.add_val(rows, 2 * s.ffn, tag + ".gate_up");
  g.add_op(ir::Gemm{u, w.gate_up, std::nullopt, ir::Epilogue::kNone, gu});
  const ir::Val m = g.add_val(rows, s.ffn, tag + ".mlp");
  g.add_op(ir::SwiGlu{gu, m});
  return m;
}

namespace {

// Fused q, k and v (add_layer_weights' fused_qkv): one GEMM into [q | k | v] rows, q and k normed and
// rotated in place there, k and v appended to the cache from their columns, q attending from its own.
ir::Val add_fused_attention(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, uint32_t cache,
                            bool causal, const std::string& tag) {
  const ir::Rows rows = g.info(u).rows;
  const uint32_t k_col = s.q_width(), v_col = s.q_width() + s.kv_width();
  const ir::Val qkv = g.add_val(rows, s.qkv_width(), tag + ".qkv");
  g.add_op(ir::Gemm{u, *w.qkv, w.qkv_bias, ir::Epilogue::kNone, qkv});
  g.add_op(ir::HeadRmsNorm{qkv, w.q_norm, s.heads, s.head_dim, s.eps, 0});
  g.add_op(ir::Rope{qkv, 0, s.heads, s.head_dim, s.rope_theta});
  g.add_op(ir::HeadRmsNorm{qkv, w.k_norm, s.kv_heads, s.head_dim, s.eps, k_col});
  g.add_op(ir::Rope{qkv, k_col, s.kv_heads, s.head_dim, s.rope_theta});
  g.add_op(ir::CacheAppend{qkv, qkv, cache, k_col, v_col});
  const ir::Val y = g.add_val(rows, s.q_width(), tag + ".attn");
  g.add_op(ir::CacheAttention{qkv, cache, s.heads, s.kv_heads, s.head_dim, causal, s.window, y, 0});
  return y;
}

}  // namespace

ir::Val add_attention(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, uint32_t cache, bool causal,
                      const std::string& tag) {
  if (w.qkv) return add_fused_attention(g, s, w, u, cache, causal, tag);
  const ir::Val q = add_query(g, s, w, u, tag);
  const KeyValue kv = add_key_value(g, s, w, u, tag);
  return add_cache_attention(g, s, q, kv, cache, causal, tag);
}

void add_layer(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val x, uint32_t cache,
               bool causal, const std::string& tag) {
  const ir::Rows rows = g.info(x).rows;
  const ir::Val u = g.add_val(rows, s.hidden, tag + ".in_norm");
  g.add_op(ir::RmsNorm{x, w.in_norm, s.eps, u});
  const ir::Val y = add_attention(g, s, w, u, cache, causal, tag);
  g.add_op(ir::Gemm{y, w.o, w.o_bias, ir::Epilogue::kAccumulate, x});
  const ir::Val u2 = g.add_val(rows, s.hidden, tag + ".post_norm");
  g.add_op(ir::RmsNorm{x, w.post_norm, s.eps, u2});
  const ir::Val m = add_swiglu(g, s, w, u2, tag);
  g.add_op(ir::Gemm{m, w.down, std::nullopt, ir::Epilogue::kAccumulate, x});
}

}  // namespace tandem::models::qwen3

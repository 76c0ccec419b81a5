// Graph builders for one Qwen3 decoder layer and its parts (dflash.md §1.5): shared by the target
// (engine/models/qwen3) and the DFlash drafters (engine/models/dflash), whose layers are Qwen3 layers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/io/hf_config.h"
#include "engine/ir/graph.h"

namespace tandem::models::qwen3 {

// The shapes of one decoder layer.
struct LayerShape {
  uint32_t hidden = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t ffn = 0;
  float eps = 1e-6f;
  float rope_theta = 1e6f;
  bool bias = false;               // attention_bias: q, k, v and o projections carry biases
  std::optional<uint32_t> window;  // sliding-window layers only

  uint32_t q_width() const { return heads * head_dim; }
  uint32_t kv_width() const { return kv_heads * head_dim; }
  uint32_t qkv_width() const { return q_width() + 2 * kv_width(); }
};

// Layer `layer` of a config (its window when layer_types marks it sliding).
LayerShape layer_shape(const io::Qwen3Config& cfg, uint32_t layer);

// A layer's weights, named "<prefix>input_layernorm.weight" etc. (prefix "model.layers.3." for a
// target, "layers.3." for a drafter). With fused_qkv, q_proj, k_proj and v_proj stack into one weight (qkv,
// and qkv_bias): one GEMM of q_width + 2·kv_width columns instead of three, which a decode step at a few rows
// streams at ~2.6 TB/s on the H200 where the three reached 0.8-1.4 (PERF_NOTES, "Fused q/k/v"). q, k, v
// and their biases are then unset: add_query and add_key_value take unfused weights only.
struct LayerWeights {
  ir::WeightId in_norm, post_norm, q, k, v, o, q_norm, k_norm, gate_up, down;
  std::optional<ir::WeightId> q_bias, k_bias, v_bias, o_bias;
  std::optional<ir::WeightId> qkv, qkv_bias;
};
LayerWeights add_layer_weights(ir::Graph& g, const LayerShape& s, const std::string& prefix, bool fused_qkv = false);

struct KeyValue {
  ir::Val k;
  ir::Val v;
};

// k = RoPE(k_norm(Wk·u)) and v = Wv·u for rows u, at each row's absolute position.
KeyValue add_key_value(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u,
                       const std::string& tag);
// q = RoPE(q_norm(Wq·u)).
ir::Val add_query(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, const std::string& tag);
// Appends rows u's k and v to cache `cache` and attends nothing (a drafter's settle: context rows need no q). With
// `stacked`, w's k_proj and v_proj stack into one GEMM into [k | v] rows, k normed and rotated
// in place and both appended from their columns; else add_key_value's two GEMMs. The same values either way.
void add_key_value_append(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, uint32_t cache,
                          bool stacked, const std::string& tag);
// Appends kv to cache `cache`, then attends q over it (causal, or block mode); returns the heads'
// output before o_proj.
ir::Val add_cache_attention(ir::Graph& g, const LayerShape& s, ir::Val q, KeyValue kv, uint32_t cache,
                            bool causal, const std::string& tag);
// The attention of rows u before o_proj: with w.qkv one GEMM into [q | k | v] rows whose q and k are normed and
// rotated in place, k and v appended to the cache from their columns; else add_query, add_key_value and
// add_cache_attention. The same values either way.
ir::Val add_attention(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, uint32_t cache, bool causal,
                      const std::string& tag);
// silu(gate·u) ⊙ (up·u): the MLP before down_proj.
ir::Val add_swiglu(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val u, const std::string& tag);

// A whole pre-norm layer, residual x updated in place: the target's layer (causal) and a DFlash v1
// drafter layer (block mode).
void add_layer(ir::Graph& g, const LayerShape& s, const LayerWeights& w, ir::Val x, uint32_t cache,
               bool causal, const std::string& tag);

}  // namespace tandem::models::qwen3

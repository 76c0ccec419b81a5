// The Laya-compat graph (scorer.md §2 "Compat graph", laya.rs `plan`): encoder layers (global or
// windowed, each with its RoPE theta; layer 0 without attn_norm), final norm, AddType, norm-first head
// layers, scorer, act head. Biases follow the encoder config's norm_bias / attention_bias / mlp_bias.
#include "engine/models/decision/compat_graph_impl.h"

#include <optional>
#include <string>

#include "engine/ir/executor.h"

namespace tandem::models::decision {
namespace {

using ir::Epilogue;
using ir::Rows;
using ir::Val;
using ir::WeightId;

class Builder {
 public:
  Builder(const io::ModernBertConfig& enc, const io::LayaAgentConfig& laya)
      : enc_(enc), laya_(laya), d_(enc.hidden_size) {}

  ir::Graph build() {
    const Val h = encoder();
    g_.add_op(ir::AddType{h, weight("type_emb.weight", {3, d_})});
    for (uint32_t l = 0; l < laya_.head_layers; ++l) head_layer(h, l);
    const Val logits = scorer(h);
    const Val act = act_head(h, logits);
    g_.add_output("logits", logits);
    g_.add_output("act", act);
    return std::move(g_);
  }

 private:
  WeightId weight(const std::string& name, std::vector<uint64_t> shape) {
    return g_.add_weight({name}, std::move(shape));
  }
  std::optional<WeightId> bias(bool present, const std::string& name, uint64_t n) {
    if (!present) return std::nullopt;
    return weight(name, {n});
  }
  Val val(Rows rows, uint32_t width, std::string name) { return g_.add_val(rows, width, std::move(name)); }

  // out = LayerNorm(x) with "<prefix>.weight" (and "<prefix>.bias" when `with_bias`).
  Val layer_norm(Val x, const std::string& prefix, bool with_bias, float eps, const std::string& name) {
    const uint32_t w = g_.info(x).width;
    const Val out = val(g_.info(x).rows, w, name);
    g_.add_op(ir::LayerNorm{x, weight(prefix + ".weight", {w}), bias(with_bias, prefix + ".bias", w), eps, out});
    return out;
  }

  Val gemm(Val a, const std::string& w, std::optional<WeightId> b, uint32_t n, Epilogue ep, const std::string& name) {
    const Val out = val(g_.info(a).rows, n, name);
    g_.add_op(ir::Gemm{a, weight(w, {n, g_.info(a).width}), b, ep, out});
    return out;
  }
  void accumulate(Val a, const std::string& w, std::optional<WeightId> b, Val into) {
    g_.add_op(ir::Gemm{a, weight(w, {g_.info(into).width, g_.info(a).width}), b, Epilogue::kAccumulate, into});
  }

  Val encoder() {
    const uint32_t inter = enc_.intermediate_size, heads = enc_.num_attention_heads;
    const std::string e = "encoder.";
    const Val embedded = val(Rows::kTokens, d_, "enc.embed");
    g_.add_op(ir::Embed{weight(e + "embeddings.tok_embeddings.weight", {enc_.vocab_size, d_}), embedded});
    const Val h = layer_norm(embedded, e + "embeddings.norm", enc_.norm_bias, enc_.norm_eps, "enc.h");
    for (uint32_t n = 0; n < enc_.num_hidden_layers; ++n) {
      const std::string p = e + "layers." + std::to_string(n) + ".";
      const std::string tag = "enc." + std::to_string(n);
      const bool global = enc_.global_layer[n];
      // Layer 0's attn_norm is an identity in ModernBERT: its attention reads the embedding norm's output.
      const Val x = n == 0 ? h : layer_norm(h, p + "attn_norm", enc_.norm_bias, enc_.norm_eps, tag + ".attn_in");
      const Val qkv = gemm(x, p + "attn.Wqkv.weight", bias(enc_.attention_bias, p + "attn.Wqkv.bias", 3ull * d_),
                           3 * d_, Epilogue::kNone, tag + ".qkv");
      const float theta = global ? enc_.global_rope_theta : enc_.local_rope_theta;
      g_.add_op(ir::Rope{qkv, 0, 2 * heads, enc_.head_dim, theta});
      // HF's local_attention is the full window: keys within half of it on either side are visible.
      const std::optional<uint32_t> window =
          global ? std::nullopt : std::optional<uint32_t>(enc_.local_attention / 2);
      const Val att = val(Rows::kTokens, d_, tag + ".attn");
      g_.add_op(ir::Attention{qkv, heads, enc_.head_dim, window, att});
      accumulate(att, p + "attn.Wo.weight", bias(enc_.attention_bias, p + "attn.Wo.bias", d_), h);
      const Val y = layer_norm(h, p + "mlp_norm", enc_.norm_bias, enc_.norm_eps, tag + ".mlp_in");
      const Val wi = gemm(y, p + "mlp.Wi.weight", bias(enc_.mlp_bias, p + "mlp.Wi.bias", 2ull * inter), 2 * inter,
                          Epilogue::kNone, tag + ".wi");
      const Val glu = val(Rows::kTokens, inter, tag + ".geglu");
      g_.add_op(ir::GeGlu{wi, glu});
      accumulate(glu, p + "mlp.Wo.weight", bias(enc_.mlp_bias, p + "mlp.Wo.bias", d_), h);
    }
    return layer_norm(h, e + "final_norm", enc_.norm_bias, enc_.norm_eps, "enc.out");
  }

  // nn.TransformerEncoderLayer(norm_first=True, activation=relu): h += SA(LN1(h)); h += FF(LN2(h)).
  void head_layer(Val h, uint32_t l) {
    const std::string p = "head.layers." + std::to_string(l) + ".";
    const std::string tag = "head." + std::to_string(l);
    const Val x = layer_norm(h, p + "norm1", true, kHeadNormEps, tag + ".norm1");
    const Val qkv = gemm(x, p + "self_attn.in_proj_weight", weight(p + "self_attn.in_proj_bias", {3ull * d_}), 3 * d_,
                         Epilogue::kNone, tag + ".qkv");
    const Val att = val(Rows::kTokens, d_, tag + ".attn");
    g_.add_op(ir::Attention{qkv, d_ / kHeadDim, kHeadDim, std::nullopt, att});
    accumulate(att, p + "self_attn.out_proj.weight", weight(p + "self_attn.out_proj.bias", {d_}), h);
    const Val y = layer_norm(h, p + "norm2", true, kHeadNormEps, tag + ".norm2");
    const Val ff = gemm(y, p + "linear1.weight", weight(p + "linear1.bias", {4ull * d_}), 4 * d_, Epilogue::kRelu,
                        tag + ".ff");
    accumulate(ff, p + "linear2.weight", weight(p + "linear2.bias", {d_}), h);
  }

  // LN → Linear(d, d) + GELU → Linear(d, 1) on each marker's row.
  Val scorer(Val h) {
    const Val m = val(Rows::kPicks, d_, "scorer.markers");
    g_.add_op(ir::PickRows{h, m});
    const Val x = layer_norm(m, "scorer.0", true, kHeadNormEps, "scorer.norm");
    const Val y = gemm(x, "scorer.1.weight", weight("scorer.1.bias", {d_}), d_, Epilogue::kGelu, "scorer.hidden");
    return gemm(y, "scorer.3.weight", weight("scorer.3.bias", {1}), 1, Epilogue::kNone, "logits");
  }

  // Linear(d + 4, 256) + GELU → Linear(256, 2) on each sequence's act features.
  Val act_head(Val h, Val logits) {
    const Val f = val(Rows::kSeqs, d_ + 4, "act.features");
    g_.add_op(ir::ActFeatures{h, logits, f});
    const Val x = gemm(f, "act_head.0.weight", weight("act_head.0.bias", {kActHidden}), kActHidden, Epilogue::kGelu,
                       "act.hidden");
    return gemm(x, "act_head.2.weight", weight("act_head.2.bias", {2}), 2, Epilogue::kNone, "act");
  }

  const io::ModernBertConfig& enc_;
  const io::LayaAgentConfig& laya_;
  const uint32_t d_;
  ir::Graph g_;
};

Error config_error(const char* key, std::string problem) {
  return Error(ErrorKind::kUnsupported, fmt::format("encoder/config.json: {}: {}", key, problem));
}

}  // namespace

Result<ir::Graph> build_compat_graph(const io::ModernBertConfig& enc, const io::LayaAgentConfig& laya) {
  if (enc.hidden_size == 0 || enc.num_attention_heads == 0 || enc.vocab_size == 0 || enc.intermediate_size == 0) {
    return config_error("hidden_size", "hidden_size, num_attention_heads, intermediate_size and vocab_size must "
                                       "all be positive");
  }
  if (enc.head_dim * enc.num_attention_heads != enc.hidden_size || enc.head_dim % 2 != 0) {
    return config_error("num_attention_heads", fmt::format("{} heads of {} do not make an even-width split of "
                                                           "hidden_size {}", enc.num_attention_heads,
                                                           enc.head_dim, enc.hidden_size));
  }
  if (enc.hidden_size % kHeadDim != 0) {
    return config_error("hidden_size", fmt::format("{} is not a multiple of 64, which the head's attention "
                                                   "(nhead = d / 64) needs", enc.hidden_size));
  }
  if (enc.hidden_activation != "gelu") {
    return config_error("hidden_activation", fmt::format("'{}' is not supported; the compat encoder uses exact "
                                                         "'gelu'", enc.hidden_activation));
  }
  if (enc.global_layer.size() != enc.num_hidden_layers) {
    return config_error("num_hidden_layers", fmt::format("{} layers but {} layer types", enc.num_hidden_layers,
                                                         enc.global_layer.size()));
  }
  ir::Graph graph = Builder(enc, laya).build();
  TANDEM_TRY(ir::validate(graph).context("compat graph"));
  return graph;
}

}  // namespace tandem::models::decision

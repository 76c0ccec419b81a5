// The drafter's two graphs (dflash.md §1.3-1.5, §3.2): settle (tap rows -> context K/V of every layer)
// and block (layers over context + block, causal or not per layer as DFlashConfig::causal_layer says,
// final norm, the target's LM head on rows 1..B−1; v1 picks each row's argmax, v2 walks the selector).
#include <algorithm>

#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_layer.h"
#include "engine/models/qwen3/qwen3_model.h"

namespace tandem::models::dflash {
namespace {

using qwen3::LayerShape;
using qwen3::LayerWeights;

std::string layer_prefix(uint32_t l) { return "layers." + std::to_string(l) + "."; }

// v2's grouped dynamic convolution of one sublayer: its base kernel and kernel projection.
struct Conv {
  ir::WeightId base;
  ir::WeightId projection;
};

Conv add_conv_weights(ir::Graph& g, const io::DFlashConfig& cfg, const std::string& prefix) {
  const uint64_t h = cfg.layers.hidden_size;
  const uint64_t taps = cfg.conv_kernel_size;
  const uint64_t groups = h / cfg.conv_group_size;
  return {g.add_weight({prefix + "base_kernel"}, {2, taps, h}),
          g.add_weight({prefix + "kernel_projection.weight"}, {2 * taps * groups, h})};
}

// d = W_kp·u (both stages' coefficient deltas) and z = conv_0(u).
std::pair<ir::Val, ir::Val> add_conv_in(ir::Graph& g, const io::DFlashConfig& cfg, const Conv& c, ir::Val u,
                                        const std::string& tag) {
  const uint32_t h = cfg.layers.hidden_size;
  const uint32_t taps = cfg.conv_kernel_size;
  const uint32_t groups = h / cfg.conv_group_size;
  const ir::Val d = g.add_val(ir::Rows::kTokens, 2 * taps * groups, tag + ".deltas");
  g.add_op(ir::Gemm{u, c.projection, std::nullopt, ir::Epilogue::kNone, d});
  const ir::Val z = g.add_val(ir::Rows::kTokens, h, tag + ".conv_in");
  g.add_op(ir::DynConv{u, d, c.base, 0, taps, cfg.conv_group_size, ir::Epilogue::kNone, z});
  return {d, z};
}

// x += conv_1(W·y) with the deltas of the sublayer's input.
void add_conv_out(ir::Graph& g, const io::DFlashConfig& cfg, const Conv& c, ir::Val d, ir::Val y, ir::WeightId w,
                  std::optional<ir::WeightId> bias, ir::Val x, const std::string& tag) {
  const uint32_t h = cfg.layers.hidden_size;
  const ir::Val a = g.add_val(ir::Rows::kTokens, h, tag + ".out");
  g.add_op(ir::Gemm{y, w, bias, ir::Epilogue::kNone, a});
  g.add_op(ir::DynConv{a, d, c.base, 1, cfg.conv_kernel_size, cfg.conv_group_size, ir::Epilogue::kAccumulate, x});
}

// A DFlash 2 layer (dflash.md §3.2): the Qwen3 layer with each sublayer wrapped by the convolution.
void add_v2_layer(ir::Graph& g, const io::DFlashConfig& cfg, const LayerShape& s, const LayerWeights& w,
                  uint32_t l, ir::Val x, uint32_t cache, const std::string& tag) {
  const Conv attn_conv = add_conv_weights(g, cfg, layer_prefix(l) + "attention_conv.");
  const Conv mlp_conv = add_conv_weights(g, cfg, layer_prefix(l) + "mlp_conv.");
  const ir::Val u = g.add_val(ir::Rows::kTokens, s.hidden, tag + ".in_norm");
  g.add_op(ir::RmsNorm{x, w.in_norm, s.eps, u});
  const auto [d, z] = add_conv_in(g, cfg, attn_conv, u, tag + ".attn_conv");
  const ir::Val y = qwen3::add_attention(g, s, w, z, cache, cfg.causal_layer[l], tag);
  add_conv_out(g, cfg, attn_conv, d, y, w.o, w.o_bias, x, tag + ".attn_conv");
  const ir::Val u2 = g.add_val(ir::Rows::kTokens, s.hidden, tag + ".post_norm");
  g.add_op(ir::RmsNorm{x, w.post_norm, s.eps, u2});
  const auto [d2, z2] = add_conv_in(g, cfg, mlp_conv, u2, tag + ".mlp_conv");
  const ir::Val m = qwen3::add_swiglu(g, s, w, z2, tag);
  add_conv_out(g, cfg, mlp_conv, d2, m, w.down, std::nullopt, x, tag + ".mlp_conv");
}

ir::Graph settle_graph(const DrafterSetup& setup, const std::vector<LayerShape>& shapes) {
  const io::DFlashConfig& cfg = setup.cfg;
  const uint32_t h = cfg.layers.hidden_size;
  ir::Graph g;
  g.feature_width = setup.tap_width();
  const ir::Val taps = g.add_val(ir::Rows::kTokens, setup.tap_width(), "taps");
  g.add_op(ir::Input{taps});
  const ir::Val fused = g.add_val(ir::Rows::kTokens, h, "fc");
  g.add_op(ir::Gemm{taps, g.add_weight({"fc.weight"}, {h, setup.tap_width()}), std::nullopt, ir::Epilogue::kNone,
                    fused});
  const ir::Val t = g.add_val(ir::Rows::kTokens, h, "context");
  g.add_op(ir::RmsNorm{fused, g.add_weight({"hidden_norm.weight"}, {h}), cfg.layers.rms_norm_eps, t});
  for (uint32_t l = 0; l < shapes.size(); ++l) {
    const LayerWeights w = qwen3::add_layer_weights(g, shapes[l], layer_prefix(l));
    const uint32_t cache = g.add_cache("context." + std::to_string(l), shapes[l].kv_width());
    qwen3::add_key_value_append(g, shapes[l], w, t, cache, setup.fuse_qkv, "layer." + std::to_string(l));
  }
  return g;
}

ir::Graph block_graph(const DrafterSetup& setup, const std::vector<LayerShape>& shapes) {
  const io::DFlashConfig& cfg = setup.cfg;
  const uint32_t h = cfg.layers.hidden_size;
  const uint32_t vocab = setup.target.vocab_size;
  ir::Graph g;
  const ir::Val x = g.add_val(ir::Rows::kTokens, h, "x");
  g.add_op(ir::Embed{g.add_weight({qwen3::embed_name(kTargetPrefix)}, {vocab, h}), x});
  for (uint32_t l = 0; l < shapes.size(); ++l) {
    const LayerWeights w = qwen3::add_layer_weights(g, shapes[l], layer_prefix(l), setup.fuse_qkv);
    const uint32_t cache = g.add_cache("context." + std::to_string(l), shapes[l].kv_width());
    const std::string tag = "layer." + std::to_string(l);
    if (cfg.version == 2) {
      add_v2_layer(g, cfg, shapes[l], w, l, x, cache, tag);
    } else {
      qwen3::add_layer(g, shapes[l], w, x, cache, cfg.causal_layer[l], tag);
    }
  }
  const ir::Val rows = g.add_val(ir::Rows::kPicks, h, "draft_rows");
  g.add_op(ir::PickRows{x, rows});
  const ir::Val normed = g.add_val(ir::Rows::kPicks, h, "final_norm");
  g.add_op(ir::RmsNorm{rows, g.add_weight({"norm.weight"}, {h}), cfg.layers.rms_norm_eps, normed});
  // Logits over the draft vocabulary only: the target's head's first draft_vocab rows, read in place (the
  // head is the target's own weight), so a draft vocabulary saves the head's bytes and work, not just the pick.
  const ir::Val logits = g.add_val(ir::Rows::kPicks, setup.draft_vocab, "logits");
  g.add_op(ir::Gemm{normed, g.add_weight({qwen3::head_name(setup.target, kTargetPrefix)}, {vocab, h}), std::nullopt,
                    ir::Epilogue::kNone, logits, setup.draft_vocab < vocab});
  // The logits stay on the device (fetched only when a host step needs them); each row's pick over the
  // draft vocabulary comes back instead: v1's greedy argmax, v2's selector walk (dflash.md §3.3) over the
  // top-k of the head's logits, whose candidates and proposal q stay on the device until fetched.
  g.add_output("logits", logits, ir::Placement::kDevice);  // kBlockLogitsOutput
  if (cfg.version == 1) {
    const ir::Val ids = g.add_val(ir::Rows::kPicks, 1, "ids", ir::Elem::kU32);
    // Greedy, or under rejection sampling a sample of softmax(logits / T) (the proposal q) at the row's own
    // position.
    g.add_op(ir::Sample{logits, setup.draft_vocab, ids, ir::Stream::kDraft});
    g.add_output("ids", ids);  // block_ids_output(1)
    return g;
  }
  const uint32_t k = std::min(cfg.selector_top_k, setup.draft_vocab);
  const ir::Val sel = g.add_val(ir::Rows::kPicks, cfg.selector_rank, "selector");
  g.add_op(ir::Gemm{normed, g.add_weight({setup.hidden_projection}, {cfg.selector_rank, h}), std::nullopt,
                    ir::Epilogue::kNone, sel});
  g.add_output("selector", sel, ir::Placement::kDevice);  // kBlockSelectorOutput
  const ir::Val cand = g.add_val(ir::Rows::kPicks, k, "candidates", ir::Elem::kU32);
  const ir::Val values = g.add_val(ir::Rows::kPicks, k, "candidate_logits");
  g.add_op(ir::TopK{logits, setup.draft_vocab, k, cand, values});
  const ir::Val ids = g.add_val(ir::Rows::kPicks, 1, "ids", ir::Elem::kU32);
  const ir::Val q = g.add_val(ir::Rows::kPicks, k, "proposal");
  const std::vector<uint64_t> book{vocab, cfg.selector_rank};
  g.add_op(ir::SelectorWalk{cand, values, sel, g.add_weight({setup.predecessor}, book),
                            g.add_weight({setup.successor}, book), cfg.final_logit_softcapping,
                            cfg.output_multiplier, ids, q});
  g.add_output("ids", ids);                                // block_ids_output(2)
  g.add_output("candidates", cand, ir::Placement::kDevice);  // kBlockCandidatesOutput
  g.add_output("proposal", q, ir::Placement::kDevice);       // kBlockProposalOutput
  return g;
}

}  // namespace

Result<DrafterGraphs> build_drafter_graphs(const DrafterSetup& setup) {
  std::vector<LayerShape> shapes;
  for (uint32_t l = 0; l < setup.cfg.layers.num_hidden_layers; ++l) {
    shapes.push_back(qwen3::layer_shape(setup.cfg.layers, l));
  }
  DrafterGraphs graphs{settle_graph(setup, shapes), block_graph(setup, shapes)};
  TANDEM_TRY(ir::validate(graphs.settle).context("drafter settle graph"));
  TANDEM_TRY(ir::validate(graphs.block).context("drafter block graph"));
  return graphs;
}

}  // namespace tandem::models::dflash

// Graph construction helpers, op names and read/write sets.
#include "engine/ir/graph.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "engine/core/overloaded.h"

namespace tandem::ir {

const char* to_string(Rows rows) {
  switch (rows) {
    case Rows::kTokens: return "tokens";
    case Rows::kSeqs: return "seqs";
    case Rows::kPicks: return "picks";
  }
  return "?";
}

const char* to_string(Elem elem) {
  switch (elem) {
    case Elem::kF32: return "f32";
    case Elem::kU32: return "u32";
  }
  return "?";
}

std::string WeightRef::name() const {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += '+';
    out += p;
  }
  return out;
}

Val Graph::add_val(Rows rows, uint32_t width, std::string name, Elem elem) {
  vals.push_back({rows, width, std::move(name), elem});
  return Val{static_cast<uint32_t>(vals.size() - 1)};
}

WeightId Graph::add_weight(std::vector<std::string> parts, std::vector<uint64_t> shape) {
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].parts == parts) return WeightId{static_cast<uint32_t>(i)};
  }
  WeightRef ref;
  ref.parts = std::move(parts);
  ref.shape = std::move(shape);
  weights.push_back(std::move(ref));
  return WeightId{static_cast<uint32_t>(weights.size() - 1)};
}

WeightId Graph::add_stacked_weight(std::vector<std::string> parts, std::vector<uint64_t> part_rows,
                                  std::vector<uint64_t> shape) {
  const WeightId id = add_weight(std::move(parts), std::move(shape));
  weights[id.index].part_rows = std::move(part_rows);
  return id;
}

std::vector<uint64_t> WeightRef::part_shape(size_t i) const {
  std::vector<uint64_t> s = shape;
  if (s.empty()) return s;
  s[0] = i < part_rows.size() ? part_rows[i] : s[0] / std::max<size_t>(1, parts.size());
  return s;
}

uint32_t Graph::add_cache(std::string name, uint32_t width) {
  caches.push_back({std::move(name), width});
  return static_cast<uint32_t>(caches.size() - 1);
}

std::vector<float> rope_inv_freq(float theta, uint32_t head_dim) {
  std::vector<float> inv(head_dim / 2);
  for (uint32_t i = 0; i < inv.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(theta, exponent);
  }
  return inv;
}

const char* op_name(const Op& op) {
  return std::visit(
      Overloaded{
          [](const Embed&) { return "embed"; },
          [](const LayerNorm&) { return "layer_norm"; },
          [](const RmsNorm&) { return "rms_norm"; },
          [](const Gemm&) { return "gemm"; },
          [](const QGemm&) { return "qgemm"; },
          [](const Rope&) { return "rope"; },
          [](const GeGlu&) { return "geglu"; },
          [](const SwiGlu&) { return "swiglu"; },
          [](const Attention&) { return "attention"; },
          [](const AddType&) { return "add_type"; },
          [](const PickRows&) { return "pick_rows"; },
          [](const ActFeatures&) { return "act_features"; },
          [](const HeadRmsNorm&) { return "head_rms_norm"; },
          [](const CacheAppend&) { return "cache_append"; },
          [](const CacheAttention&) { return "cache_attention"; },
          [](const Input&) { return "input"; },
          [](const Tap&) { return "tap"; },
          [](const DynConv&) { return "dyn_conv"; },
          [](const Argmax&) { return "argmax"; },
          [](const TopK&) { return "top_k"; },
          [](const Sample&) { return "sample"; },
          [](const SelectorWalk&) { return "selector_walk"; },
          [](const RejectSample&) { return "reject_sample"; },
      },
      op);
}

Uses uses(const Op& op) {
  return std::visit(
      Overloaded{
          [](const Embed& o) { return Uses{{}, {o.out}}; },
          [](const LayerNorm& o) { return Uses{{o.x}, {o.out}}; },
          [](const RmsNorm& o) { return Uses{{o.x}, {o.out}}; },
          [](const Gemm& o) {
            if (o.epilogue == Epilogue::kAccumulate) return Uses{{o.a, o.out}, {o.out}};
            return Uses{{o.a}, {o.out}};
          },
          [](const QGemm& o) {
            if (o.epilogue == Epilogue::kAccumulate) return Uses{{o.a, o.out}, {o.out}};
            return Uses{{o.a}, {o.out}};
          },
          [](const Rope& o) { return Uses{{o.x}, {o.x}}; },
          [](const GeGlu& o) { return Uses{{o.x}, {o.out}}; },
          [](const SwiGlu& o) { return Uses{{o.x}, {o.out}}; },
          [](const Attention& o) { return Uses{{o.qkv}, {o.out}}; },
          [](const AddType& o) { return Uses{{o.h}, {o.h}}; },
          [](const PickRows& o) { return Uses{{o.h}, {o.out}}; },
          [](const ActFeatures& o) { return Uses{{o.h, o.logits}, {o.out}}; },
          [](const HeadRmsNorm& o) { return Uses{{o.x}, {o.x}}; },
          [](const CacheAppend& o) { return Uses{{o.k, o.v}, {}}; },
          [](const CacheAttention& o) { return Uses{{o.q}, {o.out}}; },
          [](const Input& o) { return Uses{{}, {o.out}}; },
          [](const Tap& o) { return Uses{{o.x, o.out}, {o.out}}; },
          [](const DynConv& o) {
            if (o.epilogue == Epilogue::kAccumulate) return Uses{{o.x, o.d, o.out}, {o.out}};
            return Uses{{o.x, o.d}, {o.out}};
          },
          [](const Argmax& o) { return Uses{{o.x}, {o.out}}; },
          [](const TopK& o) { return Uses{{o.x}, {o.ids, o.values}}; },
          [](const Sample& o) { return Uses{{o.x}, {o.out}}; },
          [](const SelectorWalk& o) { return Uses{{o.cand, o.values, o.sel}, {o.ids, o.q}}; },
          [](const RejectSample& o) { return Uses{{o.x, o.ids}, {o.ids}}; },
      },
      op);
}

}  // namespace tandem::ir

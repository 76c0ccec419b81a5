// Which ops the CUDA backend runs (ir::Backend::supports): one overload per op of the IR, so an op that
// this backend misses is a compile error here rather than a failure at lowering.
#include <variant>

#include "engine/cuda/plan_impl.h"

namespace tandem::cuda {
namespace {

struct Support {
  const ir::Graph& graph;
  ir::Precision precision;

  Status yes() const { return {}; }
  // The scorer's families have FP32 and FP16 kernels only.
  Status scorer(const char* op) const {
    if (precision == ir::Precision::kBF16) {
      return Error::make(ErrorKind::kUnsupported, "{} has no BF16 kernel (run the scorer at f16 or f32)", op);
    }
    return {};
  }

  // head_norm_rope keeps a head in a warp's registers: 8 columns per lane.
  Status head_dim(uint32_t d) const {
    if (d > 256 || d % 2 != 0) {
      return Error::make(ErrorKind::kUnsupported, "head_dim {} (the CUDA kernels take even sizes up to 256)", d);
    }
    return {};
  }

  Status operator()(const ir::Embed&) const { return yes(); }
  Status operator()(const ir::LayerNorm&) const { return scorer("layer_norm"); }
  Status operator()(const ir::RmsNorm&) const { return yes(); }
  Status operator()(const ir::Gemm&) const { return yes(); }
  // The kernel reads 8 codes per lane and one scale per 8 codes: groups of whole multiples of 32.
  Status operator()(const ir::QGemm& o) const {
    if (o.group % 32 != 0) {
      return Error::make(ErrorKind::kUnsupported, "qgemm (int{}) with groups of {} (the CUDA kernel takes multiples "
                         "of 32)", o.bits, o.group);
    }
    return yes();
  }
  Status operator()(const ir::Rope& o) const {
    if (graph.caches.empty()) return scorer("rope");
    // A decoder rope runs in head_norm_rope from any even column (a fused [q | k | v] row's k from q_width).
    if (o.col % 2 != 0) return Error::make(ErrorKind::kUnsupported, "a decoder rope from odd column {}", o.col);
    return head_dim(o.head_dim);
  }
  Status operator()(const ir::GeGlu&) const { return scorer("geglu"); }
  Status operator()(const ir::SwiGlu&) const { return yes(); }
  Status operator()(const ir::Attention&) const { return scorer("attention"); }
  Status operator()(const ir::AddType&) const { return scorer("add_type"); }
  Status operator()(const ir::PickRows&) const { return yes(); }
  Status operator()(const ir::ActFeatures&) const { return scorer("act_features"); }
  Status operator()(const ir::HeadRmsNorm& o) const { return head_dim(o.head_dim); }
  Status operator()(const ir::CacheAppend&) const { return yes(); }
  Status operator()(const ir::CacheAttention& o) const { return cache_attention_supported(o); }
  Status operator()(const ir::Input&) const { return yes(); }
  Status operator()(const ir::Tap&) const { return yes(); }
  Status operator()(const ir::DynConv& o) const {
    if (o.epilogue != ir::Epilogue::kNone && o.epilogue != ir::Epilogue::kAccumulate) {
      return Error::make(ErrorKind::kUnsupported, "dyn_conv with the {} epilogue (none or accumulate only)",
                         o.epilogue == ir::Epilogue::kGelu ? "gelu" : "relu");
    }
    return yes();
  }
  Status operator()(const ir::Argmax&) const { return yes(); }
  Status operator()(const ir::TopK& o) const {
    if (o.k > kernels::kTopKMax) {
      return Error::make(ErrorKind::kUnsupported, "top_k of {} (the CUDA kernel keeps up to {})", o.k,
                         static_cast<unsigned>(kernels::kTopKMax));
    }
    return yes();
  }
  Status operator()(const ir::Sample&) const { return yes(); }
  Status operator()(const ir::RejectSample&) const { return yes(); }
  Status operator()(const ir::SelectorWalk& o) const {
    const uint32_t k = graph.info(o.cand).width;
    if (k > kernels::kTopKMax) {
      return Error::make(ErrorKind::kUnsupported, "selector walk over {} candidates (the CUDA kernel takes up to {})",
                         k, static_cast<unsigned>(kernels::kTopKMax));
    }
    return yes();
  }
};

}  // namespace

Status supports_op(const ir::Graph& graph, const ir::Op& op, ir::Precision precision) {
  return std::visit(Support{graph, precision}, op);
}

}  // namespace tandem::cuda

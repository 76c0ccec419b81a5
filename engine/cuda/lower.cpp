// Lowering a graph for one bucket (scorer.md §2-3): element types, the arena, every buffer the plan
// needs, one step per op (RoPE fused into the attention that follows it, GEMM epilogues into cuBLASLt
// where exact), a validation pass over the launches, then the CUDA graph.
#include <cstring>
#include <map>
#include <set>

#include "engine/core/log.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/gemm_stream_probe_impl.h"
#include "engine/cuda/plan_impl.h"
#include "engine/ir/layout.h"

namespace tandem::cuda {

class Lowering {
 public:
  Lowering(const Device& device, GemmAlgos& algos, const CudaWeights& weights, const ir::Graph& graph,
           ir::Bucket bucket, CudaPlan& plan)
      : device_(device), algos_(algos), weights_(weights), graph_(graph), bucket_(bucket), plan_(plan) {}

  Status run();

 private:
  Status allocate();
  Status build_rope_tables();
  // Decoder graphs rotate at any position a cache holds: angles from inverse frequencies per (theta,
  // head_dim), computed in the kernel (head_norm_rope) instead of position tables.
  Status build_inv_freq_tables();
  bool decoder() const { return !graph_.caches.empty(); }
  // Whether a GEMM of m bucket rows runs the decode GEMM instead of cuBLASLt (gemm_impl.h).
  bool decode_gemm(const GemmShape& shape, uint32_t m) const {
    return plan_.options_.decode_gemm && decoder() && m <= kDecodeGemmMaxRows &&
           gemm_decode_supported(shape.k, shape.ab, shape.out, shape.accumulate).ok();
  }
  Result<const float*> inv_freq(float theta, uint32_t head_dim) const;
  // One overload per op of the IR (an op without one is a compile error); supported() said which run.
  Status lower_op(size_t i, const ir::Op& op) {
    return std::visit([&](const auto& o) { return lower(i, o); }, op);
  }
  Status lower(size_t i, const ir::Embed& o);
  Status lower(size_t i, const ir::LayerNorm& o);
  Status lower(size_t i, const ir::RmsNorm& o);
  Status lower(size_t i, const ir::Gemm& o);
  // Adds the streaming GEMM for a decoder GEMM of up to 16 rows in place of `gemm` when it is on and a probe
  // shows it computes the reference's bits (gemm_stream_probe_impl.h); false leaves the GEMM to cuBLASLt.
  Result<bool> lower_stream_gemm(const Gemm& gemm, const Loc& in, const Loc& out, const void* w, uint32_t rows,
                                 const std::string& where);
  Status lower(size_t i, const ir::QGemm& o);
  Status lower(size_t i, const ir::Rope& o);
  Status lower(size_t i, const ir::GeGlu& o);
  Status lower(size_t i, const ir::SwiGlu& o);
  Status lower(size_t i, const ir::Attention& o);
  Status lower(size_t i, const ir::AddType& o);
  Status lower(size_t i, const ir::PickRows& o);
  Status lower(size_t i, const ir::ActFeatures& o);
  Status lower(size_t i, const ir::HeadRmsNorm& o);
  // Ops i..i+4 as qwen3_layer.cpp's fused attention emits them (q's norm and rope, k's norm and rope, the
  // append of k and v, all on one [q | k | v] row): one qkv_prep step, or false when they are not.
  Result<bool> lower_qkv_prep(size_t i, const ir::HeadRmsNorm& q);
  Status lower(size_t i, const ir::CacheAppend& o);
  Status lower(size_t i, const ir::CacheAttention& o);
  Status lower(size_t i, const ir::Input& o);
  Status lower(size_t i, const ir::Tap& o);
  Status lower(size_t i, const ir::DynConv& o);
  Status lower(size_t i, const ir::Argmax& o);
  Status lower(size_t i, const ir::TopK& o);
  Status lower(size_t i, const ir::Sample& o);
  Status lower(size_t i, const ir::SelectorWalk& o);
  Status lower(size_t i, const ir::RejectSample& o);
  // The ops this backend does not run yet: supports() refuses them before lowering starts.
  Status not_run(size_t i, const ir::Op& op) const;
  // Index past the Rope ops starting at i that the attention after them absorbs; i when not fusable.
  size_t fused_ropes(size_t i, float* theta) const;
  Status validate_launches();
  CudaAttention attention_path() const;

  Result<Loc> loc(ir::Val v) const;
  Result<const DeviceTensor*> tensor(ir::WeightId id) const;
  Result<const float*> f32_weight(ir::WeightId id) const;
  Result<const float*> bias(const std::optional<ir::WeightId>& id) const;
  std::string label(size_t i, const ir::Op& op) const;
  Status add(Result<KernelStep> step, std::string label);
  Status add_all(Result<std::vector<KernelStep>> steps, const std::string& label);  // each under label

  const Device& device_;
  GemmAlgos& algos_;
  const CudaWeights& weights_;
  const ir::Graph& graph_;
  const ir::Bucket bucket_;
  CudaPlan& plan_;
  std::vector<Dt> types_;
  ir::Layout layout_;
  StepContext ctx_;
  std::map<std::pair<uint32_t, uint32_t>, RopeTable> ropes_;  // (theta bits, half) -> tables
  std::map<std::pair<uint32_t, uint32_t>, const float*> inv_freqs_;  // (theta bits, head_dim) -> [head_dim / 2]
  size_t skip_ = 0;  // ops after the current one that its step absorbed (a Rope fused into HeadRmsNorm)
  size_t stage_bytes_ = 0;
};

Result<Loc> Lowering::loc(ir::Val v) const {
  if (v.index >= graph_.vals.size() || layout_.offset[v.index] == ir::kNotPlaced) {
    return Error::make(ErrorKind::kInternal, "value #{} has no place in the arena", v.index);
  }
  const ir::ValInfo& info = graph_.info(v);
  Loc l;
  // INVARIANT: layout() placed the value at offset floats with room for rows(bucket) · width elements of
  // its type (FP16 values were laid out at half width), inside an arena of layout_.len floats.
  l.ptr = plan_.arena_.as<float>() + layout_.offset[v.index];
  l.rows = info.rows;
  l.width = info.width;
  l.type = types_[v.index];
  l.name = info.name;
  return l;
}

Result<const DeviceTensor*> Lowering::tensor(ir::WeightId id) const {
  const std::string name = graph_.weight(id).name();
  const DeviceTensor* t = weights_.find(name);
  if (t == nullptr) return Error::make(ErrorKind::kNotFound, "weight {} was not uploaded for this graph", name);
  if (t->shape != graph_.weight(id).shape) {
    return Error::make(ErrorKind::kShape, "weight {} was uploaded as {}, the graph needs {}", name,
                       shape_string(t->shape), shape_string(graph_.weight(id).shape));
  }
  return t;
}

Result<const float*> Lowering::f32_weight(ir::WeightId id) const {
  TANDEM_ASSIGN(const DeviceTensor* t, tensor(id));
  if (t->f32.data() == nullptr) {
    return Error::make(ErrorKind::kInternal, "weight {} has no FP32 copy on the device", graph_.weight(id).name());
  }
  return t->f32.as<const float>();
}

Result<const float*> Lowering::bias(const std::optional<ir::WeightId>& id) const {
  if (!id) return static_cast<const float*>(nullptr);
  return f32_weight(*id);
}

std::string Lowering::label(size_t i, const ir::Op& op) const {
  std::string out = fmt::format("op {} {}", i, ir::op_name(op));
  const ir::Uses u = ir::uses(op);
  if (!u.writes.empty()) out += fmt::format(" '{}'", graph_.info(u.writes.front()).name);
  return out;
}

Status Lowering::add(Result<KernelStep> step, std::string label) {
  if (!step.ok()) return std::move(step).error().context(label);
  step->label = std::move(label);
  // Every kernel waits for the grid ahead at entry (prelude.cuh enter_grid), so any may start early; not the
  // first, which follows the index upload, a copy and not a kernel.
  step->overlap_prior = plan_.options_.overlap_launches && !plan_.steps_.empty();
  plan_.steps_.emplace_back(std::move(step).value());
  return {};
}

Status Lowering::add_all(Result<std::vector<KernelStep>> steps, const std::string& label) {
  if (!steps.ok()) return std::move(steps).error().context(label);
  for (KernelStep& s : *steps) TANDEM_TRY(add(std::move(s), label));
  return {};
}

Status Lowering::allocate() {
  const size_t arena_bytes = layout_.len * sizeof(float);
  const std::string where = "the plan of bucket " + ir::to_string(bucket_);
  TANDEM_ASSIGN(plan_.arena_, DeviceBuffer::make(arena_bytes, "the arena of " + where));
  if (arena_bytes > 0) {
    // Padding rows are never read as data, but zeros keep GEMMs over them free of stale NaNs.
    TANDEM_CUDA_CHECK(cudaMemsetAsync(plan_.arena_.data(), 0, arena_bytes, device_.stream()));
  }
  plan_.index_ = IndexLayout::for_bucket(bucket_, static_cast<uint32_t>(graph_.caches.size()));
  for (const ir::CacheInfo& c : graph_.caches) plan_.cache_widths_.push_back(c.width);
  plan_.tiers_ = gemm_tiers(bucket_.tokens, plan_.options_.tier_min_tokens);
  const size_t index_bytes = plan_.index_.words * sizeof(uint32_t);
  TANDEM_ASSIGN(plan_.index_dev_, DeviceBuffer::make(index_bytes, "the index buffer of " + where));
  TANDEM_ASSIGN(plan_.index_host_, PinnedBuffer::make(index_bytes, "the index buffer of " + where));
  std::memset(plan_.index_host_.data(), 0, index_bytes);

  // FP16 staging for GEMMs whose input is FP32 but whose weights are FP16: the largest one.
  for (const ir::Op& op : graph_.ops) {
    const auto* g = std::get_if<ir::Gemm>(&op);
    if (g == nullptr || weights_.precision() == ir::Precision::kF32 || types_[g->a.index] != Dt::kF32) continue;
    const ir::ValInfo& a = graph_.info(g->a);
    stage_bytes_ = std::max(stage_bytes_, size_t{bucket_.rows(a.rows)} * a.width * 2);
  }
  TANDEM_ASSIGN(plan_.stage_, DeviceBuffer::make(stage_bytes_, "the FP16 staging buffer of " + where));
  // One scratch for the passes that leave partials to a second pass (they run in order).
  const size_t scratch_bytes =
      std::max(cache_attention_scratch_bytes(graph_, bucket_), choice_scratch_bytes(graph_, bucket_));
  TANDEM_ASSIGN(plan_.scratch_, DeviceBuffer::make(scratch_bytes, "the partials of " + where));

  plan_.feature_width_ = graph_.feature_width;
  const size_t feature_bytes = size_t{bucket_.tokens} * graph_.feature_width * sizeof(float);
  TANDEM_ASSIGN(plan_.features_dev_, DeviceBuffer::make(feature_bytes, "the feature rows of " + where));
  TANDEM_ASSIGN(plan_.features_host_, PinnedBuffer::make(feature_bytes, "the host feature rows of " + where));

  size_t out_floats = 0;
  for (const ir::Output& o : graph_.outputs) {
    if (o.placement == ir::Placement::kDevice) continue;  // never copied out
    out_floats += size_t{bucket_.rows(graph_.info(o.val).rows)} * graph_.info(o.val).width;
  }
  TANDEM_ASSIGN(plan_.out_host_, PinnedBuffer::make(out_floats * sizeof(float), "the outputs of " + where));

  const auto base = static_cast<const unsigned*>(plan_.index_dev_.data());
  const IndexLayout& l = plan_.index_;
  ctx_.bucket = bucket_;
  ctx_.ix = index_pointers(l, base);
  ctx_.tiles_max = l.tiles_max;
  ctx_.sms = static_cast<uint32_t>(std::max(1, device_.info().sms));
  ctx_.attention = attention_path();
  return {};
}

CudaAttention Lowering::attention_path() const {
  // Tensor cores keep about 22 bits: FP16 plans only, and mma.sync m16n8k16 / cp.async need sm_80.
  if (weights_.precision() != ir::Precision::kF16 || device_.info().cc_major < 8) return CudaAttention::kSimt;
  const CudaAttention want = plan_.options_.attention;
  if (is_tc2(want) && !(plan_.modules_->launchable(KernelId::attention_tc2_f32_f32) &&
                        plan_.modules_->launchable(KernelId::attention_tc2_f32_f16) &&
                        plan_.modules_->launchable(KernelId::attention_tc2s_f32_f16))) {
    return CudaAttention::kTc;  // the device cannot give tc2 its shared memory
  }
  return want;
}

Status Lowering::build_rope_tables() {
  if (decoder()) return build_inv_freq_tables();
  std::set<std::pair<uint32_t, uint32_t>> keys;
  for (const ir::Op& op : graph_.ops) {
    if (const auto* r = std::get_if<ir::Rope>(&op); r != nullptr && r->head_dim % 2 == 0 && r->head_dim > 0) {
      uint32_t bits;
      std::memcpy(&bits, &r->theta, sizeof(bits));
      keys.insert({bits, r->head_dim / 2});
    }
  }
  if (keys.empty()) return {};
  const uint32_t positions = std::max(1u, bucket_.tokens);  // scorer rows sit at positions < bucket tokens
  size_t floats = 0;
  for (const auto& k : keys) floats += size_t{2} * positions * k.second;
  TANDEM_ASSIGN(plan_.rope_, DeviceBuffer::make(floats * sizeof(float), "RoPE tables"));
  float* at = plan_.rope_.as<float>();
  for (const auto& [bits, half] : keys) {
    float theta;
    std::memcpy(&theta, &bits, sizeof(theta));
    const std::vector<float> table = rope_table(theta, half, positions);
    // INVARIANT: `at` advances by the table's size within the floats counted above. The copy is ordered
    // before every step on the backend's stream, and drained before the host table goes away.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(at, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice,
                                      device_.stream()));
    TANDEM_TRY(device_.synchronize());
    ropes_[{bits, half}] = RopeTable{at, at + size_t{positions} * half};
    at += table.size();
  }
  return {};
}

Status Lowering::build_inv_freq_tables() {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<float>> tables;
  for (const ir::Op& op : graph_.ops) {
    if (const auto* r = std::get_if<ir::Rope>(&op); r != nullptr && r->head_dim % 2 == 0 && r->head_dim > 0) {
      uint32_t bits;
      std::memcpy(&bits, &r->theta, sizeof(bits));
      tables.emplace(std::make_pair(bits, r->head_dim), ir::rope_inv_freq(r->theta, r->head_dim));
    }
  }
  size_t floats = 0;
  for (const auto& [key, t] : tables) floats += t.size();
  TANDEM_ASSIGN(plan_.inv_freq_, DeviceBuffer::make(floats * sizeof(float), "RoPE inverse frequencies"));
  float* at = plan_.inv_freq_.as<float>();
  for (const auto& [key, t] : tables) {
    // INVARIANT: `at` advances by each table's size within the floats counted above; the copy is drained
    // before the host tables go away.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(at, t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice, device_.stream()));
    inv_freqs_[key] = at;
    at += t.size();
  }
  return device_.synchronize();
}

Result<const float*> Lowering::inv_freq(float theta, uint32_t head_dim) const {
  uint32_t bits;
  std::memcpy(&bits, &theta, sizeof(bits));
  const auto it = inv_freqs_.find({bits, head_dim});
  if (it == inv_freqs_.end()) {
    return Error::make(ErrorKind::kInternal, "no RoPE frequencies for theta {} and head_dim {}", theta, head_dim);
  }
  return it->second;
}

size_t Lowering::fused_ropes(size_t i, float* theta) const {
  const auto& first = std::get<ir::Rope>(graph_.ops[i]);
  size_t j = i;
  while (j < graph_.ops.size() && std::holds_alternative<ir::Rope>(graph_.ops[j]) &&
         std::get<ir::Rope>(graph_.ops[j]).x == first.x) {
    ++j;
  }
  if (j >= graph_.ops.size()) return i;
  const auto* att = std::get_if<ir::Attention>(&graph_.ops[j]);
  if (att == nullptr || att->qkv != first.x || att->head_dim != kernels::kHeadDim) return i;
  // The ropes must rotate exactly q's and k's heads (slots [0, 2H) of 64 columns), once each, alike.
  std::vector<bool> covered(2 * att->heads, false);
  for (size_t r = i; r < j; ++r) {
    const auto& rope = std::get<ir::Rope>(graph_.ops[r]);
    if (rope.head_dim != kernels::kHeadDim || rope.col % kernels::kHeadDim != 0 || rope.theta != first.theta) {
      return i;
    }
    for (uint32_t h = rope.col / kernels::kHeadDim; h < rope.col / kernels::kHeadDim + rope.heads; ++h) {
      if (h >= covered.size() || covered[h]) return i;
      covered[h] = true;
    }
  }
  for (bool c : covered) {
    if (!c) return i;
  }
  // Fusing leaves qkv unrotated in memory: nothing after the attention may read it.
  for (size_t k = j + 1; k < graph_.ops.size(); ++k) {
    for (ir::Val v : ir::uses(graph_.ops[k]).reads) {
      if (v == first.x) return i;
    }
  }
  for (const ir::Output& o : graph_.outputs) {
    if (o.val == first.x) return i;
  }
  *theta = first.theta;
  return j;
}

Status Lowering::lower(size_t i, const ir::Gemm& op) {
  const std::string where = label(i, ir::Op(op));
  TANDEM_ASSIGN(const Loc a, loc(op.a));
  TANDEM_ASSIGN(const Loc out, loc(op.out));
  TANDEM_ASSIGN(const DeviceTensor* w, tensor(op.w));
  TANDEM_ASSIGN(const float* b, bias(op.b));
  // first_rows: the weight's first out-width rows (row-major, so they are its start).
  const bool rows_fit = op.first_rows ? w->shape[0] >= out.width : w->shape[0] == out.width;
  if (a.rows != out.rows || w->shape.size() != 2 || !rows_fit || w->shape[1] != a.width) {
    return Error::make(ErrorKind::kShape, "{}: weight {} is {} for {} to {}", where, graph_.weight(op.w).name(),
                       shape_string(w->shape), a.describe(), out.describe());
  }
  const uint32_t m = bucket_.rows(a.rows);
  if (m == 0) return {};
  GemmShape shape;
  shape.k = a.width;
  shape.n = out.width;
  shape.out = out.type;
  GemmOperands ops;
  ops.out = out.ptr;
  ops.bias = b;
  ops.a = a.ptr;
  if (weights_.precision() != ir::Precision::kF32) {
    shape.ab = half_type(weights_.precision());
    ops.w = w->half.data();
    if (a.type == Dt::kF32) {
      TANDEM_TRY(add(cast_step(ctx_, a, plan_.stage_.data(), shape.ab),
                     fmt::format("{} ({} copy of its input)", where, dt_name(shape.ab))));
      ops.a = plan_.stage_.data();
    } else if (a.type != shape.ab) {
      return Error::make(ErrorKind::kInternal, "{}: {} input for {} weights", where, dt_name(a.type), dt_name(shape.ab));
    }
  } else {
    shape.ab = Dt::kF32;
    ops.w = w->f32.data();
    if (a.type != Dt::kF32) return Error::make(ErrorKind::kInternal, "{}: FP16 input in an FP32 plan", where);
  }
  if (ops.w == nullptr) return Error::make(ErrorKind::kInternal, "{}: weight without a {} copy", where, dt_name(shape.ab));

  unsigned act = kernels::kActNone;
  switch (op.epilogue) {
    case ir::Epilogue::kNone: shape.epilogue = b ? LtEpilogue::kBias : LtEpilogue::kNone; break;
    case ir::Epilogue::kRelu:
      shape.epilogue = b ? LtEpilogue::kReluBias : LtEpilogue::kRelu;
      act = kernels::kActRelu;
      break;
    case ir::Epilogue::kGelu:  // cuBLASLt's GELU is the tanh form: exact erf runs in bias_act instead
      shape.epilogue = LtEpilogue::kNone;
      act = kernels::kActGelu;
      break;
    case ir::Epilogue::kAccumulate:
      shape.accumulate = true;
      shape.epilogue = b ? LtEpilogue::kBias : LtEpilogue::kNone;
      break;
  }
  if (decode_gemm(shape, m)) {
    // gemm_impl.h's rule for decoder plans: the decode GEMM at every m up to kDecodeGemmMaxRows; bias
    // and accumulation happen in it, an activation (no decoder has one) after it.
    Loc in = a;
    if (ops.a != a.ptr) {  // the staging copy made above
      in.ptr = plan_.stage_.data();
      in.type = shape.ab;
    }
    TANDEM_TRY(add(gemm_decode_step(ctx_, in, out, ops.w, b, shape.accumulate), where));
    if (act != kernels::kActNone) TANDEM_TRY(add(bias_act_step(ctx_, out, nullptr, act), where + " (activation)"));
    return {};
  }
  bool fused = shape.epilogue != LtEpilogue::kNone;
  TANDEM_ASSIGN(const auto* ranking, algos_.ranked(shape, kRankedRows, b));
  if (ranking->empty() && fused) {
    if (algos_.note_unfused(shape)) {
      log::info("cuBLASLt has no algorithm for {}; its bias and activation run in bias_act", shape.describe());
    }
    shape.epilogue = LtEpilogue::kNone;
    fused = false;
  }
  // Token-row GEMMs get one Gemm per row tier (each follows the determinism rule on its own); the
  // others run the bucket's rows in every tier.
  GemmStep step;
  step.label = where;
  const std::vector<uint32_t> rows = a.rows == ir::Rows::kTokens ? plan_.tiers_ : std::vector<uint32_t>{m};
  for (uint32_t r : rows) {
    // gemm_impl.h: a decoder's 16-bit GEMMs of up to kDecodeGemmMaxRows rows split K by (k, n) alone.
    GemmShape at = shape;
    if (decoder() && r <= kDecodeGemmMaxRows && shape.ab != Dt::kF32) {
      at.splits = decoder_gemm_splits(shape.k, shape.n, plan_.options_.split_ctas, plan_.options_.split_narrow);
    }
    auto gemm = Gemm::make(device_, algos_, at, r, ops);
    if (!gemm.ok()) return std::move(gemm).error().context(fmt::format("{} at {} rows", where, r));
    if (rows.size() == 1 && !fused && b == nullptr && act == kernels::kActNone) {
      // A decode or verify bucket's GEMM on the streaming kernel where it computes the reference's bits.
      Loc in = a;
      in.ptr = const_cast<void*>(ops.a);  // the input, or the staging copy made above
      in.type = shape.ab;
      TANDEM_ASSIGN(const bool streamed, lower_stream_gemm(*gemm, in, out, ops.w, r, where));
      if (streamed) return {};
    }
    plan_.gemms_.push_back(std::move(gemm).value());
    step.gemm.push_back(plan_.gemms_.size() - 1);
  }
  plan_.steps_.emplace_back(std::move(step));
  const bool needs_kernel = act == kernels::kActGelu || (!fused && (b != nullptr || act != kernels::kActNone));
  if (needs_kernel) {
    TANDEM_TRY(add(bias_act_step(ctx_, out, fused ? nullptr : b, act), where + " (bias and activation)"));
  }
  return {};
}

Result<bool> Lowering::lower_stream_gemm(const Gemm& gemm, const Loc& in, const Loc& out, const void* w, uint32_t rows,
                                         const std::string& where) {
  const GemmShape& shape = gemm.shape();  // as it runs: a split shape no candidate splits runs in one pass
  if (!plan_.options_.stream_gemm || !decoder() || rows > plan_.options_.stream_gemm_rows || shape.ab == Dt::kF32 ||
      !gemm_stream_supported(shape.k, shape.splits, shape.ab, shape.out, shape.accumulate).ok() ||
      rows > gemm_stream_max_rows(shape.k, shape.splits) ||  // at most 16, fewer where they would not fit its smem
      !plan_.modules_->launchable(KernelId::gemm_stream_bf16_f32)) {  // a GPU with less shared memory
    return false;
  }
  TANDEM_ASSIGN(const bool same, gemm_stream_same_bits(device_, *plan_.modules_, algos_, shape, gemm.reference(), w));
  if (same && algos_.probe() && algos_.timed(rows) && plan_.options_.stream_gemm_timed) {
    TANDEM_ASSIGN(const bool faster, gemm_stream_faster(device_, *plan_.modules_, algos_, shape, rows, gemm.algo(), w));
    if (!faster) {
      if (algos_.note_stream_slower(shape, rows)) {
        log::info("cuBLASLt runs {} at {} rows faster than the streaming GEMM; it stays there", shape.describe(), rows);
      }
      return false;
    }
  }
  if (same) {
    TANDEM_TRY(add(gemm_stream_step(ctx_, in, out, w, shape.splits, shape.accumulate), where));
    return true;
  }
  if (algos_.note_unstreamed(shape)) {
    log::info("the streaming GEMM does not give cuBLASLt's bits for {}; it stays on cuBLASLt", shape.describe());
  }
  return false;
}

// Codes and scales as uploaded (weights.cpp: raw bytes), read by the qgemm kernel as they are.
Status Lowering::lower(size_t i, const ir::QGemm& op) {
  const std::string where = label(i, ir::Op(op));
  TANDEM_ASSIGN(const Loc a, loc(op.a));
  TANDEM_ASSIGN(const Loc out, loc(op.out));
  TANDEM_ASSIGN(const DeviceTensor* w, tensor(op.w));
  TANDEM_ASSIGN(const DeviceTensor* s, tensor(op.scales));
  TANDEM_ASSIGN(const float* b, bias(op.b));
  const DType codes = op.bits == 8 ? DType::kI8 : DType::kU8;
  if (w->raw.data() == nullptr || w->raw_dtype != codes) {
    return Error::make(ErrorKind::kFormat, "{}: codes {} {} are {} on the device, expected {}", where,
                       graph_.weight(op.w).name(), shape_string(w->shape),
                       w->raw.data() == nullptr ? std::string_view("not uploaded") : to_string(w->raw_dtype),
                       to_string(codes));
  }
  if (s->raw.data() == nullptr || (s->raw_dtype != DType::kF16 && s->raw_dtype != DType::kBF16)) {
    return Error::make(ErrorKind::kFormat, "{}: scales {} {} are {} on the device, expected F16 or BF16", where,
                       graph_.weight(op.scales).name(), shape_string(s->shape),
                       s->raw.data() == nullptr ? std::string_view("not uploaded") : to_string(s->raw_dtype));
  }
  const std::vector<uint64_t> want_w{out.width, uint64_t{a.width} * op.bits / 8};
  const std::vector<uint64_t> want_s{out.width, op.group == 0 ? 0 : a.width / op.group};
  if (w->shape != want_w || s->shape != want_s) {
    return Error::make(ErrorKind::kShape, "{}: codes {} are {} and scales {} are {} for {} to {}, expected {} and {}",
                       where, graph_.weight(op.w).name(), shape_string(w->shape), graph_.weight(op.scales).name(),
                       shape_string(s->shape), a.describe(), out.describe(), shape_string(want_w),
                       shape_string(want_s));
  }
  QuantWeight q;
  q.codes = w->raw.data();
  q.scales = s->raw.as<const uint16_t>();
  q.scale_bf16 = s->raw_dtype == DType::kBF16;
  q.bits = op.bits;
  q.group = op.group;
  q.packed = w->raw_packed;
  unsigned act = kernels::kActNone;
  bool accumulate = false;
  switch (op.epilogue) {
    case ir::Epilogue::kNone: break;
    case ir::Epilogue::kGelu: act = kernels::kActGelu; break;
    case ir::Epilogue::kRelu: act = kernels::kActRelu; break;
    case ir::Epilogue::kAccumulate: accumulate = true; break;
  }
  // Tensor cores wherever the device has mma.sync (sm_80+), at every row count: one kernel per shape, so a
  // row's bits do not depend on the bucket (docs/quantization.md, "Backends"). Buckets of at least
  // qgemm_whole_k_rows rows take its whole-K mapping, which keeps those bits.
  QGemmKernel kernel = QGemmKernel::kCudaCores;
  if (device_.info().cc_major >= 8) {
    const uint32_t whole_k = plan_.options_.qgemm_whole_k_rows;
    const bool many = whole_k > 0 && ctx_.bucket.rows(a.rows) >= whole_k;
    kernel = many ? QGemmKernel::kTensorCoresWholeK : QGemmKernel::kTensorCores;
  }
  return add(qgemm_step(ctx_, a, q, b, act, accumulate, out, kernel), where);
}

Status Lowering::lower(size_t i, const ir::Embed& o) {
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  TANDEM_ASSIGN(const float* table, f32_weight(o.table));
  return add(embed_step(ctx_, out, table, graph_.weight(o.table).shape[0]), label(i, o));
}

Status Lowering::lower(size_t i, const ir::LayerNorm& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  TANDEM_ASSIGN(const float* w, f32_weight(o.w));
  TANDEM_ASSIGN(const float* b, bias(o.b));
  return add(layer_norm_step(ctx_, x, out, w, b, o.eps), label(i, o));
}

Status Lowering::lower(size_t i, const ir::Rope& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  if (decoder()) {
    TANDEM_ASSIGN(const float* inv, inv_freq(o.theta, o.head_dim));
    return add(head_norm_rope_step(ctx_, x, o.heads, o.head_dim, nullptr, 0.0f, inv, o.col), label(i, o));
  }
  uint32_t bits;
  std::memcpy(&bits, &o.theta, sizeof(bits));
  return add(rope_step(ctx_, x, o, ropes_.at({bits, o.head_dim / 2})), label(i, o));
}

Status Lowering::lower(size_t i, const ir::Attention& o) {
  TANDEM_ASSIGN(const Loc qkv, loc(o.qkv));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(attention_step(ctx_, qkv, out, o, nullptr), label(i, o));
}

Status Lowering::lower(size_t i, const ir::GeGlu& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(geglu_step(ctx_, x, out), label(i, o));
}

Status Lowering::lower(size_t i, const ir::AddType& o) {
  TANDEM_ASSIGN(const Loc h, loc(o.h));
  TANDEM_ASSIGN(const float* table, f32_weight(o.table));
  return add(add_type_step(ctx_, h, table), label(i, o));
}

Status Lowering::lower(size_t i, const ir::PickRows& o) {
  TANDEM_ASSIGN(const Loc h, loc(o.h));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(pick_rows_step(ctx_, h, out), label(i, o));
}

Status Lowering::lower(size_t i, const ir::ActFeatures& o) {
  TANDEM_ASSIGN(const Loc h, loc(o.h));
  TANDEM_ASSIGN(const Loc logits, loc(o.logits));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(act_features_step(ctx_, h, logits, out), label(i, o));
}

Status Lowering::not_run(size_t i, const ir::Op& op) const {
  return Error::make(ErrorKind::kUnsupported, "{}: the CUDA backend does not run {} yet", label(i, op),
                     ir::op_name(op));
}

Status Lowering::lower(size_t i, const ir::RmsNorm& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  TANDEM_ASSIGN(const float* w, f32_weight(o.w));
  return add(rms_norm_step(ctx_, x, out, w, o.eps), label(i, o));
}

Status Lowering::lower(size_t i, const ir::SwiGlu& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(swiglu_step(ctx_, x, out), label(i, o));
}

Result<bool> Lowering::lower_qkv_prep(size_t i, const ir::HeadRmsNorm& q) {
  if (!plan_.options_.fuse_qkv_prep || i + 4 >= graph_.ops.size() || q.col != 0) return false;
  const auto* q_rope = std::get_if<ir::Rope>(&graph_.ops[i + 1]);
  const auto* k = std::get_if<ir::HeadRmsNorm>(&graph_.ops[i + 2]);
  const auto* k_rope = std::get_if<ir::Rope>(&graph_.ops[i + 3]);
  const auto* append = std::get_if<ir::CacheAppend>(&graph_.ops[i + 4]);
  if (q_rope == nullptr || k == nullptr || k_rope == nullptr || append == nullptr) return false;
  const uint32_t hd = q.head_dim, k_col = q.heads * hd, v_col = k_col + k->heads * hd;
  const bool same_row = q_rope->x == q.x && k->x == q.x && k_rope->x == q.x && append->k == q.x && append->v == q.x;
  const bool q_rotated = q_rope->col == 0 && q_rope->heads == q.heads && q_rope->head_dim == hd;
  const bool k_rotated = k->col == k_col && k->head_dim == hd && k->eps == q.eps && k_rope->col == k_col &&
                         k_rope->heads == k->heads && k_rope->head_dim == hd && k_rope->theta == q_rope->theta;
  const bool appended = append->k_col == k_col && append->v_col == v_col && append->cache < graph_.caches.size() &&
                        graph_.caches[append->cache].width == uint64_t{k->heads} * hd;
  if (!same_row || !q_rotated || !k_rotated || !appended) return false;
  TANDEM_ASSIGN(const Loc x, loc(q.x));
  TANDEM_ASSIGN(const float* w_q, f32_weight(q.w));
  TANDEM_ASSIGN(const float* w_k, f32_weight(k->w));
  TANDEM_ASSIGN(const float* inv, inv_freq(q_rope->theta, hd));
  TANDEM_TRY(add(qkv_prep_step(ctx_, x, QkvPrepShape{q.heads, k->heads, hd, q.eps}, w_q, w_k, inv, append->cache,
                               half_type(weights_.precision())),
                 label(i, q) + " (q/k rope and the cache append fused)"));
  skip_ = 4;
  return true;
}

Status Lowering::lower(size_t i, const ir::HeadRmsNorm& o) {
  TANDEM_ASSIGN(const bool fused, lower_qkv_prep(i, o));
  if (fused) return {};
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const float* w, f32_weight(o.w));
  // Qwen3's q_norm / k_norm is followed by the rotation of the same heads: one pass does both.
  const float* inv = nullptr;
  std::string where = label(i, o);
  if (i + 1 < graph_.ops.size()) {
    const auto* r = std::get_if<ir::Rope>(&graph_.ops[i + 1]);
    if (r != nullptr && r->x == o.x && r->col == o.col && r->heads == o.heads && r->head_dim == o.head_dim) {
      TANDEM_ASSIGN(inv, inv_freq(r->theta, r->head_dim));
      skip_ = 1;
      where += " (rope fused)";
    }
  }
  return add(head_norm_rope_step(ctx_, x, o.heads, o.head_dim, w, o.eps, inv, o.col), where);
}

Status Lowering::lower(size_t i, const ir::CacheAppend& o) {
  TANDEM_ASSIGN(const Loc k, loc(o.k));
  TANDEM_ASSIGN(const Loc v, loc(o.v));
  if (o.cache >= graph_.caches.size()) return Error::make(ErrorKind::kInternal, "{}: no cache {}", label(i, o), o.cache);
  return add(cache_append_step(ctx_, k, v, o.cache, half_type(weights_.precision()),
                               static_cast<uint32_t>(graph_.caches[o.cache].width), o.k_col, o.v_col),
             label(i, o));
}

Status Lowering::lower(size_t i, const ir::Tap& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(tap_step(ctx_, x, out, o.col), label(i, o));
}

Status Lowering::lower(size_t i, const ir::CacheAttention& o) {
  TANDEM_ASSIGN(const Loc q, loc(o.q));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add_all(cache_attention_steps(ctx_, q, out, o, half_type(weights_.precision()), plan_.scratch_.data(),
                                       plan_.scratch_.bytes(), device_.info().cc_major >= 8),
                 label(i, o));
}
Status Lowering::lower(size_t i, const ir::Input& o) {
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  if (out.width != graph_.feature_width) {
    return Error::make(ErrorKind::kShape, "{}: {} for feature rows of {}", label(i, o), out.describe(),
                       graph_.feature_width);
  }
  return add(input_step(ctx_, out), label(i, o));
}

Status Lowering::lower(size_t i, const ir::DynConv& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc d, loc(o.d));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  TANDEM_ASSIGN(const float* base, f32_weight(o.base));
  const std::vector<uint64_t> want{2, o.taps, x.width};
  if (graph_.weight(o.base).shape != want) {
    return Error::make(ErrorKind::kShape, "{}: base kernel {} is {}, expected {}", label(i, o),
                       graph_.weight(o.base).name(), shape_string(graph_.weight(o.base).shape), shape_string(want));
  }
  bool accumulate = false;
  switch (o.epilogue) {
    case ir::Epilogue::kNone: break;
    case ir::Epilogue::kAccumulate: accumulate = true; break;
    case ir::Epilogue::kGelu:
    case ir::Epilogue::kRelu: return not_run(i, o);  // supports() refuses these first
  }
  return add(dyn_conv_step(ctx_, x, d, base, out, o.stage, o.taps, o.group, accumulate), label(i, o));
}

Status Lowering::lower(size_t i, const ir::Argmax& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  return add(argmax_step(ctx_, x, o.columns, out), label(i, o));
}

Status Lowering::lower(size_t i, const ir::TopK& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc ids, loc(o.ids));
  TANDEM_ASSIGN(const Loc values, loc(o.values));
  if (!plan_.options_.split_choice) return add(top_k_step(ctx_, x, o.columns, o.k, ids, values), label(i, o));
  return add_all(top_k_steps(ctx_, x, o.columns, o.k, ids, values, plan_.scratch_.data(), plan_.scratch_.bytes()),
                 label(i, o));
}

Status Lowering::lower(size_t i, const ir::Sample& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc out, loc(o.out));
  if (!plan_.options_.split_choice) return add(sample_step(ctx_, x, o.columns, out, o.stream), label(i, o));
  return add_all(sample_steps(ctx_, x, o.columns, out, o.stream, plan_.scratch_.data(), plan_.scratch_.bytes()),
                 label(i, o));
}

Status Lowering::lower(size_t i, const ir::RejectSample& o) {
  TANDEM_ASSIGN(const Loc x, loc(o.x));
  TANDEM_ASSIGN(const Loc ids, loc(o.ids));
  return add_all(reject_sample_steps(ctx_, x, o.columns, ids), label(i, o));
}

Status Lowering::lower(size_t i, const ir::SelectorWalk& o) {
  TANDEM_ASSIGN(const Loc cand, loc(o.cand));
  TANDEM_ASSIGN(const Loc values, loc(o.values));
  TANDEM_ASSIGN(const Loc sel, loc(o.sel));
  TANDEM_ASSIGN(const Loc ids, loc(o.ids));
  TANDEM_ASSIGN(const Loc q, loc(o.q));
  TANDEM_ASSIGN(const float* pred, f32_weight(o.predecessor));
  TANDEM_ASSIGN(const float* succ, f32_weight(o.successor));
  return add(selector_walk_step(ctx_, cand, values, sel, pred, succ, o.softcap, o.multiplier, ids, q), label(i, o));
}

Status Lowering::validate_launches() {
  // Every step once with all real counts 0 (the header is zero): kernels return at once, so this
  // checks each launch's configuration and names the step that the driver rejects. The top tier's
  // GEMMs stand for the others (they differ in rows only).
  TANDEM_TRY(plan_.enqueue(true, plan_.tiers_.size() - 1));
  plan_.count_host_outputs();
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(device_.stream()));
  return {};
}

Status Lowering::run() {
  TANDEM_TRY(device_.activate());
  types_ = value_types(graph_, weights_.precision());
  // The arena is laid out in floats; an FP16 value needs half the floats of its width, so the layout
  // sees those values at half width (rounded up) and they take half-size slots.
  ir::Graph sized = graph_;
  for (size_t v = 0; v < sized.vals.size(); ++v) {
    if (dt_size(types_[v]) == 2) sized.vals[v].width = (sized.vals[v].width + 1) / 2;
  }
  layout_ = ir::layout(sized, [&](ir::Rows r) { return size_t{bucket_.rows(r)}; });
  TANDEM_TRY(allocate());
  TANDEM_TRY(build_rope_tables());
  for (size_t i = 0; i < graph_.ops.size();) {
    float theta = 0.0f;
    if (std::holds_alternative<ir::Rope>(graph_.ops[i])) {
      const size_t j = fused_ropes(i, &theta);
      if (j != i) {
        const auto& att = std::get<ir::Attention>(graph_.ops[j]);
        TANDEM_ASSIGN(const Loc qkv, loc(att.qkv));
        TANDEM_ASSIGN(const Loc out, loc(att.out));
        uint32_t bits;
        std::memcpy(&bits, &theta, sizeof(bits));
        const RopeTable& table = ropes_.at({bits, kernels::kHeadDim / 2});
        TANDEM_TRY(add(attention_step(ctx_, qkv, out, att, &table), label(j, graph_.ops[j]) + " (rope fused)"));
        i = j + 1;
        continue;
      }
    }
    TANDEM_TRY(lower_op(i, graph_.ops[i]));
    i += 1 + skip_;
    skip_ = 0;
  }
  size_t host = 0;
  for (const ir::Output& o : graph_.outputs) {
    TANDEM_ASSIGN(const Loc l, loc(o.val));
    const bool ids = graph_.info(o.val).elem == ir::Elem::kU32;
    if (o.placement == ir::Placement::kHost && l.type != (ids ? Dt::kU32 : Dt::kF32)) {
      return Error::make(ErrorKind::kInternal, "host output {} is neither FP32 values nor U32 ids", o.name);
    }
    const ir::Storage storage = ids ? ir::Storage::kU32 : storage_of(l.type);
    plan_.outputs_.push_back({l.ptr, host, l.rows, l.width, o.placement, storage});
    if (o.placement == ir::Placement::kHost) host += size_t{bucket_.rows(l.rows)} * l.width;
  }
  TANDEM_TRY(validate_launches());
  if (plan_.options_.graphs) TANDEM_TRY(plan_.capture());
  return {};
}

Result<std::unique_ptr<CudaPlan>> lower_plan(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                             const CudaWeights& weights, const ir::Graph& graph, ir::Bucket bucket,
                                             const PlanOptions& options, ir::Backend* owner) {
  std::unique_ptr<CudaPlan> plan(new CudaPlan());
  plan->owner_ = owner;
  plan->device_ = &device;
  plan->modules_ = &modules;
  plan->options_ = options;
  plan->bucket_ = bucket;
  Lowering lowering(device, algos, weights, graph, bucket, *plan);
  auto st = lowering.run();
  if (!st.ok()) return std::move(st).error().context("lowering for bucket " + ir::to_string(bucket));
  return plan;
}

}  // namespace tandem::cuda

// The CPU backend (cpu_backend.h): lower lays out one arena per bucket (ir::layout) and resolves every
// weight and per-op table once; run interprets the ops in graph order on the batch's real rows; a
// State holds the graph's caches as K and V arrays [slots][capacity][width].
#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <variant>

#include "engine/core/overloaded.h"
#include "engine/core/thread_pool.h"
#include "engine/cpu/cpu_backend_impl.h"
#include "engine/cpu/ops_impl.h"
#include "engine/ir/executor.h"
#include "engine/ir/layout.h"

namespace tandem::cpu {
namespace {

uint32_t real_rows(const ir::Batch& batch, ir::Rows rows) {
  switch (rows) {
    case ir::Rows::kTokens: return batch.tokens();
    case ir::Rows::kSeqs: return batch.seqs();
    case ir::Rows::kPicks: return batch.num_picks();
  }
  return 0;
}

class CpuState final : public ir::State {
 public:
  CpuState(uint32_t slots, uint32_t capacity) : slots_(slots), capacity_(capacity) {}
  uint32_t slots() const override { return slots_; }
  uint32_t capacity() const override { return capacity_; }
  size_t bytes() const override {
    size_t total = 0;
    for (size_t c = 0; c < k_.size(); ++c) total += (k_[c].size() + v_[c].size()) * sizeof(float);
    return total;
  }
  size_t bytes_per_position() const override {
    size_t total = 0;
    for (uint32_t w : widths_) total += size_t{2} * w * sizeof(float);
    return total;
  }
  void add_cache(uint32_t width) {
    const size_t n = size_t{slots_} * capacity_ * width;
    widths_.push_back(width);
    k_.emplace_back(n, 0.0f);
    v_.emplace_back(n, 0.0f);
  }
  uint32_t row_width() const override {
    uint32_t total = 0;
    for (uint32_t w : widths_) total += 2 * w;
    return total;
  }
  Status read_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<float> out) const override {
    TANDEM_TRY(check_rows(slot, first, count, out.size()));
    float* to = out.data();
    for (uint32_t p = first; p < first + count; ++p) {
      for (size_t c = 0; c < widths_.size(); ++c) {
        const size_t at = (size_t{slot} * capacity_ + p) * widths_[c];
        to = std::copy_n(k_[c].data() + at, widths_[c], to);
        to = std::copy_n(v_[c].data() + at, widths_[c], to);
      }
    }
    return ok_status();
  }
  Status write_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<const float> rows) override {
    TANDEM_TRY(check_rows(slot, first, count, rows.size()));
    const float* from = rows.data();
    for (uint32_t p = first; p < first + count; ++p) {
      for (size_t c = 0; c < widths_.size(); ++c) {
        const size_t at = (size_t{slot} * capacity_ + p) * widths_[c];
        std::copy_n(from, widths_[c], k_[c].data() + at);
        from += widths_[c];
        std::copy_n(from, widths_[c], v_[c].data() + at);
        from += widths_[c];
      }
    }
    return ok_status();
  }
  const std::vector<uint32_t>& widths() const { return widths_; }
  CacheView view(uint32_t cache) { return {k_[cache].data(), v_[cache].data(), capacity_, widths_[cache]}; }

 private:
  uint32_t slots_;
  uint32_t capacity_;
  std::vector<uint32_t> widths_;
  std::vector<std::vector<float>> k_;
  std::vector<std::vector<float>> v_;

  Status check_rows(uint32_t slot, uint32_t first, uint32_t count, size_t values) const {
    if (slot >= slots_ || uint64_t{first} + count > capacity_ || values != size_t{count} * row_width()) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "cpu state: rows {}..{} of slot {} as {} values (the state has {} slots x {} positions, "
                         "{} values a row)",
                         first, uint64_t{first} + count, slot, values, slots_, capacity_, row_width());
    }
    return ok_status();
  }
};

class CpuPlan final : public ir::Plan {
 public:
  ir::Bucket bucket() const override { return bucket_; }
  size_t bytes() const override { return arena_len * sizeof(float); }

  const void* owner = nullptr;  // the backend that lowered it
  ir::Graph graph;              // a copy, so the plan does not depend on the caller's graph
  ir::Bucket bucket_;
  std::unique_ptr<float[]> arena;  // uninitialized: every value is written before it is read
  size_t arena_len = 0;
  std::vector<float*> val_ptr;              // per value; null for values no op touches
  std::vector<const CpuTensor*> weights;    // per graph weight
  std::vector<std::vector<float>> rope_inv;  // per op: Rope's inverse frequencies
};

// An op may read the value it writes only where its semantics say so: in-place ops, the accumulate
// target of Gemm/DynConv, Tap's joined row, and row-local norms. Anything else would read rows it has
// already overwritten.
Status check_aliasing(const ir::Graph& graph) {
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const ir::Op& op = graph.ops[i];
    const bool may_alias_once = std::visit(
        Overloaded{
            [](const ir::Rope&) { return true; },
            [](const ir::HeadRmsNorm&) { return true; },
            [](const ir::AddType&) { return true; },
            [](const ir::LayerNorm&) { return true; },
            [](const ir::RmsNorm&) { return true; },
            [](const ir::Tap&) { return true; },
            [](const ir::RejectSample&) { return true; },
            [](const ir::Gemm& o) { return o.epilogue == ir::Epilogue::kAccumulate; },
            [](const ir::QGemm& o) { return o.epilogue == ir::Epilogue::kAccumulate; },
            [](const ir::DynConv& o) { return o.epilogue == ir::Epilogue::kAccumulate; },
            [](const auto&) { return false; },
        },
        op);
    const ir::Uses u = ir::uses(op);
    for (ir::Val w : u.writes) {
      size_t reads = 0;
      for (ir::Val r : u.reads) reads += r == w ? 1 : 0;
      if (reads > (may_alias_once ? 1u : 0u)) {
        return Error::make(ErrorKind::kInvalidArgument, "graph op {} ({}) reads its output '{}' as an input", i,
                           ir::op_name(op), graph.info(w).name);
      }
    }
    if (const auto* dc = std::get_if<ir::DynConv>(&op)) {
      if (dc->epilogue != ir::Epilogue::kNone && dc->epilogue != ir::Epilogue::kAccumulate) {
        return Error::make(ErrorKind::kUnsupported, "graph op {} (dyn_conv): only the none and accumulate "
                           "epilogues apply to a convolution", i);
      }
    }
  }
  return {};
}

class CpuBackend final : public ir::Backend {
 public:
  CpuBackend(size_t threads, Isa isa) : pool_(threads), isa_(isa) {}

  ir::Caps caps() const override {
    return {"cpu", fmt::format("{} threads, {}", pool_.size(), to_string(isa_)), false, true};
  }

  // The reference runs every op of the IR (run_op's visit is exhaustive).
  Status supports(const ir::Graph&, const ir::Op&) const override { return {}; }

  Result<std::unique_ptr<ir::Weights>> upload(const WeightSource& source,
                                              std::span<const ir::Graph* const> graphs) override {
    try {
      TANDEM_ASSIGN(auto weights, upload_weights(source, graphs));
      return std::unique_ptr<ir::Weights>(std::move(weights));
    } catch (const std::bad_alloc&) {
      return Error(ErrorKind::kCapacity, "uploading weights to cpu: out of host memory");
    }
  }

  Result<std::unique_ptr<ir::Plan>> lower(const ir::Weights& weights, const ir::Graph& graph,
                                          ir::Bucket bucket) override;
  Result<std::unique_ptr<ir::State>> create_state(const ir::Graph& graph, uint32_t slots,
                                                  uint32_t capacity) override;
  Status run(ir::Plan& plan, const ir::Batch& batch, ir::State* state, ir::Outputs& out) override;
  Status fetch(const ir::DeviceRows& rows, uint32_t first, uint32_t count, ir::Tensor2& out) override;

 private:
  Status check_run(const CpuPlan& plan, const ir::Batch& batch, ir::State* state, CpuState*& cpu_state) const;
  void run_op(CpuPlan& plan, size_t index, const ir::Batch& batch, CpuState* state);
  // Input's rows for a batch: its host features, or its device rows gathered (fetched from the backend
  // that holds them when that is not this one) into gathered_.
  Result<std::span<const float>> features(const ir::Batch& batch, uint32_t width);

  ThreadPool pool_;
  Isa isa_;
  std::mutex run_mutex_;  // the pool runs one job at a time
  std::vector<float> gathered_;
  ir::Tensor2 fetched_;
  std::span<const float> run_features_;  // Input's rows during run_op
};

Result<std::unique_ptr<ir::Plan>> CpuBackend::lower(const ir::Weights& weights, const ir::Graph& graph,
                                                    ir::Bucket bucket) {
  const auto* cpu_weights = dynamic_cast<const CpuWeights*>(&weights);
  if (cpu_weights == nullptr) {
    return Error(ErrorKind::kInvalidArgument, "lowering on cpu: the weights were uploaded by another backend");
  }
  TANDEM_TRY(ir::validate(graph));
  TANDEM_TRY(ir::check_supported(*this, graph));
  TANDEM_TRY(check_aliasing(graph));
  auto plan = std::make_unique<CpuPlan>();
  plan->owner = this;
  plan->graph = graph;
  plan->bucket_ = bucket;

  const std::vector<WeightNeeds> needs = weight_needs(graph);
  for (size_t i = 0; i < graph.weights.size(); ++i) {
    const ir::WeightRef& ref = graph.weights[i];
    const CpuTensor* t = cpu_weights->find(ref.name());
    if (t == nullptr) return Error::make(ErrorKind::kNotFound, "weight {} was not uploaded", ref.name());
    if (t->shape != ref.shape) {
      return Error::make(ErrorKind::kShape, "weight {} was uploaded as {}, this graph needs {}", ref.name(),
                         shape_string(t->shape), shape_string(ref.shape));
    }
    if ((needs[i].packed && !t->packed) || (needs[i].values && t->values.empty()) ||
        (needs[i].code_bits != 0 && t->codes.empty())) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "weight {} was uploaded for other graphs that use it differently; upload with this one",
                         ref.name());
    }
    plan->weights.push_back(t);
  }

  plan->rope_inv.resize(graph.ops.size());
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (const auto* r = std::get_if<ir::Rope>(&graph.ops[i])) plan->rope_inv[i] = ir::rope_inv_freq(r->theta, r->head_dim);
  }

  const ir::Layout lay = ir::layout(graph, [&](ir::Rows r) { return size_t{bucket.rows(r)}; });
  try {
    plan->arena.reset(new float[std::max<size_t>(lay.len, 1)]);
  } catch (const std::bad_alloc&) {
    return Error::make(ErrorKind::kCapacity, "lowering bucket {} on cpu: cannot allocate an arena of {} bytes",
                       ir::to_string(bucket), lay.len * sizeof(float));
  }
  plan->arena_len = lay.len;
  plan->val_ptr.assign(graph.vals.size(), nullptr);
  for (size_t v = 0; v < graph.vals.size(); ++v) {
    if (lay.offset[v] != ir::kNotPlaced) plan->val_ptr[v] = plan->arena.get() + lay.offset[v];
  }
  return std::unique_ptr<ir::Plan>(std::move(plan));
}

Result<std::unique_ptr<ir::State>> CpuBackend::create_state(const ir::Graph& graph, uint32_t slots,
                                                            uint32_t capacity) {
  auto state = std::make_unique<CpuState>(slots, capacity);
  try {
    for (const ir::CacheInfo& c : graph.caches) state->add_cache(c.width);
  } catch (const std::bad_alloc&) {
    return Error::make(ErrorKind::kCapacity, "cpu state: cannot allocate {} caches of {} slots × {} positions",
                       graph.caches.size(), slots, capacity);
  }
  return std::unique_ptr<ir::State>(std::move(state));
}

// The few facts run relies on beyond ir::check: the batch fits the plan's bucket, the state matches
// the graph's caches, and every row lands inside its cache slot.
Status CpuBackend::check_run(const CpuPlan& plan, const ir::Batch& batch, ir::State* state,
                             CpuState*& cpu_state) const {
  if (plan.owner != this) return Error(ErrorKind::kInvalidArgument, "the plan was lowered by another backend");
  if (!plan.bucket_.holds(batch.tokens(), batch.seqs(), batch.num_picks())) {
    return Error::make(ErrorKind::kCapacity, "a batch of {} tokens, {} sequences and {} markers does not fit "
                       "bucket {}", batch.tokens(), batch.seqs(), batch.num_picks(), ir::to_string(plan.bucket_));
  }
  const ir::Graph& g = plan.graph;
  const size_t features = size_t{batch.tokens()} * g.feature_width;
  if (batch.device_features()) {
    if (g.feature_width == 0 || batch.feature_rows.size() != batch.tokens() ||
        batch.feature_source.width != g.feature_width) {
      return Error::make(ErrorKind::kInvalidArgument, "batch.feature_rows has {} rows of {} for {} tokens, the graph "
                         "reads rows of {}", batch.feature_rows.size(), batch.feature_source.width, batch.tokens(),
                         g.feature_width);
    }
  } else if (batch.features.size() != features) {
    return Error::make(ErrorKind::kInvalidArgument, "batch.features has {} values, the graph reads {}",
                       batch.features.size(), features);
  }
  for (const ir::ProposalRows& p : batch.proposals) {
    if (!p.empty() && (p.values.owner != this || (!p.dense() && p.ids.owner != this))) {
      return Error(ErrorKind::kInvalidArgument, "the batch's proposal rows are held by another backend: rejection "
                   "sampling reads them where they are");
    }
  }
  if (g.caches.empty()) return {};
  cpu_state = dynamic_cast<CpuState*>(state);
  if (cpu_state == nullptr) {
    return Error(ErrorKind::kInvalidArgument, "this graph has caches: run it with a State from the cpu backend");
  }
  bool same = cpu_state->widths().size() == g.caches.size();
  for (size_t c = 0; same && c < g.caches.size(); ++c) same = cpu_state->widths()[c] == g.caches[c].width;
  if (!same) return Error(ErrorKind::kInvalidArgument, "the State was created for a graph with other caches");
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    if (batch.seq_slot(s) >= cpu_state->slots() ||
        uint64_t{batch.seq_start(s)} + batch.seq_len(s) > cpu_state->capacity()) {
      return Error::make(ErrorKind::kCapacity, "sequence {} (slot {}, positions {}..{}) is outside the cache "
                         "({} slots of {} positions)", s, batch.seq_slot(s), batch.seq_start(s),
                         batch.seq_start(s) + batch.seq_len(s), cpu_state->slots(), cpu_state->capacity());
    }
  }
  return {};
}

void CpuBackend::run_op(CpuPlan& plan, size_t index, const ir::Batch& batch, CpuState* state) {
  const Exec ex{pool_, isa_};
  const ir::Graph& g = plan.graph;
  auto mat = [&](ir::Val v) { return Mat{plan.val_ptr[v.index], real_rows(batch, g.info(v).rows), g.info(v).width}; };
  auto values = [&](ir::WeightId w) { return plan.weights[w.index]->values.data(); };
  auto optional = [&](const std::optional<ir::WeightId>& w) { return w ? values(*w) : nullptr; };
  std::visit(
      Overloaded{
          [&](const ir::Embed& o) { embed(ex, batch.ids, values(o.table), mat(o.out)); },
          [&](const ir::LayerNorm& o) { layer_norm(ex, mat(o.x), values(o.w), optional(o.b), o.eps, mat(o.out)); },
          [&](const ir::RmsNorm& o) { rms_norm(ex, mat(o.x), values(o.w), o.eps, mat(o.out)); },
          [&](const ir::Gemm& o) {
            gemm(ex, mat(o.a), *plan.weights[o.w.index]->packed, optional(o.b), o.epilogue, mat(o.out));
          },
          [&](const ir::QGemm& o) {
            const ir::Val out_val = o.out;
            const QuantMatrix w{g.info(out_val).width, g.info(o.a).width, o.bits, o.group,
                                plan.weights[o.w.index]->codes.data(), values(o.scales)};
            qgemm(ex, mat(o.a), w, optional(o.b), o.epilogue, mat(o.out));
          },
          [&](const ir::Rope& o) {
            rope(ex, batch, mat(o.x), o.col, o.heads, o.head_dim, plan.rope_inv[index].data());
          },
          [&](const ir::GeGlu& o) { geglu(ex, mat(o.x), mat(o.out)); },
          [&](const ir::SwiGlu& o) { swiglu(ex, mat(o.x), mat(o.out)); },
          [&](const ir::Attention& o) { attention(ex, batch, mat(o.qkv), o.heads, o.head_dim, o.window, mat(o.out)); },
          [&](const ir::AddType& o) { add_type(batch, mat(o.h), values(o.table)); },
          [&](const ir::PickRows& o) { pick_rows(batch, mat(o.h), mat(o.out)); },
          [&](const ir::Argmax& o) { argmax(ex, mat(o.x), o.columns, mat(o.out)); },
          [&](const ir::TopK& o) { top_k(ex, mat(o.x), o.columns, o.k, mat(o.ids), mat(o.values)); },
          [&](const ir::Sample& o) { sample(ex, batch, mat(o.x), o.columns, o.stream, mat(o.out)); },
          [&](const ir::RejectSample& o) { reject_sample(ex, batch, mat(o.x), o.columns, mat(o.ids)); },
          [&](const ir::SelectorWalk& o) {
            selector_walk(ex, batch, mat(o.cand), mat(o.values), mat(o.sel), values(o.predecessor),
                          values(o.successor), o.softcap, o.multiplier, mat(o.ids), mat(o.q));
          },
          [&](const ir::ActFeatures& o) { act_features(batch, mat(o.h), mat(o.logits), mat(o.out)); },
          [&](const ir::HeadRmsNorm& o) {
            head_rms_norm(ex, columns(mat(o.x), o.col, o.heads * o.head_dim), values(o.w), o.heads, o.head_dim, o.eps);
          },
          [&](const ir::CacheAppend& o) {
            const CacheView cache = state->view(o.cache);
            cache_append(batch, columns(mat(o.k), o.k_col, cache.width), columns(mat(o.v), o.v_col, cache.width), cache);
          },
          [&](const ir::CacheAttention& o) {
            cache_attention(ex, batch, columns(mat(o.q), o.q_col, o.q_heads * o.head_dim), state->view(o.cache),
                            o.q_heads, o.kv_heads, o.head_dim, o.causal, o.window, mat(o.out));
          },
          [&](const ir::Input& o) { input(run_features_, mat(o.out)); },
          [&](const ir::Tap& o) { tap(mat(o.x), mat(o.out), o.col); },
          [&](const ir::DynConv& o) {
            dyn_conv(batch, mat(o.x), mat(o.d), values(o.base), o.stage, o.taps, o.group, o.epilogue, mat(o.out));
          },
      },
      g.ops[index]);
}

Status CpuBackend::run(ir::Plan& plan, const ir::Batch& batch, ir::State* state, ir::Outputs& out) {
  auto* cpu_plan = dynamic_cast<CpuPlan*>(&plan);
  if (cpu_plan == nullptr) return Error(ErrorKind::kInvalidArgument, "the plan was lowered by another backend");
  CpuState* cpu_state = nullptr;
  TANDEM_TRY(check_run(*cpu_plan, batch, state, cpu_state));
  const std::lock_guard<std::mutex> lock(run_mutex_);
  TANDEM_ASSIGN(run_features_, features(batch, cpu_plan->graph.feature_width));
  for (size_t i = 0; i < cpu_plan->graph.ops.size(); ++i) run_op(*cpu_plan, i, batch, cpu_state);

  const ir::Graph& g = cpu_plan->graph;
  out.values.resize(g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ir::ValInfo& info = g.info(g.outputs[i].val);
    ir::Tensor2& t = out.values[i];
    t.rows = real_rows(batch, info.rows);
    t.width = info.width;
    const float* src = cpu_plan->val_ptr[g.outputs[i].val.index];
    const size_t n = size_t{t.rows} * t.width;
    t.data.clear();
    t.ids.clear();
    t.device = {};
    if (g.outputs[i].placement == ir::Placement::kDevice) {
      // The CPU's "device" is host memory: the arena value itself, valid until this plan runs again.
      t.device = {src, t.rows, t.width, t.width, info.elem == ir::Elem::kU32 ? ir::Storage::kU32 : ir::Storage::kF32,
                  this};
    } else if (info.elem == ir::Elem::kU32) {
      t.ids.resize(n);
      std::memcpy(t.ids.data(), src, n * sizeof(uint32_t));
    } else {
      t.data.assign(src, src + n);
    }
  }
  return {};
}

Result<std::span<const float>> CpuBackend::features(const ir::Batch& batch, uint32_t width) {
  if (!batch.device_features()) return std::span<const float>(batch.features);
  const ir::DeviceRows& src = batch.feature_source;
  const auto [lo, hi] = std::minmax_element(batch.feature_rows.begin(), batch.feature_rows.end());
  if (*hi >= src.rows) {
    return Error::make(ErrorKind::kInvalidArgument, "batch.feature_rows reaches row {} of {} device rows", *hi,
                       src.rows);
  }
  const float* base = nullptr;
  size_t stride = src.stride;
  uint32_t first = 0;
  if (src.owner == this) {
    if (src.storage != ir::Storage::kF32) {
      return Error::make(ErrorKind::kInvalidArgument, "feature rows of {} on the cpu backend", ir::to_string(src.storage));
    }
    // INVARIANT: CPU device rows are f32 arena rows `stride` apart (CpuBackend::run), valid until that plan
    // runs again, which the caller does not do before this run.
    base = static_cast<const float*>(src.data);
  } else {
    // Another backend's device: one copy of the rows the batch reads, converted to floats.
    first = *lo;
    auto st = src.owner->fetch(src, first, *hi - first + 1, fetched_);
    if (!st.ok()) return std::move(st).error().context("fetching the batch's feature rows");
    base = fetched_.data.data();
    stride = width;
  }
  gathered_.resize(size_t{batch.tokens()} * width);
  for (uint32_t r = 0; r < batch.tokens(); ++r) {
    std::memcpy(gathered_.data() + size_t{r} * width, base + (batch.feature_rows[r] - first) * stride,
                size_t{width} * sizeof(float));
  }
  return std::span<const float>(gathered_);
}

Status CpuBackend::fetch(const ir::DeviceRows& rows, uint32_t first, uint32_t count, ir::Tensor2& out) {
  if (rows.owner != this) return Error(ErrorKind::kInvalidArgument, "fetching rows another backend holds");
  if (uint64_t{first} + count > rows.rows) {
    return Error::make(ErrorKind::kInvalidArgument, "fetching rows {}..{} of {} device rows", first, first + count,
                       rows.rows);
  }
  out.rows = count;
  out.width = rows.width;
  out.device = {};
  out.data.clear();
  out.ids.clear();
  const size_t n = size_t{count} * rows.width;
  // INVARIANT: CPU device rows are f32 or u32 arena rows `stride` elements apart (CpuBackend::run).
  const auto* base = static_cast<const float*>(rows.data) + size_t{first} * rows.stride;
  if (rows.storage == ir::Storage::kU32) {
    out.ids.resize(n);
    for (uint32_t r = 0; r < count; ++r) {
      std::memcpy(out.ids.data() + size_t{r} * rows.width, base + size_t{r} * rows.stride,
                  rows.width * sizeof(uint32_t));
    }
  } else {
    out.data.resize(n);
    for (uint32_t r = 0; r < count; ++r) {
      std::memcpy(out.data.data() + size_t{r} * rows.width, base + size_t{r} * rows.stride,
                  rows.width * sizeof(float));
    }
  }
  return {};
}

}  // namespace

std::unique_ptr<ir::Backend> make_cpu_backend(size_t threads, Isa isa) {
  return std::make_unique<CpuBackend>(threads, isa_supported(isa) ? isa : Isa::kBase);
}

std::unique_ptr<ir::Backend> make_cpu_backend(size_t threads) { return make_cpu_backend(threads, best_isa()); }

}  // namespace tandem::cpu

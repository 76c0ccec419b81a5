// Running a lowered plan: the step list enqueued (or captured once as a CUDA graph and replayed), the
// index copy in and the outputs out through pinned buffers, and an event profile for benchmarks.
#include <algorithm>
#include <cstring>

#include "engine/cuda/check_impl.h"
#include "engine/cuda/plan_impl.h"

namespace tandem::cuda {

std::vector<uint32_t> gemm_tiers(uint32_t tokens, uint32_t min_tokens) {
  if (min_tokens == 0 || tokens < min_tokens) return {tokens};
  constexpr uint32_t kParts = 8, kAlign = 64;
  const uint32_t step = ((tokens + kParts - 1) / kParts + kAlign - 1) / kAlign * kAlign;
  std::vector<uint32_t> out;
  for (uint32_t r = step; r < tokens; r += step) out.push_back(r);
  out.push_back(tokens);
  return out;
}

CudaPlan::~CudaPlan() {
  if (device_ != nullptr) (void)cudaSetDevice(device_->info().index);
  for (cudaGraphExec_t e : execs_) (void)cudaGraphExecDestroy(e);
  for (cudaGraph_t g : graphs_) (void)cudaGraphDestroy(g);
}

size_t CudaPlan::tier_for(uint32_t tokens) const {
  for (size_t t = 0; t + 1 < tiers_.size(); ++t) {
    if (tokens <= tiers_[t]) return t;
  }
  return tiers_.size() - 1;
}

Status CudaPlan::run_step(const Step& step, size_t tier, cudaStream_t stream) const {
  if (const auto* k = std::get_if<KernelStep>(&step)) return launch(*modules_, *k, stream);
  const auto& g = std::get<GemmStep>(step);
  auto r = gemms_[g.at(tier)].run(*device_);
  if (!r.ok()) return std::move(r).error().context(g.label);
  return r;
}

size_t CudaPlan::bytes() const {
  return arena_.bytes() + stage_.bytes() + rope_.bytes() + inv_freq_.bytes() + scratch_.bytes() + index_dev_.bytes() +
         features_dev_.bytes();
}

Status CudaPlan::check_features(const ir::Batch& batch) const {
  if (feature_width_ == 0) {
    if (batch.features.empty() && !batch.device_features()) return {};
    return Error(ErrorKind::kInvalidArgument, "this graph reads no feature rows, but the batch has some");
  }
  if (batch.device_features()) {
    const ir::DeviceRows& src = batch.feature_source;
    // Device rows of another backend may live on another device (or on the host): they are fetched first.
    if (src.owner != owner_ || owner_ == nullptr) {
      return Error(ErrorKind::kInvalidArgument, "the batch's feature rows are held by another backend: fetch them "
                   "to the host first");
    }
    if (src.storage == ir::Storage::kU32 || src.width != feature_width_ || src.stride < src.width ||
        batch.feature_rows.size() != batch.tokens() || !batch.features.empty()) {
      return Error::make(ErrorKind::kInvalidArgument, "feature rows of {} {} ({} apart) for {} tokens: the graph "
                         "reads one float row of {} per token", ir::to_string(src.storage), src.width, src.stride,
                         batch.tokens(), feature_width_);
    }
    for (uint32_t r = 0; r < batch.tokens(); ++r) {
      if (batch.feature_rows[r] >= src.rows) {
        return Error::make(ErrorKind::kInvalidArgument, "feature_rows[{}] = {} is outside the {} device rows", r,
                           batch.feature_rows[r], src.rows);
      }
    }
    return {};
  }
  if (batch.features.size() != size_t{batch.tokens()} * feature_width_) {
    return Error::make(ErrorKind::kInvalidArgument, "batch.features has {} values, the graph reads {} rows of {}",
                       batch.features.size(), batch.tokens(), feature_width_);
  }
  return {};
}

Status CudaPlan::check_batch(const ir::Batch& batch, const CudaState* state) const {
  // The executor picked this bucket for the batch and ir::check validated it; this only guards the
  // buffers against a caller that skipped both.
  if (!bucket_.holds(batch.tokens(), batch.seqs(), batch.num_picks())) {
    return Error::make(ErrorKind::kInternal, "a batch of {}/{}/{} does not fit the plan of bucket {}",
                       batch.tokens(), batch.seqs(), batch.num_picks(), ir::to_string(bucket_));
  }
  TANDEM_TRY(check_features(batch));
  for (const ir::ProposalRows& p : batch.proposals) {
    if (!p.empty() && (p.values.owner != owner_ || (!p.dense() && p.ids.owner != owner_))) {
      return Error(ErrorKind::kInvalidArgument, "the batch's proposal rows are held by another backend: rejection "
                   "sampling reads them on this device");
    }
    if (!p.empty() && !p.dense() && p.values.width > kernels::kTopKMax) {
      return Error::make(ErrorKind::kUnsupported, "proposals over {} candidates (rejection sampling takes up to {})",
                         p.values.width, static_cast<unsigned>(kernels::kTopKMax));
    }
  }
  if (cache_widths_.empty()) {
    if (state != nullptr || !batch.start.empty() || !batch.slot.empty()) {
      return Error(ErrorKind::kInvalidArgument, "this graph has no caches: run it without a State or start/slot");
    }
    return {};
  }
  if (state == nullptr) return Error(ErrorKind::kInvalidArgument, "this graph has caches: run it with a State");
  if (state->device() != device_ || state->widths() != cache_widths_) {
    return Error(ErrorKind::kInvalidArgument, "the State was created for another graph or device");
  }
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    if (batch.seq_slot(s) >= state->slots() || uint64_t{batch.seq_start(s)} + batch.seq_len(s) > state->capacity()) {
      return Error::make(ErrorKind::kCapacity, "sequence {} (slot {}, positions {}..{}) is outside the cache "
                         "({} slots of {} positions)", s, batch.seq_slot(s), batch.seq_start(s),
                         batch.seq_start(s) + batch.seq_len(s), state->slots(), state->capacity());
    }
  }
  return {};
}

Status CudaPlan::enqueue(bool sync_each, size_t tier) const {
  const cudaStream_t s = device_->stream();
  // INVARIANT: host and device index buffers both hold index_.words u32 (lowering), and every later
  // step is ordered after this copy on the one stream.
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(index_dev_.data(), index_host_.data(), index_.words * sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, s));
  for (const Step& step : steps_) {
    TANDEM_TRY(run_step(step, tier, s));
    if (sync_each) {
      const cudaError_t e = cudaStreamSynchronize(s);
      if (e != cudaSuccess) return cuda_error(e, "cudaStreamSynchronize", __FILE__, __LINE__).context(step_label(step));
    }
  }
  for (const OutputCopy& o : outputs_) {
    if (o.placement == ir::Placement::kDevice) continue;  // left where the run wrote it
    const size_t n = size_t{bucket_.rows(o.rows)} * o.width;
    // INVARIANT: out_host_ holds every output's bucket rows at its offset (lowering); the copy runs after
    // the steps that write the output, in stream order, and run() synchronizes before reading it.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(out_host_.as<uint32_t>() + o.host, o.src, n * sizeof(uint32_t),
                                      cudaMemcpyDeviceToHost, s));
  }
  return {};
}

void CudaPlan::count_host_outputs() const {
  uint64_t bytes = 0, copies = 0;
  for (const OutputCopy& o : outputs_) {
    if (o.placement == ir::Placement::kDevice) continue;
    bytes += uint64_t{bucket_.rows(o.rows)} * o.width * sizeof(uint32_t);
    ++copies;
  }
  device_->count_d2h(bytes, copies);
  device_->set_last_run_d2h(bytes);
}

Status CudaPlan::capture() {
  const cudaStream_t s = device_->stream();
  for (size_t tier = 0; tier < tiers_.size(); ++tier) {
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    const Status enqueued = enqueue(false, tier);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s, &graph);  // always end, even after a failed enqueue
    if (!enqueued.ok()) {
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      return Error(enqueued.error()).context(fmt::format("capturing the CUDA graph of {} token rows", tiers_[tier]));
    }
    TANDEM_CUDA_CHECK(ended);
    graphs_.push_back(graph);
    cudaGraphExec_t exec = nullptr;
    TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    execs_.push_back(exec);
    TANDEM_CUDA_CHECK(cudaGraphUpload(exec, s));
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
  return {};
}

Status CudaPlan::run(const ir::Batch& batch, const CudaState* state, ir::Outputs& out) {
  TANDEM_TRY(check_batch(batch, state));
  TANDEM_TRY(device_->activate());
  const BoundCaches bound = state == nullptr ? BoundCaches{} : BoundCaches{state->table().data(), state->capacity()};
  fill_index(index_, batch, index_host_.as<uint32_t>(), bound);
  fill_proposals(index_, batch, index_host_.as<uint32_t>());
  if (feature_width_ > 0) {
    fill_features(index_, batch, index_host_.as<uint32_t>(), features_dev_.data(), feature_width_);
    if (!batch.device_features() && !batch.features.empty()) {
      // INVARIANT: check_features sized the rows (tokens × width <= the bucket's, as both buffers are);
      // the copy is ordered before the steps on the one stream, and the previous run synchronized, so
      // nothing still reads the pinned rows.
      const size_t bytes = batch.features.size() * sizeof(float);
      std::memcpy(features_host_.data(), batch.features.data(), bytes);
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(features_dev_.data(), features_host_.data(), bytes, cudaMemcpyHostToDevice,
                                        device_->stream()));
    }
  }
  const size_t tier = tier_for(batch.tokens());
  if (!execs_.empty()) {
    TANDEM_CUDA_CHECK(cudaGraphLaunch(execs_[tier], device_->stream()));
  } else {
    TANDEM_TRY(enqueue(options_.sync_steps, tier));
  }
  count_host_outputs();
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(device_->stream()));
  const ir::Bucket real{batch.tokens(), batch.seqs(), batch.num_picks()};  // the batch's counts by row kind
  out.values.resize(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const OutputCopy& o = outputs_[i];
    ir::Tensor2& t = out.values[i];
    t.rows = real.rows(o.rows);
    t.width = o.width;
    t.device = {};
    if (o.placement == ir::Placement::kDevice) {
      t.data.clear();
      t.ids.clear();
      t.device = {o.src, t.rows, o.width, o.width, o.storage, owner_};
      continue;
    }
    // Capacity for the whole bucket once, so later runs of this plan never allocate.
    const size_t cap = size_t{bucket_.rows(o.rows)} * o.width;
    const size_t n = size_t{t.rows} * o.width;
    if (o.storage == ir::Storage::kU32) {
      if (t.ids.capacity() < cap) t.ids.reserve(cap);
      const uint32_t* src = out_host_.as<const uint32_t>() + o.host;
      t.ids.assign(src, src + n);
      t.data.clear();
    } else {
      if (t.data.capacity() < cap) t.data.reserve(cap);
      const float* src = out_host_.as<const float>() + o.host;
      t.data.assign(src, src + n);
      t.ids.clear();
    }
  }
  return {};
}

}  // namespace tandem::cuda

// Running a lowered plan: the step list enqueued (or captured once as a CUDA graph and replayed), the
// index copy in and the outputs out through pinned buffers, and an event profile for benchmarks.
#include <algorithm>

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

size_t CudaPlan::bytes() const { return arena_.bytes() + stage_.bytes() + rope_.bytes() + index_dev_.bytes(); }

Status CudaPlan::check_batch(const ir::Batch& batch) const {
  // The executor picked this bucket for the batch and ir::check validated it; this only guards the
  // buffers against a caller that skipped both.
  if (!bucket_.holds(batch.tokens(), batch.seqs(), batch.num_markers())) {
    return Error::make(ErrorKind::kInternal, "a batch of {}/{}/{} does not fit the plan of bucket {}",
                       batch.tokens(), batch.seqs(), batch.num_markers(), ir::to_string(bucket_));
  }
  if (!batch.start.empty() || !batch.slot.empty() || !batch.features.empty()) {
    return Error::make(ErrorKind::kUnsupported, "the CUDA backend runs no decoder batches (start/slot/features)");
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
    const size_t n = size_t{bucket_.rows(o.rows)} * o.width;
    // INVARIANT: out_host_ holds every output's bucket rows at its offset (lowering); the copy runs after
    // the steps that write the output, in stream order, and run() synchronizes before reading it.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(out_host_.as<float>() + o.host, o.src, n * sizeof(float),
                                      cudaMemcpyDeviceToHost, s));
  }
  return {};
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

Status CudaPlan::run(const ir::Batch& batch, ir::Outputs& out) {
  TANDEM_TRY(check_batch(batch));
  TANDEM_TRY(device_->activate());
  fill_index(index_, batch, index_host_.as<uint32_t>());
  const size_t tier = tier_for(batch.tokens());
  if (!execs_.empty()) {
    TANDEM_CUDA_CHECK(cudaGraphLaunch(execs_[tier], device_->stream()));
  } else {
    TANDEM_TRY(enqueue(options_.sync_steps, tier));
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(device_->stream()));
  const ir::Bucket real{batch.tokens(), batch.seqs(), batch.num_markers()};  // the batch's counts by row kind
  out.values.resize(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const OutputCopy& o = outputs_[i];
    ir::Tensor2& t = out.values[i];
    t.rows = real.rows(o.rows);
    t.width = o.width;
    // Capacity for the whole bucket once, so later runs of this plan never allocate.
    const size_t cap = size_t{bucket_.rows(o.rows)} * o.width;
    if (t.data.capacity() < cap) t.data.reserve(cap);
    const float* src = out_host_.as<const float>() + o.host;
    t.data.assign(src, src + size_t{t.rows} * o.width);
  }
  return {};
}

}  // namespace tandem::cuda

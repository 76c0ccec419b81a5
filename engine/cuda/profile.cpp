// Per-step device times of a plan (the benchmark's profile): events between steps, either recorded by
// the host as it launches each step, or captured as event nodes of a graph that replays the steps.
#include <string>

#include "engine/cuda/check_impl.h"
#include "engine/cuda/plan_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {
namespace {

struct GraphPair {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~GraphPair() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
};

}  // namespace

Status CudaPlan::enqueue_timed(size_t tier, const std::vector<cudaEvent_t>& events, bool external) const {
  const cudaStream_t s = device_->stream();
  // External records become event nodes of the graph being captured; plain ones are host records.
  const unsigned flags = external ? cudaEventRecordExternal : cudaEventRecordDefault;
  TANDEM_CUDA_CHECK(cudaEventRecordWithFlags(events[0], s, flags));
  for (size_t i = 0; i < steps_.size(); ++i) {
    TANDEM_TRY(run_step(steps_[i], tier, s));
    TANDEM_CUDA_CHECK(cudaEventRecordWithFlags(events[i + 1], s, flags));
  }
  return {};
}

std::string step_category(const std::string& label) {
  if (label.find("(bias and activation)") != std::string::npos) return "bias_act";
  if (label.find("(FP16 copy") != std::string::npos) return "cast";
  // "op 12 layer_norm 'enc.3.mlp_in'": the op name is the third word.
  const size_t a = label.find(' ', 3);
  if (a == std::string::npos) return label;
  const size_t b = label.find(' ', a + 1);
  return label.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
}

Result<std::vector<StepTime>> CudaPlan::profile(const ir::Batch& batch, const CudaState* state, bool in_graph) {
  TANDEM_TRY(check_batch(batch, state));
  const BoundCaches bound = state == nullptr ? BoundCaches{} : BoundCaches{state->table().data(), state->capacity()};
  fill_index(index_, batch, index_host_.as<uint32_t>(), bound);
  return replay_timed(tier_for(batch.tokens()), in_graph);
}

Result<std::vector<StepTime>> CudaPlan::replay_timed(size_t tier, bool in_graph) {
  TANDEM_TRY(device_->activate());
  const cudaStream_t s = device_->stream();
  Events ev;
  TANDEM_TRY(ev.create(steps_.size() + 1));
  // INVARIANT: both index buffers hold index_.words u32; the copy precedes the steps on the one stream.
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(index_dev_.data(), index_host_.data(), index_.words * sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, s));
  if (in_graph) {
    GraphPair g;
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    const Status enqueued = enqueue_timed(tier, ev.e, true);
    const cudaError_t ended = cudaStreamEndCapture(s, &g.graph);
    TANDEM_TRY(enqueued);
    TANDEM_CUDA_CHECK(ended);
    TANDEM_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
    for (int rep = 0; rep < 2; ++rep) TANDEM_CUDA_CHECK(cudaGraphLaunch(g.exec, s));  // the second is timed
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
  } else {
    TANDEM_TRY(enqueue_timed(tier, ev.e, false));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  std::vector<StepTime> out;
  out.reserve(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    float ms = 0.0f;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.e[i], ev.e[i + 1]));
    out.push_back({step_label(steps_[i]), ms});
  }
  return out;
}

}  // namespace tandem::cuda

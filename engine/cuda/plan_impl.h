// A graph lowered for one bucket on one GPU (scorer.md §3): arena, staging, RoPE tables, index and
// output buffers, the step list and its CUDA graph. All allocation happens at lowering; a warm run fills
// the pinned index, launches the graph, waits, and copies the real rows out.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/gemm_impl.h"
#include "engine/cuda/index_impl.h"
#include "engine/cuda/modules_impl.h"
#include "engine/cuda/state_impl.h"
#include "engine/cuda/steps_impl.h"
#include "engine/cuda/weights_impl.h"

namespace tandem::cuda {

struct PlanOptions {
  bool graphs = true;       // capture the steps as one CUDA graph (one per GEMM row tier)
  bool sync_steps = false;  // without graphs: synchronize after every step and name the one that fails
  CudaAttention attention = CudaAttention::kTc2;  // for FP16 plans on sm_80+ (cuda_backend.h)
  uint32_t tier_min_tokens = 0;  // buckets of at least this many tokens get GEMM row tiers; 0: none
  bool decode_gemm = true;  // decoder plans' 16-bit GEMMs of up to kDecodeGemmMaxRows rows: gemm_decode.cu
  bool fuse_qkv_prep = true;  // a fused [q | k | v] row's norms, rotations and cache append: qkv_prep.cu
  bool split_choice = true;   // Sample and TopK rows split across blocks where few and long (choice_parts)
  uint32_t split_ctas = 0;     // decoder_gemm_splits' target (0: its fixed rule)
  uint32_t split_narrow = 1;   // decoder_gemm_splits' slices for outputs under 16 tiles
  bool stream_gemm = false;    // decoder GEMMs of up to 16 rows on gemm_stream.cu where a probe shows cuBLASLt's bits
  bool stream_gemm_timed = true;  // ... and, with GEMM timing, where it was timed faster (cuda_backend.h)
  uint32_t stream_gemm_rows = 16;  // ... in buckets of at most this many rows
  bool overlap_launches = false;  // every kernel step but the first starts with programmatic dependent launch
  uint32_t qgemm_whole_k_rows = 0;  // quantized GEMMs of buckets of at least this many rows go whole-K; 0: none
};

// The token rows of a plan's GEMM tiers, ascending, the last the bucket's tokens: steps of an eighth of
// the bucket rounded up to a multiple of 64 when tokens >= min_tokens > 0, else one tier.
std::vector<uint32_t> gemm_tiers(uint32_t tokens, uint32_t min_tokens);

struct StepTime {
  std::string label;
  float ms = 0.0f;
};
// A step label's category for profiles: the op's name ("op 12 layer_norm 'enc.3.mlp_in'" -> "layer_norm"),
// or "bias_act" / "cast" for the steps lowering adds after a GEMM.
std::string step_category(const std::string& label);

class CudaPlan final : public ir::Plan {
 public:
  ~CudaPlan() override;
  ir::Bucket bucket() const override { return bucket_; }
  size_t bytes() const override;  // device memory: arena, staging, RoPE tables, index, feature rows

  // `state` binds the graph's caches (required iff it has any).
  Status run(const ir::Batch& batch, const CudaState* state, ir::Outputs& out);
  // Each step's device time for the batch (profile.cpp): the steps captured in a graph with an event
  // between every two and replayed (in_graph), or launched one at a time from the host between events
  // (then short steps also carry the host's launch time).
  Result<std::vector<StepTime>> profile(const ir::Batch& batch, const CudaState* state, bool in_graph);
  // The latest run's steps once more, timed as profile() times them, from the inputs that run staged (its
  // index, proposals and features are still in place): the backend's step profiling (cuda_backend.h).
  Result<std::vector<StepTime>> replay_timed(size_t tier, bool in_graph);

  bool captured() const { return !execs_.empty(); }
  size_t arena_bytes() const { return arena_.bytes(); }
  const std::vector<Gemm>& gemms() const { return gemms_; }  // every tier's
  const std::vector<Step>& steps() const { return steps_; }
  // GEMM row tiers (gemm_tiers) and the one a batch of `tokens` tokens runs in.
  const std::vector<uint32_t>& tiers() const { return tiers_; }
  size_t tier_for(uint32_t tokens) const;

 private:
  friend class Lowering;
  friend Result<std::unique_ptr<CudaPlan>> lower_plan(const Device&, const KernelModules&, GemmAlgos&,
                                                      const CudaWeights&, const ir::Graph&, ir::Bucket,
                                                      const PlanOptions&, ir::Backend*);
  CudaPlan() = default;
  Status check_batch(const ir::Batch& batch, const CudaState* state) const;
  Status check_features(const ir::Batch& batch) const;
  Status enqueue(bool sync_each, size_t tier) const;
  // Counts the host outputs' copies (bucket rows each) that one enqueue or graph replay makes.
  void count_host_outputs() const;
  Status capture();
  Status run_step(const Step& step, size_t tier, cudaStream_t stream) const;
  Status enqueue_timed(size_t tier, const std::vector<cudaEvent_t>& events, bool external) const;

  const Device* device_ = nullptr;
  const KernelModules* modules_ = nullptr;
  ir::Backend* owner_ = nullptr;  // named in the DeviceRows of device outputs
  PlanOptions options_;
  ir::Bucket bucket_;
  IndexLayout index_;
  std::vector<uint32_t> cache_widths_;  // of the graph's caches: a bound State must have these
  DeviceBuffer arena_, stage_, rope_, inv_freq_, scratch_, index_dev_;
  PinnedBuffer index_host_, out_host_;
  // Input's host feature rows: staged in pinned memory, then copied to features_dev_ before the steps.
  uint32_t feature_width_ = 0;
  DeviceBuffer features_dev_;
  PinnedBuffer features_host_;
  std::vector<Gemm> gemms_;
  std::vector<Step> steps_;
  std::vector<uint32_t> tiers_{0};
  struct OutputCopy {
    const void* src = nullptr;  // in the arena
    size_t host = 0;            // 4-byte word offset in out_host_ (host outputs only)
    ir::Rows rows = ir::Rows::kTokens;
    uint32_t width = 0;
    ir::Placement placement = ir::Placement::kHost;
    ir::Storage storage = ir::Storage::kF32;  // f32 or u32 for host outputs
  };
  std::vector<OutputCopy> outputs_;
  std::vector<cudaGraph_t> graphs_;  // one per tier
  std::vector<cudaGraphExec_t> execs_;
};

Result<std::unique_ptr<CudaPlan>> lower_plan(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                             const CudaWeights& weights, const ir::Graph& graph, ir::Bucket bucket,
                                             const PlanOptions& options, ir::Backend* owner = nullptr);

// Whether the CUDA backend runs `op` of `graph` at `precision` (support.cpp).
Status supports_op(const ir::Graph& graph, const ir::Op& op, ir::Precision precision);

}  // namespace tandem::cuda

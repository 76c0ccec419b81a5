// Plan steps and their launchers (style.md "Launchers"): one function per op family builds the kernel
// launch of an op at lowering, checking shapes and element types there and choosing the entry by
// them, so the run path only replays launches. A step is a kernel launch or a cuBLASLt GEMM.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/index_impl.h"
#include "engine/cuda/kernels_impl.h"
#include "engine/cuda/types_impl.h"
#include "engine/ir/backend.h"

namespace tandem::cuda {

class KernelModules;

// A value resolved to its arena place and element type.
struct Loc {
  void* ptr = nullptr;
  ir::Rows rows = ir::Rows::kTokens;
  uint32_t width = 0;
  Dt type = Dt::kF32;
  std::string name;
  unsigned kind() const { return static_cast<unsigned>(rows); }
  std::string describe() const;  // "'enc.3.qkv' (tokens × 3072 f32)"
};

struct KernelStep {
  KernelId id{};
  dim3 grid, block;
  uint32_t smem = 0;  // dynamic shared memory bytes (kernel_dynamic_smem)
  KernelArgs args;
  std::string label;  // "op 12 layer_norm 'enc.3.mlp_in'": for errors and profiles
  // Launched with programmatic dependent launch: it may start while the kernel ahead runs, and waits for it
  // inside (kernels/prelude.cuh wait_prior_grids) before touching anything that kernel writes or reads.
  bool overlap_prior = false;
};
struct GemmStep {
  std::vector<size_t> gemm;  // into the plan's GEMM list: one per row tier, or one for every tier
  std::string label;
  size_t at(size_t tier) const { return gemm.size() == 1 ? gemm[0] : gemm[tier]; }
};
using Step = std::variant<KernelStep, GemmStep>;
const std::string& step_label(const Step& step);

// Device addresses of the index buffer's tables (index_impl.h).
struct IndexPtrs {
  const unsigned* n = nullptr;
  const unsigned* ids = nullptr;
  const unsigned* pos = nullptr;
  const unsigned* seq = nullptr;
  const unsigned* cu = nullptr;
  const unsigned* pcu = nullptr;
  const unsigned* prow = nullptr;
  const unsigned* qtype = nullptr;
  const unsigned* tiles = nullptr;
  const unsigned* spans = nullptr;
  const unsigned* start = nullptr;
  const unsigned* slot = nullptr;
  const unsigned* sampling = nullptr;
  const unsigned* qtiles = nullptr;
  const kernels::CacheTable* caches = nullptr;
  const unsigned* features = nullptr;
  const unsigned* feat_rows = nullptr;
  const unsigned* proposals = nullptr;
};
// INVARIANT: `base` is a device buffer of layout.words u32 filled by fill_index, so every table offset
// lies inside it.
inline IndexPtrs index_pointers(const IndexLayout& l, const unsigned* base) {
  return IndexPtrs{base,           base + l.ids,      base + l.pos,   base + l.seq,
                   base + l.cu,    base + l.pcu,      base + l.prow,  base + l.qtype,
                   base + l.tiles, base + l.spans,    base + l.start, base + l.slot,
                   base + l.sampling, base + l.qtiles,
                   reinterpret_cast<const kernels::CacheTable*>(base + l.caches),
                   base + l.features, base + l.feat_rows, base + l.proposals};
}

struct StepContext {
  ir::Bucket bucket;
  IndexPtrs ix;
  uint32_t tiles_max = 0;    // attention tiles the bucket can need
  // The kernel of attention over FP32 qkv: kSimt for FP32 plans and pre-sm_80 devices (lowering decides).
  CudaAttention attention = CudaAttention::kSimt;
  uint32_t sms = 1;          // multiprocessors: caps the grids of kernels that loop over their work
};

// Row-wise families (steps_rows.cpp).
Result<KernelStep> embed_step(const StepContext& c, const Loc& out, const float* table, uint64_t vocab);
Result<KernelStep> layer_norm_step(const StepContext& c, const Loc& x, const Loc& out, const float* w,
                                   const float* b, float eps);
Result<KernelStep> bias_act_step(const StepContext& c, const Loc& x, const float* bias, unsigned act);
Result<KernelStep> cast_step(const StepContext& c, const Loc& x, void* out, Dt to);
Result<KernelStep> geglu_step(const StepContext& c, const Loc& x, const Loc& out);
Result<KernelStep> add_type_step(const StepContext& c, const Loc& h, const float* table);
Result<KernelStep> pick_rows_step(const StepContext& c, const Loc& h, const Loc& out);
Result<KernelStep> act_features_step(const StepContext& c, const Loc& h, const Loc& logits, const Loc& out);

// RoPE and attention (steps_attention.cpp).
struct RopeTable {
  const float* cos = nullptr;  // [positions, half]
  const float* sin = nullptr;
};
// cos/sin of the rotate-half RoPE for positions [0, positions) of heads 2·half wide, as the CPU
// reference computes them (f32 inverse frequencies and angles, cos/sin in f64): cos then sin.
std::vector<float> rope_table(float theta, uint32_t half, uint32_t positions);
Result<KernelStep> rope_step(const StepContext& c, const Loc& x, const ir::Rope& op, const RopeTable& table);
// `rope` non-null: q and k are rotated as they load (the Rope ops before the attention were fused).
Result<KernelStep> attention_step(const StepContext& c, const Loc& qkv, const Loc& out, const ir::Attention& op,
                                  const RopeTable* rope);

// Decoder families (steps_decoder.cpp): the row-wise parts of a Qwen3 layer and the KV cache append.
Result<KernelStep> rms_norm_step(const StepContext& c, const Loc& x, const Loc& out, const float* w, float eps);
// In place on x's heads × head_dim columns from column col: w null skips the norm, inv_freq null the rotation.
Result<KernelStep> head_norm_rope_step(const StepContext& c, const Loc& x, uint32_t heads, uint32_t head_dim,
                                       const float* w, float eps, const float* inv_freq, uint32_t col = 0);
// A fused [q | k | v] row (heads, then kv_heads, then kv_heads heads from column 0): q and k normed and
// rotated in place, k and v appended to cache `cache` (kernels/qkv_prep.cu); one launch for what
// head_norm_rope_step twice and cache_append_step do, with the same bits.
struct QkvPrepShape {
  uint32_t heads = 0, kv_heads = 0, head_dim = 0;
  float eps = 0.0f;
};
Result<KernelStep> qkv_prep_step(const StepContext& c, const Loc& qkv, const QkvPrepShape& shape, const float* w_q,
                                 const float* w_k, const float* inv_freq, uint32_t cache, Dt cache_type);
Result<KernelStep> swiglu_step(const StepContext& c, const Loc& x, const Loc& out);
Result<KernelStep> tap_step(const StepContext& c, const Loc& x, const Loc& out, uint32_t col);
// Input: token rows of `out` from the run's feature source (index_impl.h fill_features).
Result<KernelStep> input_step(const StepContext& c, const Loc& out);
// DynConv: x and d of one type (d 2·taps·(width / group) wide), out FP32 or x's type, base FP32
// [2, taps, width]; accumulate adds into out.
Result<KernelStep> dyn_conv_step(const StepContext& c, const Loc& x, const Loc& d, const float* base, const Loc& out,
                                 uint32_t stage, uint32_t taps, uint32_t group, bool accumulate);
// A QGemm's weight on the device: codes (bits 8: int8 [cols, k]; 4: packed [cols, k / 2]) and the scales,
// F16 or BF16 bits [cols, k / group], as uploaded.
struct QuantWeight {
  const void* codes = nullptr;
  const uint16_t* scales = nullptr;
  bool scale_bf16 = false;
  uint32_t bits = 8;
  uint32_t group = 0;
  bool packed = false;  // codes in the tensor-core layout (qgemm_layout.h): tensor cores only
};
// Which quantized GEMM runs: kernels/qgemm.cu on CUDA cores, or kernels/qgemm_tc.cu (sm_80+) in the sliced
// mapping or the whole-K one (args.cuh QGemmTcArgs; the same bits, another sharing of rows between warps).
enum class QGemmKernel { kCudaCores, kTensorCores, kTensorCoresWholeK };
// QGemm: out = act(x · dequant(W)ᵀ + bias) (accumulate: out += it, act none); x FP32 or 16-bit, out FP32,
// x's type or (from FP32 x) a 16-bit type; k a multiple of 32 and of the group, the group a multiple of 32
// (docs/quantization.md says which kernel runs when).
Result<KernelStep> qgemm_step(const StepContext& c, const Loc& x, const QuantWeight& w, const float* bias,
                              unsigned act, bool accumulate, const Loc& out, QGemmKernel kernel);
// k and v must be token rows of the cache's element type `cache_type`; the cache's `width` elements (0: k's
// width) come from columns k_col of k and v_col of v (a fused [q | k | v] row holds both).
Result<KernelStep> cache_append_step(const StepContext& c, const Loc& k, const Loc& v, uint32_t cache, Dt cache_type,
                                     uint32_t width = 0, uint32_t k_col = 0, uint32_t v_col = 0);

// KV-cache attention (steps_cache.cpp): q, out and the cache of one element type; the attention pass, then
// the pass that combines split-key partials, both over `scratch` (cache_attention_scratch_bytes of the
// plan's bucket, one buffer for every CacheAttention of a plan: they run in order). tensor_cores: sm_80+.
Status cache_attention_supported(const ir::CacheAttention& op);
size_t cache_attention_scratch_bytes(const ir::Bucket& bucket, const ir::CacheAttention& op);
size_t cache_attention_scratch_bytes(const ir::Graph& graph, const ir::Bucket& bucket);  // the most any op needs
Result<std::vector<KernelStep>> cache_attention_steps(const StepContext& c, const Loc& q, const Loc& out,
                                                      const ir::CacheAttention& op, Dt cache_type, void* scratch,
                                                      size_t scratch_bytes, bool tensor_cores);

// Token choice over FP32 logits rows (steps_choice.cpp): ids are U32, one per row (argmax, sample over
// pick rows) or k per row with their values (top_k, k <= kTopKMax).
Result<KernelStep> argmax_step(const StepContext& c, const Loc& x, uint32_t columns, const Loc& out);
Result<KernelStep> top_k_step(const StepContext& c, const Loc& x, uint32_t columns, uint32_t k, const Loc& ids,
                              const Loc& values);
Result<KernelStep> sample_step(const StepContext& c, const Loc& x, uint32_t columns, const Loc& out,
                               ir::Stream stream = ir::Stream::kTarget);
// The same with long rows split across blocks (args.cuh kChoiceMaxParts) where the bucket has few of them: the
// parts' pass, then the combining one, over `scratch` (choice_scratch_bytes of the plan's bucket, shared like
// the cache attention partials). One launch, the single-block kernel, where a split would not pay.
uint32_t choice_parts(uint32_t rows, uint32_t columns);  // 1: no split
size_t choice_scratch_bytes(const ir::Graph& graph, const ir::Bucket& bucket);  // the most any op needs
Result<std::vector<KernelStep>> top_k_steps(const StepContext& c, const Loc& x, uint32_t columns, uint32_t k,
                                            const Loc& ids, const Loc& values, void* scratch, size_t scratch_bytes);
Result<std::vector<KernelStep>> sample_steps(const StepContext& c, const Loc& x, uint32_t columns, const Loc& out,
                                             ir::Stream stream, void* scratch, size_t scratch_bytes);
// RejectSample: FP32 logits over pick rows and Sample's U32 ids, rewritten in place; two launches (the
// rows' tests and residual samples, then each sequence's commit).
Result<std::vector<KernelStep>> reject_sample_steps(const StepContext& c, const Loc& x, uint32_t columns,
                                                    const Loc& ids);
// The DFlash 2 selector walk over U32 candidates and FP32 values, sel and q (k <= kTopKMax), codebooks as
// FP32 [vocab, sel width] rows; ids U32, one per pick row.
Result<KernelStep> selector_walk_step(const StepContext& c, const Loc& cand, const Loc& values, const Loc& sel,
                                      const float* pred, const float* succ, float softcap, float multiplier,
                                      const Loc& ids, const Loc& q);

// The decode GEMM (steps_gemm_decode.cpp, kernels/gemm_decode.cu; gemm_impl.h's rule for decoder plans):
// out = a · wᵀ (+ bias) (+ out with accumulate) over f16/bf16 operands, w [out.width, a.width], a row's
// bits the same at every row count. The K split is a function of (k, n) only.
struct GemmDecodeSplit {
  uint32_t splits = 1;        // K slices per 16-column tile (1, 2, 4 or 8), summed in slice order
  uint32_t slice_chunks = 0;  // 32-wide K chunks per slice
};
GemmDecodeSplit gemm_decode_split(uint32_t k, uint32_t n);
// The checks the mma.sync GEMMs share (gemm_decode, gemm_stream): f16/bf16 operands into f32 or their own type,
// accumulating into f32 only, and (where given) 16-byte aligned operands. Errors name `kernel`.
Status mma_gemm_supported(std::string_view kernel, Dt ab, Dt out, bool accumulate, const void* a = nullptr,
                          const void* y = nullptr, const void* w = nullptr);
// Whether the kernel takes these operands (k a multiple of 8; out f32 or the operands' type).
Status gemm_decode_supported(uint32_t k, Dt ab, Dt out, bool accumulate);
Result<KernelStep> gemm_decode_step(const StepContext& c, const Loc& a, const Loc& out, const void* w,
                                    const float* bias, bool accumulate);

// The streaming GEMM (steps_gemm_stream.cpp, kernels/gemm_stream.cu): out = a · wᵀ (+ out with accumulate) for
// up to kernels::kGemmStreamRows rows of f16/bf16 operands, K in `splits` slices (1, 2 or 4) of k / splits
// (rounded up to 16), as cuBLASLt splits it. Whether its bits equal cuBLASLt's is for a probe to say.
Status gemm_stream_supported(uint32_t k, uint32_t splits, Dt ab, Dt out, bool accumulate);
// The shared memory a block stages `rows` rows of its slices in, and the most rows that fit kGemmStreamSmemMax
// (0: none; 1..16): a bucket of more rows stays on cuBLASLt.
uint64_t gemm_stream_smem(uint32_t k, uint32_t splits, uint32_t rows);
uint32_t gemm_stream_max_rows(uint32_t k, uint32_t splits);
Result<KernelStep> gemm_stream_step(const StepContext& c, const Loc& a, const Loc& out, const void* w, uint32_t splits,
                                    bool accumulate);

// Enqueues one kernel step on `stream`, checking that its argument pack is the entry's.
Status launch(const KernelModules& modules, const KernelStep& step, cudaStream_t stream);

}  // namespace tandem::cuda

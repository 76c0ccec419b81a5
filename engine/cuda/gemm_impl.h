// cuBLASLt GEMMs (scorer.md §3): out = a·wᵀ (+ bias, ReLU), FP32 compute, no split-K, with the
// determinism rule that one reference algorithm per shape serves every bucket (or a faster one only
// where a probe shows it gives exactly the same bits).
#pragma once

#include <cublasLt.h>

#include <compare>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/gemm_choices_impl.h"
#include "engine/cuda/types_impl.h"

// outᵀ = w·aᵀ in column-major terms. The reference algorithm of a shape (k, n, types, accumulate,
// epilogue) is the best of its ranking for kRankedRows rows that takes the bucket's m, so a row's bits
// do not depend on the bucket. A bucket may use a candidate cuBLASLt ranks higher for its own m, but only
// one that computes the reference's bits on a probe (kime 0.1.0's "faster bit-identical" rule).
//
// Decoder plans (graphs with caches: the Qwen3 target, the DFlash drafter's block and settle) keep the
// rule with a kernel of their own: every 16-bit GEMM of up to kDecodeGemmMaxRows rows (every decode and
// verify bucket, and the prefill buckets up to that size) runs kernels/gemm_decode.cu, whose K split comes
// from (k, n) alone and is summed in a fixed order, so a row's bits are the same at every m it takes.
// Without split-K, cuBLASLt's reference runs one CTA per output tile, which starves a 1-row GEMM (32 CTAs
// on 132 SMs for n = 4096). Larger GEMMs (prefill chunks past 1,024 tokens) keep cuBLASLt's reference:
// each kind of run is bit-stable within itself, and plain and speculative decoding prefill a prompt the
// same way, so verify rows still equal plain decode rows. What is given up: a prompt row prefilled in a
// bucket above the line differs in its low bits from the same row prefilled at or below it (the line is
// per GEMM: an LM head over <= 1,024 pick rows always runs the decode GEMM). FP32 plans stay on cuBLASLt.
// Opt-in: TANDEM_CUDA_DECODE_GEMM=1 (CudaOptions::decode_gemm); by default every GEMM runs on cuBLASLt,
// which is faster at verify rows, batch 32 and prefill on the H200 (PERF_NOTES.md, "The decode GEMM").
namespace tandem::cuda {

inline constexpr uint32_t kDecodeGemmMaxRows = 1024;  // also the last row count of the decoders' K split

inline constexpr uint32_t kRankedRows = 256;
inline constexpr int kRankedCandidates = 8;   // asked for the reference ranking
inline constexpr int kSearchCandidates = 16;  // asked for a bucket's own rows when looking for faster ones
// Below this many rows a bucket times the bit-identical candidates and takes the fastest; above it the
// first in cuBLASLt's order (large GEMMs run near peak on its pick, and timing them costs lowering time).
inline constexpr uint32_t kTimedMaxRows = 2048;
// Arena values are 16-float aligned (ir::kArenaAlign); weights and staging buffers come from cudaMalloc.
inline constexpr uint32_t kArenaAlignBytes = 64;

// Epilogues cuBLASLt applies exactly; GELU (erf) never goes here.
enum class LtEpilogue : uint8_t { kNone, kBias, kRelu, kReluBias };

struct GemmShape {
  uint32_t k = 0, n = 0;
  Dt ab = Dt::kF32;   // weight and input elements
  Dt out = Dt::kF32;  // output elements (C and D)
  bool accumulate = false;  // beta = 1: out += a·wᵀ
  LtEpilogue epilogue = LtEpilogue::kNone;
  // K slices summed by cuBLASLt's reduction in the compute type (1: none). Part of the shape: the slices set
  // the order of the sums, so every candidate of a shape splits alike and a row's bits stay the same at
  // every m (cuda_gemm_study checked each configuration on the H200; cuda_gemm_test checks the rule).
  uint32_t splits = 1;
  friend auto operator<=>(const GemmShape&, const GemmShape&) = default;
  std::string describe() const;  // "k 1024 n 3072 f16->f32 set bias", "... split 2"
};

// The K split of a decoder plan's 16-bit GEMM of up to kDecodeGemmMaxRows rows, from (k, n) alone. Without
// one a GEMM of a few rows runs one CTA per output tile: n = 4096 is 32 tiles of 128 on 132 SMs, and q, o
// and down streamed 1.4-1.8 TB/s on the H200; in two slices 2.2-2.6 TB/s at 1 and 16 rows (PERF_NOTES,
// "Split-K for the decoder's GEMMs"). Wide outputs (n > 5120: gate_up, the LM head, fused projections) fill
// the GPU without a split, and narrow ones (k/v, n 1024) are bound by latency either way.
// target_ctas > 0 (TANDEM_CUDA_SPLIT_CTAS, a tuning aid): instead, outputs of 16 to 64 tiles over k >= 4,096
// split into the count (at most 8, slices of k >= 1,024) whose tiles × slices come nearest target_ctas.
// narrow > 1 (TANDEM_CUDA_SPLIT_NARROW, a tuning aid): outputs of fewer than 16 tiles over k >= 4,096 (k/v, the
// DFlash 2 kernel projections, n 1,024: 8 CTAs unsplit) split into that many slices, slices of k >= 1,024.
uint32_t decoder_gemm_splits(uint32_t k, uint32_t n, uint32_t target_ctas = 0, uint32_t narrow = 1);

// Ranked candidates per shape for one device, shared by every plan of a backend.
class GemmAlgos {
 public:
  // probe = false keeps every bucket on the reference algorithm (TANDEM_CUDA_GEMM_PROBE=0); with it,
  // buckets of up to timed_max_rows rows time their bit-identical candidates (0: none are timed).
  // `choices` holds the outcomes of earlier probes and timing (GemmChoices::open), used before measuring.
  GemmAlgos(const Device& device, bool probe, uint32_t timed_max_rows = 0, GemmChoices choices = {})
      : device_(device), probe_(probe), timed_max_rows_(timed_max_rows), choices_(std::move(choices)) {}
  // The heuristic's split-K-free candidates for `rows` rows among its best `count`, best first
  // (memoised). Empty when there is none (the caller may drop the epilogue). `bias` only tells cuBLASLt
  // its alignment.
  Result<const std::vector<cublasLtMatmulAlgo_t>*> ranked(const GemmShape& shape, uint32_t rows, const float* bias,
                                                          int count = kRankedCandidates);
  // Whether `candidate` computes exactly the bits of `reference`: both run kRankedRows rows of fixed
  // noise against the real weight (remembered per shape and pair in the choices).
  Result<bool> same_bits(const GemmShape& shape, const cublasLtMatmulAlgo_t& reference,
                         const cublasLtMatmulAlgo_t& candidate, const void* w, const float* bias);
  // A remembered yes/no verdict under `key` (in the choices), else probe()'s, remembered and counted as a
  // measurement: the streaming GEMM's probes (same bits as a reference, faster at m rows) use it.
  Result<bool> verdict_memo(const std::string& key, const std::function<Result<bool>()>& probe);
  // The fastest of `candidates` (all computing the same bits) for m rows, timed on random operands;
  // remembered per shape and m in the choices, so every plan of the backend runs the same one.
  Result<size_t> fastest(const GemmShape& shape, uint32_t m, const std::vector<cublasLtMatmulAlgo_t>& candidates,
                         bool bias);
  bool probe() const { return probe_; }
  bool timed(uint32_t m) const { return m <= timed_max_rows_; }
  // Under a profiler (Nsight Compute, Nsight Systems: CUDA_INJECTION64_PATH) a candidate's time is the tool's,
  // not the run's: on the H200, choices timed under ncu put a 91 us kernel where a 10 us one runs, and the
  // file kept them for later runs. Then fastest() uses only remembered choices, takes the first
  // bit-identical candidate otherwise (the untimed rule), and remembers nothing.
  void set_profiled(bool profiled) { profiled_ = profiled; }
  bool profiled() const { return profiled_; }
  // Records that a shape's epilogue runs in a kernel instead; true the first time (to log it once).
  bool note_unfused(const GemmShape& shape) { return unfused_.insert(shape).second; }
  // Records that a split shape runs in one pass instead (no candidate splits it); true the first time.
  bool note_unsplit(const GemmShape& shape) { return unsplit_.insert(shape).second; }
  // Records that a shape stays off the streaming GEMM (no layout gives its bits); true the first time.
  bool note_unstreamed(const GemmShape& shape) { return unstreamed_.insert(shape).second; }
  // Records that cuBLASLt was timed faster than the streaming GEMM for a shape at m rows; true the first time.
  bool note_stream_slower(const GemmShape& shape, uint32_t m) { return stream_slower_.emplace(shape, m).second; }
  // Writes the choices made since the last save to their file (if they have one).
  void save_choices() { choices_.save(); }
  const GemmChoices& choices() const { return choices_; }
  size_t measurements() const { return measurements_; }  // probes and timings run on the device

 private:
  const Device& device_;
  bool probe_;
  uint32_t timed_max_rows_;
  bool profiled_ = false;
  std::map<std::tuple<GemmShape, uint32_t, int>, std::vector<cublasLtMatmulAlgo_t>> ranked_;
  GemmChoices choices_;  // same bits: shape and the two algorithms' bytes; fastest: shape and m
  size_t measurements_ = 0;
  std::set<GemmShape> unfused_;
  std::set<GemmShape> unsplit_;
  std::set<GemmShape> unstreamed_;
  std::set<std::pair<GemmShape, uint32_t>> stream_slower_;
};

struct GemmOperands {
  const void* w = nullptr;     // [n, k] of shape.ab
  const void* a = nullptr;     // [m, k] of shape.ab
  void* out = nullptr;         // [m, n] of shape.out
  const float* bias = nullptr; // [n] f32, for the bias epilogues
};

// The cuBLASLt descriptors of one GEMM for m rows: move-only, destroyed with their owner.
struct GemmDescs {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  GemmDescs() = default;
  GemmDescs(GemmDescs&& other) noexcept;
  GemmDescs& operator=(GemmDescs&& other) noexcept;
  GemmDescs(const GemmDescs&) = delete;
  GemmDescs& operator=(const GemmDescs&) = delete;
  ~GemmDescs();

 private:
  void release();
};

// One GEMM of a plan: descriptors for the bucket's m rows and the algorithm chosen for them.
class Gemm {
 public:
  // `shape` with splits > 1 runs in one pass when no candidate splits it (shape() says which ran).
  static Result<Gemm> make(const Device& device, GemmAlgos& algos, const GemmShape& shape, uint32_t m,
                           const GemmOperands& ops);
  // A GEMM on a given algorithm (the benchmark's study of candidates); fails when it cannot take m rows.
  // workspace_bytes 0: the device's workspace (a study may pass a larger one of its own to run()).
  static Result<Gemm> with_algo(const Device& device, const GemmShape& shape, uint32_t m, const GemmOperands& ops,
                                const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes = 0);
  Gemm(Gemm&& other) noexcept = default;
  Gemm& operator=(Gemm&& other) noexcept = default;

  // Enqueues the GEMM on the device stream (also while a graph is being captured).
  Status run(const Device& device) const;
  // The same on another workspace (the GEMM study's split-K candidates, which need more than the device's).
  Status run(const Device& device, void* workspace, size_t workspace_bytes) const;
  const GemmShape& shape() const { return shape_; }
  uint32_t m() const { return m_; }
  int rank() const { return rank_; }      // the reference's place in the kRankedRows ranking
  int faster() const { return faster_; }  // the place in the m ranking of the bit-identical one used, or -1
  const cublasLtMatmulAlgo_t& algo() const { return algo_; }            // the one it runs
  const cublasLtMatmulAlgo_t& reference() const { return reference_; }  // the shape's reference

 private:
  Gemm(const GemmShape& shape, uint32_t m, const GemmOperands& ops, GemmDescs descs)
      : shape_(shape), m_(m), ops_(ops), descs_(std::move(descs)) {}
  GemmShape shape_;
  uint32_t m_ = 0;
  GemmOperands ops_;
  GemmDescs descs_;
  cublasLtMatmulAlgo_t algo_{}, reference_{};
  int rank_ = -1;
  int faster_ = -1;
};

// The descriptors of a shape at m rows (row-major out = a·wᵀ as cuBLASLt's column-major outᵀ = W·aᵀ).
Status make_gemm_descs(const GemmShape& shape, uint32_t m, const float* bias, GemmDescs& d);

// "id 21 tile 128x128 stages 128x4 swizzle 0 option 0 cluster 2x1x1": the algorithm's configuration.
std::string describe_algo(const cublasLtMatmulAlgo_t& algo);

}  // namespace tandem::cuda

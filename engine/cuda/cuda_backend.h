// The CUDA backend (scorer.md §3): one context and stream per worker, weights on the device, NVRTC
// kernels, cuBLASLt GEMMs, one arena and one CUDA graph per bucket.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/ir/row_buffer.h"

namespace tandem::cuda {

// Number of CUDA devices visible; 0 when there is no driver or no GPU (never an error).
int device_count();

// The attention kernel of FP16 plans (whose qkv is FP32): tc2 = FlashAttention-2 style tensor cores
// (cp.async, ldmatrix; scores from split q and k, P·V in plain f16 as precise as the FP16 output),
// tc2split = the same with P·V split too (kime's precision), tc = the first tensor-core kernel, simt =
// CUDA cores. FP32 plans always run simt, for its precision; so does a device older than sm_80.
enum class CudaAttention : uint8_t { kTc2, kTc2Split, kTc, kSimt };
// Every value, in the order tools list them.
inline constexpr CudaAttention kCudaAttentions[] = {CudaAttention::kTc2, CudaAttention::kTc2Split, CudaAttention::kTc,
                                                    CudaAttention::kSimt};
// Whether the path runs one of attention_tc2.cu's entries.
constexpr bool is_tc2(CudaAttention a) { return a != CudaAttention::kTc && a != CudaAttention::kSimt; }
const char* to_string(CudaAttention a);
Result<CudaAttention> parse_cuda_attention(std::string_view text);  // "tc2", "tc2split", ..., "simt"

struct CudaOptions {
  int device = 0;
  ir::Precision precision = ir::Precision::kF16;
  std::string cache_dir;  // kernel-module and GEMM-choice caches; empty = $XDG_CACHE_HOME/tandem or ~/.cache/tandem
  // Debugging aids (also set by the environment: TANDEM_CUDA_GRAPHS=0, TANDEM_CUDA_SYNC_STEPS=1):
  bool graphs = true;       // replay each plan as one captured CUDA graph
  bool sync_steps = false;  // without graphs, synchronize after every step and name the one that fails
  // A bucket may use a GEMM algorithm cuBLASLt ranks higher for its rows when a probe shows it gives
  // exactly the bits of the shape's reference algorithm (TANDEM_CUDA_GEMM_PROBE=0 turns this off).
  bool gemm_probe = true;
  // With the probe, buckets of up to 2,048 rows time the candidates that give the reference's bits and
  // run the fastest (TANDEM_CUDA_GEMM_TIMED=0: cuBLASLt's first bit-identical one instead).
  bool gemm_timed = true;
  // TANDEM_CUDA_ATTENTION=tc2|tc2split|tc|simt.
  CudaAttention attention = CudaAttention::kTc2;
  // GEMMs over token rows run for the smallest row tier that holds the batch's tokens instead of the
  // whole bucket: plans of at least gemm_tier_min_tokens tokens keep one CUDA graph per tier of about
  // an eighth of the bucket (TANDEM_CUDA_GEMM_TIERS=0 turns this off; =N sets the minimum to N).
  bool gemm_tiers = true;
  uint32_t gemm_tier_min_tokens = 1024;
  // With it, decoder plans (graphs with caches) run their 16-bit GEMMs of up to 1,024 rows (every decode
  // and verify bucket) on tandem's decode GEMM, whose row bits do not depend on the row count, instead of
  // cuBLASLt (TANDEM_CUDA_DECODE_GEMM=1; gemm_impl.h says why). Off by default: on the H200 it is 8%
  // faster at a 1-row decode but slower at 16-row verify (1.57x a decode step instead of 1.02x), batch 32
  // and prefill (PERF_NOTES.md, "The decode GEMM").
  bool decode_gemm = false;
  // A decoder layer's fused [q | k | v] row gets its q/k norms, rotations and cache append in one launch
  // (kernels/qkv_prep.cu) instead of three; the same bits either way (TANDEM_CUDA_FUSE_QKV=0: three).
  bool fuse_qkv_prep = true;
  // Sample and TopK over few long rows split each row across blocks (steps_impl.h choice_parts), with the same
  // results; TANDEM_CUDA_SPLIT_CHOICE=0: one block a row, to measure what the split gives.
  bool split_choice = true;
  // Decoder GEMMs' K split aimed at this many CTAs instead of the fixed rule (gemm_impl.h
  // decoder_gemm_splits; TANDEM_CUDA_SPLIT_CTAS=N): a tuning aid for the GEMM study's next rule.
  uint32_t decoder_split_ctas = 0;
  // Decoder GEMMs of fewer than 16 output tiles over k >= 4,096 split K in this many slices (decoder_gemm_splits;
  // TANDEM_CUDA_SPLIT_NARROW=N, 1..8): unsplit, a 1-row k/v or DFlash 2 kernel projection runs on 8 CTAs.
  uint32_t decoder_split_narrow = 1;
  // With it, decoder GEMMs of up to 16 rows (decode steps, verify at batch 1) run tandem's streaming GEMM
  // (kernels/gemm_stream.cu) where a probe at lowering shows it computes exactly cuBLASLt's bits for the shape,
  // so a row's bits still do not depend on the bucket (TANDEM_CUDA_STREAM_GEMM=1), and, with gemm_timed, only
  // for the shapes and row counts where it was also timed faster than the bucket's cuBLASLt choice (remembered
  // with the GEMM choices). Off by default: on the H100 and H200 its bits match cuBLASLt's on every Qwen3-8B shape,
  // but each of its seven forms so far was slower per GEMM at one row (the seventh, the one built, by 1.12-1.33x
  // on the H100: PERF_NOTES "The streaming GEMM, seventh form").
  bool stream_gemm = false;
  // With stream_gemm: whether the timed verdict decides (TANDEM_CUDA_STREAM_GEMM=untimed: no, the bits alone
  // do). The timing runs each kernel alone, so it cannot see what programmatic dependent launch gives the
  // streaming GEMM inside a plan's graph (its first weights loaded while the kernel ahead runs); untimed, a
  // decoder benchmark measures that.
  bool stream_gemm_timed = true;
  // With stream_gemm: the most bucket rows it runs (TANDEM_CUDA_STREAM_GEMM_ROWS=N, 1..16), e.g. 1 for decode
  // steps only, where its staged rows cost least.
  uint32_t stream_gemm_rows = 16;
  // Every kernel of a plan but the first starts with programmatic dependent launch (sm_90): its blocks take their
  // places while the kernel ahead finishes and wait there (kernels/prelude.cuh enter_grid), which hides a launch's
  // latency at each of a decode step's ~200 boundaries between kernels of ours; a streaming GEMM also loads its
  // first weights meanwhile. TANDEM_CUDA_OVERLAP=1 turns it on, 0 off. Off by default until timed on a GPU
  // (PERF_NOTES "Every kernel launched to overlap the one ahead").
  bool overlap_launches = false;
  // A quantized weight's codes are uploaded in the tensor-core layout (qgemm_layout.h) where the device has
  // tensor cores and k allows it, and its qgemm reads them so: 2-22% faster than the checkpoint layout at every
  // shape the kernel study times (BENCHMARKS, issue 14). Bits may differ from the checkpoint layout's in the
  // last place (another order of the mma's sums). TANDEM_CUDA_QGEMM_PACKED=0: the checkpoint layout.
  bool qgemm_packed = true;
  // Quantized GEMMs in buckets of at least this many rows run the tensor-core kernel's whole-K mapping (a
  // block's 8 warps are 8 column tiles of the same rows, so its rows are read once a block from L2, not once a
  // tile); the same bits as the sliced mapping. 0 (the default, never: on the H100 it was slower at every size,
  // latency-bound at 12.5% occupancy; PERF_NOTES "The quantized GEMM for many rows"). TANDEM_CUDA_QGEMM_WHOLE_K_ROWS=N.
  uint32_t qgemm_whole_k_rows = 0;
};

Result<std::unique_ptr<ir::Backend>> make_cuda_backend(const CudaOptions& options);

// Device-to-host traffic of a CUDA backend: every cudaMemcpy to the host it makes (a plan's host outputs,
// bucket rows each, on every run and the warm-up at lowering; fetch(); the GEMM probes at lowering).
struct CudaTransfers {
  uint64_t d2h_bytes = 0;           // since the backend was made
  uint64_t d2h_copies = 0;
  uint64_t last_run_d2h_bytes = 0;  // the host outputs of its latest plan run
  uint64_t lowering_d2h_bytes = 0;  // of d2h_bytes, what lowering plans copied (GEMM probes, warm-up runs)
};
// The counts of a backend made by make_cuda_backend; an error for any other backend.
Result<CudaTransfers> cuda_transfers(const ir::Backend& backend);

// Per-step device times of every plan run while profiling is on, for benchmarks that ask where a host-driven
// step's time goes (bench/cuda_spec --profile): after each run the plan's steps replay once more from the
// inputs that run staged, captured in a graph with an event between every two steps (launched one by one if
// that capture fails). The replay writes what the run wrote (caches at the batch's positions, outputs), so
// results are unchanged, but it doubles a run's time: never on while timing.
struct ProfiledStep {
  std::string label;     // "op 12 rms_norm 'd.0.attn_in'"
  std::string category;  // the op's name ("rms_norm", "gemm"), "bias_act" or "cast"
  double ms = 0;         // device time summed over its launches
  uint32_t launches = 0;  // one per plan run, more where an op lowers to several steps (split + combine)
};
// Turning it on clears what was gathered; both need a backend made by make_cuda_backend.
Status set_step_profiling(ir::Backend& backend, bool on);
// The steps gathered since profiling was turned on, in the order first run.
Result<std::vector<ProfiledStep>> profiled_steps(const ir::Backend& backend);

// Rows kept on the device of a backend made by make_cuda_backend (row_buffer.cpp); an error for any other.
Result<std::unique_ptr<ir::RowBuffer>> make_cuda_row_buffer(ir::Backend& backend, uint32_t rows, uint32_t width,
                                                            ir::Storage storage);

// Device time on a CUDA backend's stream between marks (CUDA events), for benchmarks that time host-driven
// steps (bench/cuda_spec): mark() between steps, then read_ms() for the time from the first mark to each
// later one. Events are reused from one read to the next, so marking a warm loop allocates nothing.
class StreamMarks {
 public:
  virtual ~StreamMarks() = default;
  virtual Status mark() = 0;                          // records the next event on the stream, in stream order
  virtual Result<std::vector<double>> read_ms() = 0;  // waits for the last mark; ms since the first; clears
};
// Marks on a backend made by make_cuda_backend; an error for any other backend.
Result<std::unique_ptr<StreamMarks>> make_stream_marks(ir::Backend& backend);

}  // namespace tandem::cuda

// Kernel-level studies for the benchmark's variant tables (tools/gpu-check.sh): the attention kernels
// timed on one batch's shape against each other, every split-K-free cuBLASLt candidate of a GEMM
// shape timed and checked for the reference's bits, and the quantized GEMM's kernels on drafter shapes.
// Diagnostics only: no plan calls them.
#pragma once

#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/gemm_impl.h"
#include "engine/cuda/modules_impl.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"

namespace tandem::cuda {

// One attention kernel on one shape: its median time per launch, and how far its FP16 output is from
// the simt kernel's (the most precise) on the same random qkv.
struct AttentionStudy {
  CudaAttention kernel = CudaAttention::kSimt;
  double median_us = 0.0;
  double max_abs_diff = 0.0;  // against simt
  double max_abs_ref = 0.0;   // the largest |output| of simt, for scale
};

struct AttentionShape {
  ir::Batch batch;
  ir::Bucket bucket;
  uint32_t heads = 16;
  int window = -1;      // keys |i − j| <= window; < 0: global
  float theta = 0.0f;   // RoPE base; 0: no RoPE
};

// Each of simt, tc, tc2split and tc2 (those the device can run) on the shape: FP32 qkv of unit normal values,
// FP16 output as FP16 plans have it, `reps` timed launches after a few untimed ones.
Result<std::vector<AttentionStudy>> study_attention(const Device& device, const KernelModules& modules,
                                                    const AttentionShape& shape, int reps);

// One cuBLASLt candidate for a GEMM shape at m rows.
struct GemmCandidate {
  int rank = -1;               // place in cuBLASLt's ranking for m rows; -1: the 256-row reference only
  std::string algo;            // describe_algo
  double median_us = 0.0;
  bool same_bits = false;      // computes the reference's bits (the probe tandem trusts)
  bool reference = false;      // the shape's reference algorithm
  bool chosen = false;         // what Gemm::make runs at m rows
};

// The reference, the chosen one and every ranked candidate for m rows, on random operands, each timed
// over `reps` launches; sorted fastest first.
Result<std::vector<GemmCandidate>> study_gemm(const Device& device, GemmAlgos& algos, const GemmShape& shape,
                                              uint32_t m, int reps);

// One kernel of the quantized GEMM study (study_qgemm.cpp).
struct QGemmStudy {
  std::string kernel;          // "qgemm int4 tensor cores", "dense bf16 decode GEMM", ...
  double weight_bytes = 0.0;   // codes and scales (dense: the BF16 matrix)
  double median_us = 0.0;
  double max_rel_diff = 0.0;   // tensor cores: the largest |difference| from the CUDA cores / the largest |output|
};

// Both qgemm kernels (int8 and int4 codes, F16 scales in groups of 64) and the dense BF16 decode GEMM on a
// [cols, k] weight at `rows` BF16 rows, each timed over `reps` launches.
Result<std::vector<QGemmStudy>> study_qgemm(const Device& device, const KernelModules& modules, uint32_t k,
                                            uint32_t cols, uint32_t rows, int reps);

// One way of running a decoder GEMM shape at m rows (study_split.cpp): tandem's production choice, the decode
// GEMM, or a split-K cuBLASLt configuration; whether its rows have the same bits as the same configuration's
// run at the study's largest m (the determinism rule every decoder GEMM must keep).
struct SplitStudy {
  std::string config;           // "production", "decode GEMM", "reference split 4 compute", "heuristic ..."
  std::string algo;             // describe_algo, or the kernel
  uint32_t m = 0;
  int splits = 1;
  double median_us = 0.0;       // weights rotated through more than the L2 holds: each launch reads from HBM
  double weight_tb_per_s = 0.0;
  bool rows_invariant = false;  // the first m rows' bits equal the largest-m run's
  bool matches_production = false;  // the bits equal production's at the same m
  uint64_t production_ulps = 0;       // else the largest difference from them, in units of the last place
};

// Which configurations a split study runs: what a decoder plan runs (and the one-pass rule before it), that
// and the streaming GEMM, or everything above.
enum class SplitStudyParts { kProduction, kStream, kAll };

// The decoder's GEMM shape at each m of `ms` (ascending), the configurations of `parts`, `reps` launches each.
Result<std::vector<SplitStudy>> study_gemm_splits(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                                  const GemmShape& shape, const std::vector<uint32_t>& ms, int reps,
                                                  SplitStudyParts parts = SplitStudyParts::kAll);

}  // namespace tandem::cuda

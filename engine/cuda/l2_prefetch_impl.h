// Decoder GEMMs' weights brought into the L2 before their GEMM reads them (kernels/l2_prefetch.cu). At a few
// rows a GEMM streams its weight once and cuBLASLt's grid does not keep HBM busy (64 CTAs for the 4,096-wide
// q/o/down of a Qwen3-8B step, 2.2-3.2 TB/s against 4.2 for a copy), and between GEMMs the small kernels
// (norms, attention, SwiGLU) leave it idle. A prefetch on the side stream, forked right after the GEMM before,
// fills that idle time with the next weight's first bytes, so the GEMM reads them from the L2. It writes
// nothing, so every GEMM computes the same bits with it or without it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/gemm_impl.h"
#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {

struct L2Prefetch {
  uint64_t bytes = 0;      // of each GEMM's weight at most; 0: no prefetches
  uint32_t max_rows = 64;  // only plans whose GEMMs take at most this many rows (their weights bound them)
  uint64_t min_bytes = uint64_t{1} << 20;  // smaller weights are not worth a launch
};

// The prefetch of a weight of `rows` rows of row_bytes, each in `slices` K slices: the first
// budget / (rows · slices) bytes of every slice of every row (where each CTA of a GEMM starts), rounded down to 16.
Result<KernelStep> l2_prefetch_step(const StepContext& c, const void* w, uint32_t rows, uint64_t row_bytes,
                                    uint32_t slices, uint64_t budget);

// `steps` with a side step (KernelStep::side) before every 16-bit cuBLASLt GEMM and every quantized GEMM of a
// weight of at least p.min_bytes, if the plan takes at most p.max_rows rows: placed right after the weight step
// before it (so it starts when that one ends), or first.
Result<std::vector<Step>> with_l2_prefetches(std::vector<Step> steps, const std::vector<Gemm>& gemms,
                                             const StepContext& c, const L2Prefetch& p);

}  // namespace tandem::cuda

// The CUDA backend (scorer.md §3): one context and stream per worker, weights on the device, NVRTC
// kernels, cuBLASLt GEMMs, one arena and one CUDA graph per bucket.
#pragma once

#include <memory>

#include "engine/core/result.h"
#include "engine/ir/backend.h"

namespace tandem::cuda {

// Number of CUDA devices visible; 0 when there is no driver or no GPU (never an error).
int device_count();

struct CudaOptions {
  int device = 0;
  ir::Precision precision = ir::Precision::kF16;
  std::string cache_dir;  // compiled-module cache; empty = $XDG_CACHE_HOME/tandem or ~/.cache/tandem
};

Result<std::unique_ptr<ir::Backend>> make_cuda_backend(const CudaOptions& options);

}  // namespace tandem::cuda

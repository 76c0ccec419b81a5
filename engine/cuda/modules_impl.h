// Kernel modules (scorer.md §3): every embedded kernels/*.cu compiled by NVRTC for the device, cached on
// disk keyed by source hash, architecture, driver and NVRTC version (a restart does not recompile),
// loaded with cudaLibraryLoadData, and every entry of kernels_impl.h resolved up front.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/core/result.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/kernels_impl.h"

namespace tandem::cuda {

// $XDG_CACHE_HOME/tandem, else $HOME/.cache/tandem, else "" (no cache).
std::string default_cache_dir();

class KernelModules {
 public:
  // cache_dir "" disables the disk cache. Fails naming every listed entry NVRTC did not produce.
  static Result<std::unique_ptr<KernelModules>> load(const DeviceInfo& device, const std::string& cache_dir);
  ~KernelModules();
  KernelModules(const KernelModules&) = delete;
  KernelModules& operator=(const KernelModules&) = delete;

  cudaKernel_t kernel(KernelId id) const { return kernels_[static_cast<size_t>(id)]; }
  // False for an entry whose dynamic shared memory (kernel_dynamic_smem) the device cannot give it;
  // lowering then picks another kernel.
  bool launchable(KernelId id) const { return launchable_[static_cast<size_t>(id)]; }
  // "11 kernel files for sm_90 in 9 ms: 2 compiled by NVRTC 13.0, 9 from /root/.cache/tandem/kernels"
  const std::string& summary() const { return summary_; }
  size_t compiled() const { return compiled_; }  // files NVRTC compiled for this load
  size_t cached() const { return cached_; }      // files loaded from the disk cache
  // The key of a kernel file's source as compiled ("gemm_stream-<hash>-sm90-..."; "" for an unknown file):
  // verdicts about a kernel's results (the streaming GEMM's probes) are kept under it, so an edit retests.
  std::string source_key(std::string_view file) const;

 private:
  KernelModules() = default;
  std::vector<cudaLibrary_t> libraries_;
  std::array<cudaKernel_t, kKernelCount> kernels_{};
  std::array<bool, kKernelCount> launchable_{};
  std::vector<std::pair<std::string, std::string>> source_keys_;  // file name, key
  std::string summary_;
  size_t compiled_ = 0, cached_ = 0;
};

}  // namespace tandem::cuda

// One device context per backend (scorer.md §3): the device's facts, one non-blocking stream that every
// copy, kernel and GEMM of the backend runs on in order, a cuBLASLt handle and its workspace.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "engine/core/result.h"
#include "engine/cuda/buffer_impl.h"

namespace tandem::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  size_t memory = 0;          // total device memory
  size_t smem_optin = 0;      // shared memory a block may opt into
  int driver_version = 0;     // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;
  int arch() const { return cc_major * 10 + cc_minor; }  // 90 for sm_90
  std::string describe() const;                          // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
};

// Copies from the device to the host (cuda_backend.h's CudaTransfers).
struct D2hCount {
  uint64_t bytes = 0;
  uint64_t copies = 0;
  uint64_t lowering_bytes = 0;  // of `bytes`, what was copied while a plan was lowered
};

// 64 MiB: a decoder GEMM split in two at 1,024 rows keeps 2 · 1024 · n FP32 partials (32 MiB at n = 4096).
inline constexpr size_t kLtWorkspaceBytes = size_t{64} << 20;

class Device {
 public:
  static Result<std::unique_ptr<Device>> open(int index);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Makes this device current on the calling thread (the runtime's current device is per thread).
  Status activate() const;
  const DeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* workspace() const { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }
  Status synchronize() const;
  // Every device-to-host copy made on this device's stream is counted here as it runs (one thread drives
  // a backend, so the counters need no lock).
  void count_d2h(uint64_t bytes, uint64_t copies = 1) const {
    d2h_.bytes += bytes;
    d2h_.copies += copies;
    if (lowering_ > 0) d2h_.lowering_bytes += bytes;
  }
  const D2hCount& d2h() const { return d2h_; }
  // While one lives, the copies counted belong to a plan's lowering (its GEMM probes and warm-up run), not
  // to the work a caller runs: a server lowers plans lazily, inside a round, and its per-round traffic
  // figure must not include them.
  class Lowering {
   public:
    explicit Lowering(const Device& device) : device_(device) { ++device_.lowering_; }
    ~Lowering() { --device_.lowering_; }
    Lowering(const Lowering&) = delete;
    Lowering& operator=(const Lowering&) = delete;

   private:
    const Device& device_;
  };
  // The plan run that last counted its host outputs, and how much that was.
  void set_last_run_d2h(uint64_t bytes) const { last_run_d2h_ = bytes; }
  uint64_t last_run_d2h() const { return last_run_d2h_; }

 private:
  Device() = default;
  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer workspace_;
  mutable D2hCount d2h_;
  mutable uint64_t last_run_d2h_ = 0;
  mutable int lowering_ = 0;
};

}  // namespace tandem::cuda

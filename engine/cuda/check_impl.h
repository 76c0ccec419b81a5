// One check per C library the CUDA backend calls (style.md "C API checks"): each turns a status into a
// kDevice tandem::Error carrying the call's text and file:line. Every CUDA runtime, NVRTC and cuBLASLt
// call in engine/cuda goes through these; NCCL users include nccl.h before this header to get theirs.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "engine/core/error.h"
#include "engine/core/result.h"

namespace tandem::cuda {

Error cuda_error(cudaError_t status, const char* call, const char* file, int line);
Error nvrtc_error(nvrtcResult status, const char* call, const char* file, int line);
Error cublaslt_error(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace tandem::cuda

// Returns a kDevice error from the enclosing function (Status or Result<T>) when `call` fails.
#define TANDEM_CUDA_CHECK(call)                                                               \
  do {                                                                                        \
    const cudaError_t tandem_cuda_status_ = (call);                                           \
    if (tandem_cuda_status_ != cudaSuccess) {                                                 \
      return ::tandem::cuda::cuda_error(tandem_cuda_status_, #call, __FILE__, __LINE__);       \
    }                                                                                         \
  } while (false)

#define TANDEM_NVRTC_CHECK(call)                                                              \
  do {                                                                                        \
    const nvrtcResult tandem_nvrtc_status_ = (call);                                          \
    if (tandem_nvrtc_status_ != NVRTC_SUCCESS) {                                              \
      return ::tandem::cuda::nvrtc_error(tandem_nvrtc_status_, #call, __FILE__, __LINE__);     \
    }                                                                                         \
  } while (false)

#define TANDEM_CUBLASLT_CHECK(call)                                                           \
  do {                                                                                        \
    const cublasStatus_t tandem_lt_status_ = (call);                                          \
    if (tandem_lt_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      return ::tandem::cuda::cublaslt_error(tandem_lt_status_, #call, __FILE__, __LINE__);     \
    }                                                                                         \
  } while (false)

#if defined(NCCL_H_)
namespace tandem::cuda {
inline Error nccl_error(ncclResult_t status, const char* call, const char* file, int line) {
  return Error::make(ErrorKind::kDevice, "{} failed: {} ({}) at {}:{}", call, ncclGetErrorString(status),
                     static_cast<int>(status), file, line);
}
}  // namespace tandem::cuda
#define TANDEM_NCCL_CHECK(call)                                                               \
  do {                                                                                        \
    const ncclResult_t tandem_nccl_status_ = (call);                                          \
    if (tandem_nccl_status_ != ncclSuccess) {                                                 \
      return ::tandem::cuda::nccl_error(tandem_nccl_status_, #call, __FILE__, __LINE__);       \
    }                                                                                         \
  } while (false)
#endif

// Status-to-Error conversions for the check macros in check_impl.h.
#include "engine/cuda/check_impl.h"

namespace tandem::cuda {

Error cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  return Error::make(ErrorKind::kDevice, "{} failed: {} ({}) at {}:{}", call, cudaGetErrorName(status),
                     cudaGetErrorString(status), file, line);
}

Error nvrtc_error(nvrtcResult status, const char* call, const char* file, int line) {
  return Error::make(ErrorKind::kDevice, "{} failed: {} at {}:{}", call, nvrtcGetErrorString(status), file, line);
}

Error cublaslt_error(cublasStatus_t status, const char* call, const char* file, int line) {
  return Error::make(ErrorKind::kDevice, "{} failed: {} ({}) at {}:{}", call, cublasLtGetStatusName(status),
                     cublasLtGetStatusString(status), file, line);
}

}  // namespace tandem::cuda

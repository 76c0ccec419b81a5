// make_backend: "cpu" (f32 only) or "cuda" (only in builds with the CUDA backend, on a visible device).
#include "engine/backends/backend_factory.h"

#include "engine/cpu/cpu_backend.h"
#if TANDEM_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace tandem::backends {

Result<std::unique_ptr<ir::Backend>> make_backend(const BackendOptions& options) {
  if (options.name == "cpu") {
    if (options.precision != ir::Precision::kF32) {
      return Error::make(ErrorKind::kUnsupported, "the cpu backend runs precision f32 only, not {}",
                         ir::to_string(options.precision));
    }
    return cpu::make_cpu_backend(options.threads);
  }
  if (options.name == "cuda") {
#if TANDEM_HAVE_CUDA
    const int devices = cuda::device_count();
    if (devices == 0) {
      return Error(ErrorKind::kUnavailable, "backend cuda: no CUDA device is visible (no driver or no GPU)");
    }
    if (options.device < 0 || options.device >= devices) {
      return Error::make(ErrorKind::kInvalidArgument, "backend cuda: device {} does not exist ({} visible)",
                         options.device, devices);
    }
    cuda::CudaOptions cuda_options;
    cuda_options.device = options.device;
    cuda_options.precision = options.precision;
    return cuda::make_cuda_backend(cuda_options);
#else
    return Error(ErrorKind::kUnsupported,
                 "backend cuda: this tandem was built without the CUDA backend (no CUDA toolkit at build time)");
#endif
  }
  return Error::make(ErrorKind::kInvalidArgument, "backend '{}' is not one of cpu, cuda", options.name);
}

std::optional<uint64_t> device_to_host_bytes([[maybe_unused]] const ir::Backend& backend) {
#if TANDEM_HAVE_CUDA
  auto t = cuda::cuda_transfers(backend);
  if (t.ok()) return t->d2h_bytes - t->lowering_d2h_bytes;
#endif
  return std::nullopt;
}

}  // namespace tandem::backends

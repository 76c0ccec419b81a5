// Device context: properties, stream, cuBLASLt handle and workspace.
#include "engine/cuda/device_impl.h"

#include "engine/cuda/check_impl.h"
#include "engine/cuda/cuda_backend.h"

namespace tandem::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not sticky, but clear it for later callers
    return 0;
  }
  return n;
}

std::string DeviceInfo::describe() const {
  return fmt::format("{} (sm_{}, {} SMs, {})", name, arch(), sms, byte_string(memory));
}

Result<std::unique_ptr<Device>> Device::open(int index) {
  const int count = device_count();
  if (index < 0 || index >= count) {
    return Error::make(ErrorKind::kUnavailable, "CUDA device {} is not present ({} visible)", index, count);
  }
  std::unique_ptr<Device> d(new Device());
  d->info_.index = index;
  TANDEM_TRY(d->activate());
  cudaDeviceProp prop{};
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  d->info_.name = prop.name;
  d->info_.cc_major = prop.major;
  d->info_.cc_minor = prop.minor;
  d->info_.sms = prop.multiProcessorCount;
  d->info_.memory = prop.totalGlobalMem;
  d->info_.smem_optin = prop.sharedMemPerBlockOptin;
  TANDEM_CUDA_CHECK(cudaDriverGetVersion(&d->info_.driver_version));
  TANDEM_CUDA_CHECK(cudaRuntimeGetVersion(&d->info_.runtime_version));
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&d->stream_, cudaStreamNonBlocking));
  TANDEM_CUBLASLT_CHECK(cublasLtCreate(&d->lt_));
  TANDEM_ASSIGN(d->workspace_, DeviceBuffer::make(kLtWorkspaceBytes, "the cuBLASLt workspace"));
  return d;
}

Device::~Device() {
  // Teardown after a device fault still releases what it can; errors have no one to go to here.
  (void)cudaSetDevice(info_.index);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
  workspace_ = DeviceBuffer();
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Status Device::activate() const {
  TANDEM_CUDA_CHECK(cudaSetDevice(info_.index));
  return {};
}

Status Device::synchronize() const {
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return {};
}

}  // namespace tandem::cuda

// Device and pinned host allocations.
#include "engine/cuda/buffer_impl.h"

#include "engine/cuda/check_impl.h"

namespace tandem::cuda {

std::string byte_string(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (bytes >= (size_t{1} << 20)) return fmt::format("{:.2f} MiB", b / (1 << 20));
  if (bytes >= (size_t{1} << 10)) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{} B", bytes);
}

template <Memory kMemory>
Result<Buffer<kMemory>> Buffer<kMemory>::make(size_t bytes, std::string_view what) {
  Buffer out;
  if (bytes == 0) return out;
  const bool pinned = kMemory == Memory::kPinned;
  const cudaError_t st = pinned ? cudaMallocHost(&out.ptr_, bytes) : cudaMalloc(&out.ptr_, bytes);
  if (st != cudaSuccess) {
    out.ptr_ = nullptr;
    return cuda_error(st, pinned ? "cudaMallocHost" : "cudaMalloc", __FILE__, __LINE__)
        .context(fmt::format("allocating {} of {} memory for {}", byte_string(bytes), pinned ? "pinned host" : "device",
                             what));
  }
  out.bytes_ = bytes;
  return out;
}

template <Memory kMemory>
void Buffer<kMemory>::release() {
  // A failure here means the context is already gone; nothing is left to free.
  if (ptr_ != nullptr) (void)(kMemory == Memory::kPinned ? cudaFreeHost(ptr_) : cudaFree(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
}

template class Buffer<Memory::kDevice>;
template class Buffer<Memory::kPinned>;

}  // namespace tandem::cuda

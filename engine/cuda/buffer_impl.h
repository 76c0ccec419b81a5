// Owning handles for device memory (cudaMalloc) and pinned host memory (cudaMallocHost). Allocation
// happens at upload and lowering only; errors name what the memory was for and its size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/core/result.h"

namespace tandem::cuda {

enum class Memory : unsigned char { kDevice, kPinned };

template <Memory kMemory>
class Buffer {
 public:
  Buffer() = default;
  // A zero-byte buffer holds no allocation and a null pointer.
  static Result<Buffer> make(size_t bytes, std::string_view what);
  ~Buffer() { release(); }
  Buffer(Buffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      ptr_ = other.ptr_;
      bytes_ = other.bytes_;
      other.ptr_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<Memory::kDevice>;
using PinnedBuffer = Buffer<Memory::kPinned>;

// "1.50 GiB", for errors and reports.
std::string byte_string(size_t bytes);

}  // namespace tandem::cuda

// A regular file opened read-only (not a directory, device or pipe), closed when it goes: the one way
// engine/io opens what it reads, so every reader reports a missing or odd path the same way.
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/result.h"

namespace tandem::io {

class RegularFile {
 public:
  // kNotFound when the path does not exist; kIo when it cannot be opened or is not a regular file.
  static Result<RegularFile> open(const std::string& path);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // at open

 private:
  RegularFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace tandem::io

// Files compiled into the binary (kernels/*.cu, engine/ir/buckets.txt) by cmake/embed.cmake.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace tandem::embedded {

struct File {
  std::string_view name;  // file name without its folder
  std::string_view text;
};

std::span<const File> kernels();      // kernels/*.cu, defined when the CUDA backend is built
std::span<const File> data_files();   // engine/ir/buckets.txt and other small tables

inline std::optional<std::string_view> find(std::span<const File> files, std::string_view name) {
  for (const File& f : files) {
    if (f.name == name) return f.text;
  }
  return std::nullopt;
}

}  // namespace tandem::embedded

// Files of the backend's on-disk caches (compiled kernel modules, GEMM choices): read whole, written
// through a temporary name and renamed, so a concurrent reader never sees half a file. A cache that
// cannot be read is empty and one that cannot be written is a warning: neither fails the backend.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace tandem::cuda {

// The file's bytes, or none when it cannot be read.
std::vector<char> read_cache_file(const std::filesystem::path& path);

// Replaces the file with `bytes` (creating its directory); `cache` names the cache in warnings.
void write_cache_file(const std::filesystem::path& path, const std::vector<char>& bytes, std::string_view cache);

}  // namespace tandem::cuda

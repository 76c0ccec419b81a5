// Whole-file reads and atomic replacement for the backend's caches (cache_file_impl.h).
#include "engine/cuda/cache_file_impl.h"

#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "engine/core/log.h"

namespace tandem::cuda {

namespace fs = std::filesystem;

std::vector<char> read_cache_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_cache_file(const fs::path& path, const std::vector<char>& bytes, std::string_view cache) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    log::warn("{}: cannot create {}: {}", cache, path.parent_path().string(), ec.message());
    return;
  }
  const fs::path tmp = path.string() + fmt::format(".tmp{}", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      log::warn("{}: cannot write {}", cache, tmp.string());
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    log::warn("{}: cannot rename {} to {}: {}", cache, tmp.string(), path.string(), ec.message());
    fs::remove(tmp, ec);
  }
}

}  // namespace tandem::cuda

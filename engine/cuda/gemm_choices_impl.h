// The GEMM choices that cost device time to make (whether two algorithms give the same bits, which
// bit-identical candidate is fastest for m rows), remembered on disk per device model, cuBLASLt version
// and driver, so that a worker's next start skips the probes and timing. gemm_impl.h's rules do not
// change: the file only holds their outcomes, and an entry that no longer fits is measured again.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "engine/cuda/device_impl.h"

namespace tandem::cuda {

class GemmChoices {
 public:
  GemmChoices() = default;  // in memory only
  // The choices file of this device under cache_dir/gemm, with what it holds ("" = in memory only). A
  // file of another format or with damaged lines gives up those lines, never an error.
  static GemmChoices open(const std::string& cache_dir, const DeviceInfo& device, size_t cublaslt_version);

  // Keys are opaque strings (they may hold algorithm bytes); values as the probes and timing found them.
  std::optional<bool> same_bits(const std::string& key) const;
  void set_same_bits(const std::string& key, bool same);
  std::optional<std::string> fastest(const std::string& key) const;  // the chosen algorithm's bytes
  void set_fastest(const std::string& key, const std::string& algo_bytes);

  // Writes the file when choices were added since it was read or last written.
  void save();
  size_t loaded() const { return loaded_; }  // entries read from the file
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::map<std::string, bool> same_;
  std::map<std::string, std::string> fastest_;
  size_t loaded_ = 0;
  bool dirty_ = false;
};

}  // namespace tandem::cuda

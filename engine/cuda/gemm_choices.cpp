// GEMM choices on disk (gemm_choices_impl.h). One text file per device identity: a header line, then
// "same <key> 0|1" and "fastest <key> <algorithm>" lines, keys and algorithm bytes in hex.
#include "engine/cuda/gemm_choices_impl.h"

#include <cctype>
#include <sstream>

#include <fmt/format.h>

#include "engine/core/log.h"
#include "engine/cuda/cache_file_impl.h"

namespace tandem::cuda {
namespace {

constexpr std::string_view kHeader = "tandem gemm choices 1";

std::string to_hex(const std::string& bytes) {
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

std::optional<std::string> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int v = 0;
    for (size_t j = 0; j < 2; ++j) {
      const char c = hex[2 * i + j];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = 16 * v + d;
    }
    out[i] = static_cast<char>(v);
  }
  return out;
}

// "NVIDIA-H200-sm90-132sms-lt130100-drv13000": what the choices depend on (the algorithms cuBLASLt
// offers and how they reduce are properties of the library and the chip).
std::string identity(const DeviceInfo& d, size_t cublaslt_version) {
  std::string name;
  for (char c : d.name) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return fmt::format("{}-sm{}-{}sms-lt{}-drv{}", name, d.arch(), d.sms, cublaslt_version, d.driver_version);
}

}  // namespace

GemmChoices GemmChoices::open(const std::string& cache_dir, const DeviceInfo& device, size_t cublaslt_version) {
  GemmChoices c;
  if (cache_dir.empty()) return c;
  c.path_ = std::filesystem::path(cache_dir) / "gemm" / (identity(device, cublaslt_version) + ".txt");
  const std::vector<char> bytes = read_cache_file(c.path_);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return c;  // absent, empty or another format
  size_t damaged = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, key_hex, value, rest;
    fields >> kind >> key_hex >> value;
    const std::optional<std::string> key = from_hex(key_hex);
    const bool complete = fields && !(fields >> rest) && key && !key->empty();
    if (complete && kind == "same" && (value == "0" || value == "1")) {
      c.same_[*key] = value == "1";
    } else if (const std::optional<std::string> algo = from_hex(value); complete && kind == "fastest" && algo) {
      c.fastest_[*key] = *algo;
    } else {
      ++damaged;
      continue;
    }
    ++c.loaded_;
  }
  if (damaged > 0) {
    log::warn("GEMM choice cache {}: {} damaged lines skipped (measured again)", c.path_.string(), damaged);
    c.dirty_ = true;  // the next save writes a clean file
  }
  return c;
}

std::optional<bool> GemmChoices::same_bits(const std::string& key) const {
  if (auto it = same_.find(key); it != same_.end()) return it->second;
  return std::nullopt;
}

void GemmChoices::set_same_bits(const std::string& key, bool same) {
  same_[key] = same;
  dirty_ = true;
}

std::optional<std::string> GemmChoices::fastest(const std::string& key) const {
  if (auto it = fastest_.find(key); it != fastest_.end()) return it->second;
  return std::nullopt;
}

void GemmChoices::set_fastest(const std::string& key, const std::string& algo_bytes) {
  fastest_[key] = algo_bytes;
  dirty_ = true;
}

void GemmChoices::save() {
  if (!dirty_ || path_.empty()) return;
  std::string text(kHeader);
  text += '\n';
  for (const auto& [key, same] : same_) text += fmt::format("same {} {}\n", to_hex(key), same ? 1 : 0);
  for (const auto& [key, algo] : fastest_) text += fmt::format("fastest {} {}\n", to_hex(key), to_hex(algo));
  write_cache_file(path_, std::vector<char>(text.begin(), text.end()), "GEMM choice cache");
  dirty_ = false;
}

}  // namespace tandem::cuda

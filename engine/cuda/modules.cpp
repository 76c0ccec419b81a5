// NVRTC module cache and loading.
#include "engine/cuda/modules_impl.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>


#include "engine/core/embedded.h"
#include "engine/core/log.h"
#include "engine/cuda/cache_file_impl.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/nvrtc_impl.h"

namespace tandem::cuda {
namespace {

namespace fs = std::filesystem;

// FNV-1a, 64 bits; two bases give the 128-bit cache key.
uint64_t fnv1a(std::string_view data, uint64_t h) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string cache_key(const embedded::File& file, std::span<const embedded::File> all, const NvrtcTarget& target,
                      int driver) {
  std::string material;
  material += file.name;
  material += '\0';
  material += file.text;
  for (const embedded::File& f : all) {
    if (is_kernel_source(f.name)) continue;
    material += '\0';
    material += f.name;
    material += '\0';
    material += f.text;
  }
  for (const std::string& o : nvrtc_options(target)) material += '\0' + o;
  material += '\0' + nvrtc_version();
  const uint64_t a = fnv1a(material, 0xcbf29ce484222325ull), b = fnv1a(material, 0x84222325cbf29ce4ull);
  const std::string stem(file.name.substr(0, file.name.size() - 3));
  return fmt::format("{}-{:016x}{:016x}-{}{}-drv{}.{}", stem, a, b, target.ptx ? "compute" : "sm", target.arch,
                     driver, target.ptx ? "ptx" : "cubin");
}

bool looks_like_image(const std::vector<char>& image, const NvrtcTarget& target) {
  if (target.ptx) return std::string_view(image.data(), image.size()).find(".target") != std::string_view::npos;
  return image.size() > 4 && image[0] == 0x7f && image[1] == 'E' && image[2] == 'L' && image[3] == 'F';
}

struct Slot {
  const embedded::File* file = nullptr;
  fs::path cache_path;  // empty without a cache
  std::vector<char> image;
  bool from_cache = false;
  Result<CompiledFile> compiled = Error(ErrorKind::kInternal, "not compiled");
};

// Compiles the slots that have no image yet, one thread each (NVRTC programs are independent).
Status compile_missing(std::vector<Slot>& slots, std::span<const embedded::File> all, const NvrtcTarget& target) {
  std::vector<std::thread> threads;
  try {
    for (Slot& s : slots) {
      if (!s.image.empty()) continue;
      threads.emplace_back([&s, all, target] { s.compiled = compile_kernel_file(*s.file, all, target); });
    }
  } catch (const std::exception& e) {
    for (std::thread& t : threads) t.join();
    return Error::make(ErrorKind::kInternal, "starting kernel compile threads: {}", e.what());
  }
  for (std::thread& t : threads) t.join();
  for (Slot& s : slots) {
    if (!s.image.empty()) continue;
    if (!s.compiled.ok()) return std::move(s.compiled).error();
    CompiledFile& c = s.compiled.value();
    if (!c.log.empty()) log::warn("NVRTC on kernels/{}: {}", c.name, c.log);
    s.image = std::move(c.image);
    if (!s.cache_path.empty()) write_cache_file(s.cache_path, s.image, "kernel cache");
  }
  return {};
}

}  // namespace

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "tandem").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "tandem").string();
  }
  return "";
}

Result<std::unique_ptr<KernelModules>> KernelModules::load(const DeviceInfo& device, const std::string& cache_dir) {
  const auto start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN(const NvrtcTarget target, nvrtc_target(device.arch()));
  const std::span<const embedded::File> all = embedded::kernels();
  std::vector<Slot> slots;
  std::vector<std::pair<std::string, std::string>> source_keys;
  for (const embedded::File& f : all) {
    if (!is_kernel_source(f.name)) continue;
    Slot s;
    s.file = &f;
    const std::string key = cache_key(f, all, target, device.driver_version);
    source_keys.emplace_back(std::string(f.name), key);
    if (!cache_dir.empty()) {
      s.cache_path = fs::path(cache_dir) / "kernels" / key;
      s.image = read_cache_file(s.cache_path);
      // Lazy module loading accepts any bytes and fails only at the first kernel lookup, so a damaged
      // entry is caught here by its format: a cubin is an ELF file, PTX is text naming its target.
      if (!looks_like_image(s.image, target)) s.image.clear();
      s.from_cache = !s.image.empty();
    }
    slots.push_back(std::move(s));
  }
  TANDEM_TRY(compile_missing(slots, all, target));

  std::unique_ptr<KernelModules> m(new KernelModules());
  m->source_keys_ = std::move(source_keys);
  std::vector<cudaLibrary_t> by_slot(slots.size(), nullptr);
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& s = slots[i];
    cudaError_t st = cudaLibraryLoadData(&by_slot[i], s.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (st != cudaSuccess && s.from_cache) {
      // A stale or damaged cache entry: drop it, compile afresh and load once more.
      (void)cudaGetLastError();
      log::warn("kernel cache: {} did not load ({}); recompiling", s.cache_path.string(), cudaGetErrorName(st));
      std::error_code ec;
      fs::remove(s.cache_path, ec);
      s.image.clear();
      s.from_cache = false;
      std::vector<Slot> one;
      one.push_back(std::move(s));
      TANDEM_TRY(compile_missing(one, all, target));
      s = std::move(one[0]);
      st = cudaLibraryLoadData(&by_slot[i], s.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    }
    if (st != cudaSuccess) {
      for (cudaLibrary_t lib : by_slot) {
        if (lib != nullptr) (void)cudaLibraryUnload(lib);
      }
      return cuda_error(st, "cudaLibraryLoadData", __FILE__, __LINE__)
          .context(fmt::format("loading kernels/{} for sm_{}", s.file->name, target.arch));
    }
    m->libraries_.push_back(by_slot[i]);
  }

  std::string missing;
  for (size_t k = 0; k < kKernelCount; ++k) {
    const KernelInfo& info = kernel_info(static_cast<KernelId>(k));
    cudaLibrary_t lib = nullptr;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].file->name == info.file) lib = by_slot[i];
    }
    if (lib == nullptr || cudaLibraryGetKernel(&m->kernels_[k], lib, info.entry) != cudaSuccess) {
      (void)cudaGetLastError();
      missing += fmt::format("{}{} (kernels/{})", missing.empty() ? "" : ", ", info.entry, info.file);
    }
  }
  if (!missing.empty()) {
    return Error::make(ErrorKind::kInternal, "kernel entries that NVRTC did not produce: {}", missing);
  }
  constexpr uint32_t kDefaultSmem = 48u << 10;
  for (size_t k = 0; k < kKernelCount; ++k) {
    const uint32_t smem = kernel_dynamic_smem(static_cast<KernelId>(k));
    m->launchable_[k] = smem <= kDefaultSmem;
    if (smem <= kDefaultSmem) continue;
    if (smem > device.smem_optin) {
      log::info("kernel {} needs {} B of shared memory, the device offers {} B: not used",
                kernel_info(static_cast<KernelId>(k)).entry, smem, device.smem_optin);
      continue;
    }
    // INVARIANT: a cudaKernel_t may be passed as the function pointer of cudaFuncSetAttribute.
    const cudaError_t st = cudaFuncSetAttribute(static_cast<const void*>(m->kernels_[k]),
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (st != cudaSuccess) {
      (void)cudaGetLastError();
      log::warn("kernel {}: raising its shared memory to {} B failed ({}): not used",
                kernel_info(static_cast<KernelId>(k)).entry, smem, cudaGetErrorName(st));
      continue;
    }
    m->launchable_[k] = true;
  }
  size_t cached = 0;
  for (const Slot& s : slots) cached += s.from_cache ? 1 : 0;
  m->cached_ = cached;
  m->compiled_ = slots.size() - cached;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  m->summary_ = fmt::format("{} kernel files for {}_{} in {} ms: {} compiled by NVRTC {}, {} from {}", slots.size(),
                            target.ptx ? "compute" : "sm", target.arch, ms, slots.size() - cached, nvrtc_version(),
                            cached, cache_dir.empty() ? "no cache" : cache_dir + "/kernels");
  return m;
}

KernelModules::~KernelModules() {
  for (cudaLibrary_t lib : libraries_) (void)cudaLibraryUnload(lib);
}

std::string KernelModules::source_key(std::string_view file) const {
  for (const auto& [name, key] : source_keys_) {
    if (name == file) return key;
  }
  return "";
}

}  // namespace tandem::cuda

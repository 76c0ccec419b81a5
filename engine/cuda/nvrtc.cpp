// NVRTC wrapper: target choice, options, one program per kernel file.
#include "engine/cuda/nvrtc_impl.h"

#include <memory>

#include "engine/cuda/check_impl.h"

namespace tandem::cuda {
namespace {

// Destroys the program on every path out of compile_kernel_file.
struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    (void)nvrtcDestroyProgram(p);
    delete p;
  }
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

bool is_kernel_source(std::string_view name) { return ends_with(name, ".cu"); }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}

Result<NvrtcTarget> nvrtc_target(int device_arch) {
  int count = 0;
  TANDEM_NVRTC_CHECK(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> archs(static_cast<size_t>(count));
  if (count > 0) TANDEM_NVRTC_CHECK(nvrtcGetSupportedArchs(archs.data()));
  int best = 0;
  for (int a : archs) {
    if (a == device_arch) return NvrtcTarget{a, false};
    if (a < device_arch && a > best) best = a;
  }
  if (best == 0) {
    return Error::make(ErrorKind::kUnsupported, "NVRTC {} cannot build for sm_{} or any older architecture",
                       nvrtc_version(), device_arch);
  }
  return NvrtcTarget{best, true};
}

std::vector<std::string> nvrtc_options(const NvrtcTarget& target) {
  return {
      fmt::format("--gpu-architecture={}_{}", target.ptx ? "compute" : "sm", target.arch),
      "--std=c++17",
      "--generate-line-info",         // source lines for compute-sanitizer and profilers
      "-Xptxas=--warn-on-spills",     // a register spill is a warning, and the compile test fails on it
  };
}

Result<CompiledFile> compile_kernel_file(const embedded::File& file, std::span<const embedded::File> all,
                                         const NvrtcTarget& target) {
  std::vector<std::string> header_texts, header_names;
  for (const embedded::File& f : all) {
    if (is_kernel_source(f.name)) continue;
    header_texts.emplace_back(f.text);
    header_names.emplace_back(f.name);
  }
  std::vector<const char*> texts, names;
  for (size_t i = 0; i < header_texts.size(); ++i) {
    texts.push_back(header_texts[i].c_str());
    names.push_back(header_names[i].c_str());
  }
  const std::string source(file.text);
  const std::string name(file.name);
  std::unique_ptr<nvrtcProgram, ProgramDeleter> prog(new nvrtcProgram(nullptr));
  TANDEM_NVRTC_CHECK(nvrtcCreateProgram(prog.get(), source.c_str(), name.c_str(), static_cast<int>(texts.size()),
                                        texts.data(), names.data()));
  const std::vector<std::string> options = nvrtc_options(target);
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(*prog, static_cast<int>(opts.size()), opts.data());

  CompiledFile out;
  out.name = name;
  size_t log_size = 0;
  TANDEM_NVRTC_CHECK(nvrtcGetProgramLogSize(*prog, &log_size));
  out.log.resize(log_size);
  if (log_size > 0) TANDEM_NVRTC_CHECK(nvrtcGetProgramLog(*prog, out.log.data()));
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (compiled != NVRTC_SUCCESS) {
    return Error::make(ErrorKind::kInternal, "NVRTC {} could not compile kernels/{} for {}_{}: {}\n{}",
                       nvrtc_version(), name, target.ptx ? "compute" : "sm", target.arch,
                       nvrtcGetErrorString(compiled), out.log);
  }
  size_t size = 0;
  if (target.ptx) {
    TANDEM_NVRTC_CHECK(nvrtcGetPTXSize(*prog, &size));  // includes the NUL
    out.image.resize(size);
    TANDEM_NVRTC_CHECK(nvrtcGetPTX(*prog, out.image.data()));
  } else {
    TANDEM_NVRTC_CHECK(nvrtcGetCUBINSize(*prog, &size));
    out.image.resize(size);
    TANDEM_NVRTC_CHECK(nvrtcGetCUBIN(*prog, out.image.data()));
  }
  return out;
}

}  // namespace tandem::cuda

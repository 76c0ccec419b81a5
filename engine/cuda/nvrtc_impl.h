// NVRTC compilation of the embedded kernels/*.cu files (scorer.md §3): each file is one program, given
// the embedded .cuh headers (prelude.cuh, args.cuh) in memory. No GPU is needed to compile.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/core/embedded.h"
#include "engine/core/result.h"

namespace tandem::cuda {

// What NVRTC builds for a device: SASS (a cubin) for its architecture, or PTX for the newest
// architecture NVRTC knows when the device is newer than NVRTC (the driver compiles that PTX).
struct NvrtcTarget {
  int arch = 0;  // 90 for sm_90
  bool ptx = false;
};
Result<NvrtcTarget> nvrtc_target(int device_arch);
std::string nvrtc_version();  // "13.0"

// The options every kernel file is compiled with; part of the module cache key.
std::vector<std::string> nvrtc_options(const NvrtcTarget& target);

struct CompiledFile {
  std::string name;         // "layer_norm.cu"
  std::vector<char> image;  // cubin bytes, or PTX text ending in NUL
  std::string log;          // NVRTC's log (warnings); empty for a clean compile
};

// Compiles `file` with the .cuh files of `all` as its headers. A compile error is a kInternal error
// carrying NVRTC's log (the kernels are part of the binary).
Result<CompiledFile> compile_kernel_file(const embedded::File& file, std::span<const embedded::File> all,
                                         const NvrtcTarget& target);

bool is_kernel_source(std::string_view name);  // *.cu (headers are *.cuh)

}  // namespace tandem::cuda

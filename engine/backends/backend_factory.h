// The backends room: a backend by name ("cpu" | "cuda") for the CLI commands and workers, so no model
// room needs to know which backends exist. "cuda" is an error naming the reason when the binary was
// built without CUDA or no device is present.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/core/result.h"
#include "engine/ir/backend.h"

namespace tandem::backends {

struct BackendOptions {
  std::string name = "cpu";
  ir::Precision precision = ir::Precision::kF32;
  int device = 0;
  size_t threads = 0;  // cpu: 0 = one per hardware thread
};

Result<std::unique_ptr<ir::Backend>> make_backend(const BackendOptions& options);

// Bytes the backend's runs and fetches have copied from its device to the host since it was made (the CUDA
// backend's count, cuda_backend.h's CudaTransfers, less what lowering plans copied: a server lowers a plan
// the first time a round needs it, and that one-off is not the round's data); nullopt for a backend without
// a device of its own (the CPU backend).
std::optional<uint64_t> device_to_host_bytes(const ir::Backend& backend);

}  // namespace tandem::backends

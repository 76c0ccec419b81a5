// Backend by name ("cpu" | "cuda"), for the CLI and workers. "cuda" is an error naming the reason when
// the binary was built without CUDA or no device is present.
#pragma once

#include <memory>
#include <string>

#include "engine/core/result.h"
#include "engine/ir/backend.h"

namespace tandem::models {

struct BackendOptions {
  std::string name = "cpu";
  ir::Precision precision = ir::Precision::kF32;
  int device = 0;
  size_t threads = 0;  // cpu: 0 = one per hardware thread
};

Result<std::unique_ptr<ir::Backend>> make_backend(const BackendOptions& options);

}  // namespace tandem::models

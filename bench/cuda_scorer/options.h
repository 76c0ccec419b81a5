// The CUDA scorer benchmark's command-line options.
#pragma once

#include <string>

#include "engine/ir/backend.h"

namespace tandem::bench {

struct Options {
  ir::Precision precision = ir::Precision::kF16;
  std::string json;
  bool profile = false;
  bool quick = false;
  bool tiny = false;  // a 4-layer d-128 model and a few calls: a smoke run (the emulator's test)
  bool variants = false;  // W1/W3/4096 of each backend variant (kVariants) against the default
  bool study = false;     // attention kernels and GEMM candidates timed one by one (study_impl.h)
  int device = 0;
};

}  // namespace tandem::bench

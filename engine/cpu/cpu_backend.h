// The CPU reference backend: interprets IR graphs in FP32 (statistics in f64 where the IR says so),
// threaded, and bit-identical for any thread count and any batch composition.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/ir/backend.h"

namespace tandem::cpu {

// threads == 0: one per hardware thread.
std::unique_ptr<ir::Backend> make_cpu_backend(size_t threads = 0);

}  // namespace tandem::cpu

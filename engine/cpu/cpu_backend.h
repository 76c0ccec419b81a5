// The CPU reference backend: interprets IR graphs in FP32 (statistics in f64 where the IR says so),
// threaded, and bit-identical for any thread count and any batch composition.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/ir/backend.h"
#include "engine/ir/row_buffer.h"

namespace tandem::cpu {

// threads == 0: one per hardware thread.
std::unique_ptr<ir::Backend> make_cpu_backend(size_t threads = 0);

// Rows kept for `owner`, a CPU backend, in host memory (its "device"): f32 or u32 (row_buffer.cpp).
Result<std::unique_ptr<ir::RowBuffer>> make_cpu_row_buffer(ir::Backend& owner, uint32_t rows, uint32_t width,
                                                           ir::Storage storage);

}  // namespace tandem::cpu

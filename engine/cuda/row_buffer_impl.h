// make_cuda_row_buffer's buffers (cuda_backend.h; row_buffer.cpp): rows kept in the backend's device memory.
#pragma once

#include <memory>

#include "engine/cuda/device_impl.h"
#include "engine/ir/backend.h"
#include "engine/ir/row_buffer.h"

namespace tandem::cuda {

// `rows` rows of `width` elements of `storage` on `device`, as rows of `owner` (the backend on it).
Result<std::unique_ptr<ir::RowBuffer>> make_row_buffer(Device& device, ir::Backend& owner, uint32_t rows,
                                                       uint32_t width, ir::Storage storage);

}  // namespace tandem::cuda

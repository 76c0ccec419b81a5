// Row buffers by backend (engine/ir/row_buffer.h): device storage a caller keeps rows in, made for
// whichever backend a rank runs, so worker code keeps rows on the device in one code path.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/ir/row_buffer.h"

namespace tandem::backends {

// `rows` rows of `width` elements of `storage` on `backend`'s device (host memory for the CPU backend,
// which keeps f32 and u32 rows only).
Result<std::unique_ptr<ir::RowBuffer>> make_row_buffer(ir::Backend& backend, uint32_t rows, uint32_t width,
                                                       ir::Storage storage);

}  // namespace tandem::backends

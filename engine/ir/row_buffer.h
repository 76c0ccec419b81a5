// Rows a caller keeps on a backend's device past the run or receive that left them: a drafter rank's last
// tap row per slot (overlap's guesses), a target rank's proposals q from its drafter ranks. Made by
// engine/backends' make_row_buffer; their view() is DeviceRows of that backend, read by its runs
// (feature rows, RejectSample's proposals) without a host copy.
#pragma once

#include <cstdint>
#include <span>

#include "engine/core/result.h"
#include "engine/ir/device_rows.h"

namespace tandem::ir {

// `rows` rows of `width` elements of one storage, packed. Every call returns once its copy is done, so
// its source may be reused at once (a link's receive buffer, a plan output, host rows).
class RowBuffer {
 public:
  virtual ~RowBuffer() = default;
  // The buffer's rows as device rows of its backend, valid while the buffer lives.
  virtual DeviceRows view() const = 0;
  // Rows [first, first + count) of `from` (device rows of the same backend, width and storage) into rows
  // [at, at + count), copied on the device.
  virtual Status copy(const DeviceRows& from, uint32_t first, uint32_t count, uint32_t at) = 0;
  // Host rows into rows [at, ...): floats into an f32 buffer, ids into a u32 one; whole rows.
  virtual Status write(uint32_t at, std::span<const float> values) = 0;
  virtual Status write(uint32_t at, std::span<const uint32_t> ids) = 0;
};

// The checks every RowBuffer makes (`to`: its view): a copy of rows [first, first + count) of `from`, of
// its owner, width and storage, into rows [at, at + count); a write of `values` host elements of `given`
// storage, whole rows, from row `at`. Errors name the rows and shapes.
Status check_rows_copy(const DeviceRows& to, const DeviceRows& from, uint32_t first, uint32_t count, uint32_t at);
Status check_rows_write(const DeviceRows& to, size_t values, Storage given, uint32_t at);

}  // namespace tandem::ir

// The checks every RowBuffer makes (row_buffer.h).
#include "engine/ir/row_buffer.h"

#include <fmt/format.h>

namespace tandem::ir {

Status check_rows_copy(const DeviceRows& to, const DeviceRows& from, uint32_t first, uint32_t count, uint32_t at) {
  if (from.owner != to.owner || from.width != to.width || from.storage != to.storage) {
    return Error::make(ErrorKind::kInvalidArgument, "copying {} rows of {} {} into a row buffer of {} {}{}", count,
                       from.width, to_string(from.storage), to.width, to_string(to.storage),
                       from.owner != to.owner ? " held by another backend" : "");
  }
  if (uint64_t{first} + count > from.rows || uint64_t{at} + count > to.rows) {
    return Error::make(ErrorKind::kInvalidArgument, "copying rows {}..{} of {} into rows {}..{} of a row buffer of {}",
                       first, uint64_t{first} + count, from.rows, at, uint64_t{at} + count, to.rows);
  }
  return {};
}

Status check_rows_write(const DeviceRows& to, size_t values, Storage given, uint32_t at) {
  if (given != to.storage || to.width == 0 || values % to.width != 0) {
    return Error::make(ErrorKind::kInvalidArgument, "writing {} {} values into a row buffer of {} rows of {} {}",
                       values, to_string(given), to.rows, to.width, to_string(to.storage));
  }
  if (uint64_t{at} + values / to.width > to.rows) {
    return Error::make(ErrorKind::kInvalidArgument, "writing rows {}..{} of a row buffer of {}", at,
                       uint64_t{at} + values / to.width, to.rows);
  }
  return {};
}

}  // namespace tandem::ir

// The CPU backend's RowBuffer (engine/ir/row_buffer.h): its "device" is host memory, so rows are kept in a
// host array and copies are memcpy, as the backend's own outputs are. f32 and u32 rows only (the
// reference computes in f32).
#include <cstring>
#include <vector>

#include "engine/cpu/cpu_backend.h"

namespace tandem::cpu {
namespace {

class CpuRowBuffer final : public ir::RowBuffer {
 public:
  CpuRowBuffer(ir::Backend& owner, uint32_t rows, uint32_t width, ir::Storage storage)
      : words_(size_t{rows} * width), view_{nullptr, rows, width, width, storage, &owner} {
    view_.data = words_.data();
  }
  ir::DeviceRows view() const override { return view_; }

  Status copy(const ir::DeviceRows& from, uint32_t first, uint32_t count, uint32_t at) override {
    TANDEM_TRY(ir::check_rows_copy(view_, from, first, count, at));
    // INVARIANT: rows of this backend are 4-byte elements `stride` apart in host memory (CpuBackend::run),
    // and the check above kept both ranges inside their rows.
    const auto* src = static_cast<const uint32_t*>(from.data) + size_t{first} * from.stride;
    for (uint32_t r = 0; r < count; ++r) {
      std::memcpy(words_.data() + size_t{at + r} * view_.width, src + size_t{r} * from.stride,
                  size_t{view_.width} * sizeof(uint32_t));
    }
    return {};
  }
  Status write(uint32_t at, std::span<const float> values) override {
    TANDEM_TRY(ir::check_rows_write(view_, values.size(), ir::Storage::kF32, at));
    std::memcpy(words_.data() + size_t{at} * view_.width, values.data(), values.size_bytes());
    return {};
  }
  Status write(uint32_t at, std::span<const uint32_t> ids) override {
    TANDEM_TRY(ir::check_rows_write(view_, ids.size(), ir::Storage::kU32, at));
    std::memcpy(words_.data() + size_t{at} * view_.width, ids.data(), ids.size_bytes());
    return {};
  }

 private:
  std::vector<uint32_t> words_;  // 4-byte elements: f32 bits or u32 ids
  ir::DeviceRows view_;
};

}  // namespace

Result<std::unique_ptr<ir::RowBuffer>> make_cpu_row_buffer(ir::Backend& owner, uint32_t rows, uint32_t width,
                                                           ir::Storage storage) {
  if (storage != ir::Storage::kF32 && storage != ir::Storage::kU32) {
    return Error::make(ErrorKind::kUnsupported, "a cpu row buffer of {} rows: the cpu backend keeps f32 and u32 rows",
                       ir::to_string(storage));
  }
  try {
    return std::unique_ptr<ir::RowBuffer>(std::make_unique<CpuRowBuffer>(owner, rows, width, storage));
  } catch (const std::bad_alloc&) {
    return Error::make(ErrorKind::kCapacity, "a cpu row buffer of {} rows of {}: out of host memory", rows, width);
  }
}

}  // namespace tandem::cpu

// The CUDA backend's RowBuffer (engine/ir/row_buffer.h): rows in device memory of the backend's device,
// written on its one stream, so its runs read them in order; each call waits for its copy, so the
// source (a link's receive buffer, a plan output, host rows) may be reused as soon as it returns.
#include "engine/cuda/row_buffer_impl.h"

#include <fmt/format.h>

#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/check_impl.h"

namespace tandem::cuda {
namespace {

class CudaRowBuffer final : public ir::RowBuffer {
 public:
  CudaRowBuffer(Device& device, DeviceBuffer memory, ir::DeviceRows view)
      : device_(device), memory_(std::move(memory)), view_(view) {
    view_.data = memory_.data();
  }
  ir::DeviceRows view() const override { return view_; }

  Status copy(const ir::DeviceRows& from, uint32_t first, uint32_t count, uint32_t at) override {
    TANDEM_TRY(ir::check_rows_copy(view_, from, first, count, at));
    if (count == 0) return {};
    TANDEM_TRY(device_.activate());
    const size_t elem = ir::storage_bytes(view_.storage), row = size_t{view_.width} * elem;
    // INVARIANT: `from` is on this device (its owner is this buffer's backend, checked) and both ranges lie
    // inside their rows (checked); the copy is waited for below, so a later receive or run may overwrite it.
    const auto* src = static_cast<const unsigned char*>(from.data) + size_t{first} * from.stride * elem;
    TANDEM_CUDA_CHECK(cudaMemcpy2DAsync(row_at(at), row, src, size_t{from.stride} * elem, row, count,
                                        cudaMemcpyDeviceToDevice, device_.stream()));
    return device_.synchronize();
  }
  Status write(uint32_t at, std::span<const float> values) override {
    TANDEM_TRY(ir::check_rows_write(view_, values.size(), ir::Storage::kF32, at));
    return upload(at, values.data(), values.size_bytes());
  }
  Status write(uint32_t at, std::span<const uint32_t> ids) override {
    TANDEM_TRY(ir::check_rows_write(view_, ids.size(), ir::Storage::kU32, at));
    return upload(at, ids.data(), ids.size_bytes());
  }

 private:
  unsigned char* row_at(uint32_t at) const {
    return memory_.as<unsigned char>() + size_t{at} * view_.width * ir::storage_bytes(view_.storage);
  }
  Status upload(uint32_t at, const void* host, size_t bytes) {
    if (bytes == 0) return {};
    TANDEM_TRY(device_.activate());
    // INVARIANT: the rows fit (check_rows_write); the host source lives until the copy is waited for.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(row_at(at), host, bytes, cudaMemcpyHostToDevice, device_.stream()));
    return device_.synchronize();
  }

  Device& device_;
  DeviceBuffer memory_;
  ir::DeviceRows view_;
};

}  // namespace

Result<std::unique_ptr<ir::RowBuffer>> make_row_buffer(Device& device, ir::Backend& owner, uint32_t rows,
                                                       uint32_t width, ir::Storage storage) {
  TANDEM_TRY(device.activate());
  const size_t bytes = size_t{rows} * width * ir::storage_bytes(storage);
  TANDEM_ASSIGN(DeviceBuffer memory,
                DeviceBuffer::make(bytes, fmt::format("a row buffer of {} rows of {} {}", rows, width,
                                                      ir::to_string(storage))));
  const ir::DeviceRows view{nullptr, rows, width, width, storage, &owner};
  return std::unique_ptr<ir::RowBuffer>(std::make_unique<CudaRowBuffer>(device, std::move(memory), view));
}

}  // namespace tandem::cuda

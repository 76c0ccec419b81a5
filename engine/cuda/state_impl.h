// The persistent caches of a decoder on the GPU (ir::State; dflash.md §1.7): per cache (a KV cache layer
// or a drafter context layer) one K and one V array of [slots][capacity][width] in the plan's element
// type, slot-contiguous so a sequence's keys are one strided read and a crop is just a shorter length.
// A slot's rows also come out and go back in as f32 (read_rows/write_rows: a drafter context handed over).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/types_impl.h"
#include "engine/ir/backend.h"
#include "kernels/args.cuh"

namespace tandem::cuda {

class CudaState final : public ir::State {
 public:
  // Allocates every cache of the graph, refusing with the bytes named when the device lacks them.
  static Result<std::unique_ptr<CudaState>> create(const Device& device, const ir::Graph& graph, uint32_t slots,
                                                   uint32_t capacity, Dt type);

  uint32_t slots() const override { return slots_; }
  uint32_t capacity() const override { return capacity_; }
  size_t bytes() const override;
  size_t bytes_per_position() const override;
  uint32_t row_width() const override;
  Status read_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<float> out) const override;
  Status write_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<const float> rows) override;

  Dt type() const { return type_; }
  const Device* device() const { return device_; }
  const std::vector<uint32_t>& widths() const { return widths_; }
  // The caches' device addresses in graph order, as the index buffer lists them.
  const std::vector<kernels::CacheTable>& table() const { return table_; }

 private:
  CudaState() = default;
  Status check_rows(uint32_t slot, uint32_t first, uint32_t count, size_t values) const;
  // The bytes of cache `c`'s K (or V) array that hold positions [first, first + count) of `slot`.
  size_t offset(size_t c, uint32_t slot, uint32_t first) const;
  const Device* device_ = nullptr;
  uint32_t slots_ = 0, capacity_ = 0;
  Dt type_ = Dt::kF32;
  std::vector<uint32_t> widths_;
  std::vector<DeviceBuffer> k_, v_;
  std::vector<kernels::CacheTable> table_;
};

}  // namespace tandem::cuda

// CudaState: allocation of a decoder's caches and their sizes.
#include "engine/cuda/state_impl.h"

#include <cuda_runtime_api.h>

#include "engine/cuda/check_impl.h"

namespace tandem::cuda {

Result<std::unique_ptr<CudaState>> CudaState::create(const Device& device, const ir::Graph& graph, uint32_t slots,
                                                     uint32_t capacity, Dt type) {
  TANDEM_TRY(device.activate());
  std::unique_ptr<CudaState> s(new CudaState());
  s->device_ = &device;
  s->slots_ = slots;
  s->capacity_ = capacity;
  s->type_ = type;
  size_t want = 0;
  for (const ir::CacheInfo& c : graph.caches) {
    s->widths_.push_back(c.width);
    want += size_t{2} * slots * capacity * c.width * dt_size(type);
  }
  size_t free = 0, total = 0;
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (want > free) {
    return Error::make(ErrorKind::kCapacity,
                       "caches of {} slots x {} positions need {} ({} per position of a slot) but {} has {} free",
                       slots, capacity, byte_string(want), byte_string(s->bytes_per_position()), device.info().describe(),
                       byte_string(free));
  }
  for (size_t c = 0; c < graph.caches.size(); ++c) {
    const size_t bytes = size_t{slots} * capacity * graph.caches[c].width * dt_size(type);
    TANDEM_ASSIGN(DeviceBuffer k, DeviceBuffer::make(bytes, "cache " + graph.caches[c].name + " (K)"));
    TANDEM_ASSIGN(DeviceBuffer v, DeviceBuffer::make(bytes, "cache " + graph.caches[c].name + " (V)"));
    s->table_.push_back({reinterpret_cast<unsigned long long>(k.data()), reinterpret_cast<unsigned long long>(v.data())});
    s->k_.push_back(std::move(k));
    s->v_.push_back(std::move(v));
  }
  return s;
}

size_t CudaState::bytes() const {
  size_t total = 0;
  for (size_t c = 0; c < k_.size(); ++c) total += k_[c].bytes() + v_[c].bytes();
  return total;
}

size_t CudaState::bytes_per_position() const {
  size_t total = 0;
  for (uint32_t w : widths_) total += size_t{2} * w * dt_size(type_);
  return total;
}

}  // namespace tandem::cuda

// CudaState: allocation of a decoder's caches, their sizes, and a slot's rows copied out and in as f32.
#include "engine/cuda/state_impl.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "engine/core/dtype.h"

#include "engine/cuda/check_impl.h"

namespace tandem::cuda {
namespace {

DType dtype_of(Dt t) { return t == Dt::kF16 ? DType::kF16 : (t == Dt::kBF16 ? DType::kBF16 : DType::kF32); }

// f32 values to `t`'s bytes; values widened from `t` narrow back to the same bits.
void narrow(Dt t, const float* src, size_t n, uint8_t* dst) {
  if (t != Dt::kF16 && t != Dt::kBF16) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = t == Dt::kF16 ? float_to_half(src[i]) : float_to_bf16(src[i]);
    std::memcpy(dst + i * 2, &h, 2);
  }
}

}  // namespace

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

uint32_t CudaState::row_width() const {
  uint32_t total = 0;
  for (uint32_t w : widths_) total += 2 * w;
  return total;
}

Status CudaState::check_rows(uint32_t slot, uint32_t first, uint32_t count, size_t values) const {
  if (slot >= slots_ || uint64_t{first} + count > capacity_ || values != size_t{count} * row_width()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "cuda state: rows {}..{} of slot {} as {} values (the state has {} slots x {} positions, {} "
                       "values a row)",
                       first, uint64_t{first} + count, slot, values, slots_, capacity_, row_width());
  }
  return ok_status();
}

size_t CudaState::offset(size_t c, uint32_t slot, uint32_t first) const {
  return (size_t{slot} * capacity_ + first) * widths_[c] * dt_size(type_);
}

Status CudaState::read_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<float> out) const {
  TANDEM_TRY(check_rows(slot, first, count, out.size()));
  if (count == 0) return ok_status();
  TANDEM_TRY(device_->activate());
  const size_t elem = dt_size(type_);
  // Per cache, its K then V positions as stored (one contiguous run each: [slots][capacity][width]).
  std::vector<std::vector<uint8_t>> raw;
  for (size_t c = 0; c < widths_.size(); ++c) {
    for (const DeviceBuffer* b : {&k_[c], &v_[c]}) {
      raw.emplace_back(size_t{count} * widths_[c] * elem);
      // INVARIANT: check_rows kept [first, first + count) inside the slot, so the run lies inside the
      // buffer; the stream orders the copy after every run that wrote the cache, and the sync below keeps
      // `raw` alive until it lands.
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(raw.back().data(), b->as<uint8_t>() + offset(c, slot, first),
                                        raw.back().size(), cudaMemcpyDeviceToHost, device_->stream()));
    }
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(device_->stream()));
  float* to = out.data();
  for (uint32_t p = 0; p < count; ++p) {
    for (size_t c = 0; c < widths_.size(); ++c) {
      for (size_t kv = 0; kv < 2; ++kv, to += widths_[c]) {
        convert_to_f32(dtype_of(type_), raw[2 * c + kv].data() + size_t{p} * widths_[c] * elem, widths_[c], to);
      }
    }
  }
  return ok_status();
}

Status CudaState::write_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<const float> rows) {
  TANDEM_TRY(check_rows(slot, first, count, rows.size()));
  if (count == 0) return ok_status();
  TANDEM_TRY(device_->activate());
  const size_t elem = dt_size(type_);
  std::vector<std::vector<uint8_t>> raw;
  for (size_t c = 0; c < widths_.size(); ++c) {
    for (size_t kv = 0; kv < 2; ++kv) raw.emplace_back(size_t{count} * widths_[c] * elem);
  }
  const float* from = rows.data();
  for (uint32_t p = 0; p < count; ++p) {
    for (size_t c = 0; c < widths_.size(); ++c) {
      for (size_t kv = 0; kv < 2; ++kv, from += widths_[c]) {
        narrow(type_, from, widths_[c], raw[2 * c + kv].data() + size_t{p} * widths_[c] * elem);
      }
    }
  }
  for (size_t c = 0; c < widths_.size(); ++c) {
    for (size_t kv = 0; kv < 2; ++kv) {
      const DeviceBuffer& b = kv == 0 ? k_[c] : v_[c];
      // INVARIANT: as read_rows: the run lies inside the buffer, the stream orders it before the next run
      // that reads the cache, and the sync below keeps `raw` alive until it has left.
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(b.as<uint8_t>() + offset(c, slot, first), raw[2 * c + kv].data(),
                                        raw[2 * c + kv].size(), cudaMemcpyHostToDevice, device_->stream()));
    }
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(device_->stream()));
  return ok_status();
}

}  // namespace tandem::cuda

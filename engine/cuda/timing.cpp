// Event timing and random device operands (timing_impl.h).
#include "engine/cuda/timing_impl.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/cuda/check_impl.h"

namespace tandem::cuda {

Events::~Events() {
  for (cudaEvent_t x : e) {
    if (x != nullptr) (void)cudaEventDestroy(x);
  }
}

Status Events::create(size_t count) {
  e.assign(count, nullptr);
  for (cudaEvent_t& x : e) TANDEM_CUDA_CHECK(cudaEventCreate(&x));
  return {};
}

Result<double> median_us(const Device& device, const std::function<Status()>& launch, int reps, int warm) {
  const cudaStream_t s = device.stream();
  for (int i = 0; i < warm; ++i) TANDEM_TRY(launch());
  Events ev;
  TANDEM_TRY(ev.create(static_cast<size_t>(std::max(1, reps)) + 1));
  TANDEM_CUDA_CHECK(cudaEventRecord(ev.e[0], s));
  for (size_t i = 1; i < ev.e.size(); ++i) {
    TANDEM_TRY(launch());
    TANDEM_CUDA_CHECK(cudaEventRecord(ev.e[i], s));
  }
  TANDEM_TRY(device.synchronize());
  std::vector<double> us;
  for (size_t i = 1; i < ev.e.size(); ++i) {
    float ms = 0.0f;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.e[i - 1], ev.e[i]));
    us.push_back(1e3 * ms);
  }
  std::nth_element(us.begin(), us.begin() + static_cast<long>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

std::vector<unsigned char> random_host_bytes(size_t count, Dt type, float scale, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<unsigned char> bytes(count * dt_size(type));
  for (size_t i = 0; i < count; ++i) {
    const float v = d(rng);
    if (type == Dt::kF32 || type == Dt::kU32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = type == Dt::kBF16 ? float_to_bf16(v) : float_to_half(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

Result<DeviceBuffer> random_device_buffer(const Device& device, size_t count, Dt type, float scale,
                                          std::mt19937& rng) {
  const std::vector<unsigned char> bytes = random_host_bytes(count, type, scale, rng);
  TANDEM_ASSIGN(DeviceBuffer b, DeviceBuffer::make(bytes.size(), "random operands"));
  // INVARIANT: the buffer holds exactly the host bytes; the copy is drained before they go away.
  if (!bytes.empty()) {
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(b.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, device.stream()));
  }
  TANDEM_TRY(device.synchronize());
  return b;
}

}  // namespace tandem::cuda

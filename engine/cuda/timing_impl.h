// Device-side timing and random operands, shared by the GEMM algorithm choice at lowering and the
// benchmark's studies: launches timed one by one between events on the device's stream.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <random>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/types_impl.h"

namespace tandem::cuda {

// Events for timing, destroyed on every path out.
struct Events {
  std::vector<cudaEvent_t> e;
  Events() = default;
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events();
  Status create(size_t count);  // count fresh events in e
};

// Median device time of one call of `launch` over `reps` back-to-back calls, after `warm` untimed ones.
Result<double> median_us(const Device& device, const std::function<Status()>& launch, int reps, int warm = 3);

// `count` normal values of standard deviation `scale`, as the host bytes of FP32 or FP16 elements.
std::vector<unsigned char> random_host_bytes(size_t count, Dt type, float scale, std::mt19937& rng);

// `count` normal values of standard deviation `scale` on the device, as FP32 or FP16.
Result<DeviceBuffer> random_device_buffer(const Device& device, size_t count, Dt type, float scale, std::mt19937& rng);

}  // namespace tandem::cuda

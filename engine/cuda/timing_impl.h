// Device-side timing and random operands, shared by the GEMM algorithm choice at lowering and the
// benchmark's studies: launches timed one by one between events on the device's stream.
#pragma once

#include <functional>
#include <random>

#include "engine/core/result.h"
#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/types_impl.h"

namespace tandem::cuda {

// Median device time of one call of `launch` over `reps` back-to-back calls, after `warm` untimed ones.
Result<double> median_us(const Device& device, const std::function<Status()>& launch, int reps, int warm = 3);

// `count` normal values of standard deviation `scale` on the device, as FP32 or FP16.
Result<DeviceBuffer> random_device_buffer(const Device& device, size_t count, Dt type, float scale, std::mt19937& rng);

}  // namespace tandem::cuda

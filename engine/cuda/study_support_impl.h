// What every kernel study (study.cpp, study_qgemm.cpp, study_split.cpp) sets up around the step it
// times: host vectors on the device and back, token-row locations on bare buffers, and a batch's index
// with the StepContext its steps are made with. Diagnostics, and the streaming GEMM's probes at lowering
// (gemm_stream_probe.cpp): no plan runs them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/result.h"
#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/steps_impl.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"

namespace tandem::cuda {

// `bytes` of host memory in a new device buffer (at least one byte), the copy finished.
Result<DeviceBuffer> upload_bytes(const Device& device, const void* host, size_t bytes, const char* what);
template <class T>
Result<DeviceBuffer> upload_vector(const Device& device, const std::vector<T>& host, const char* what) {
  return upload_bytes(device, host.data(), host.size() * sizeof(T), what);
}
// The first `bytes` of a device buffer on the host (counted as the device's device-to-host traffic).
Result<std::vector<unsigned char>> download_bytes(const Device& device, const DeviceBuffer& b, size_t bytes);

// A weight read once per launch, as a decode step reads each matrix: how many copies of `bytes` together exceed
// the L2 several times over (320 MB; at most 32), and `copies` buffers of `first`'s `bytes`, the first being
// `first` itself (the others device-to-device copies of it: the bits do not matter, the bytes do).
size_t rotation_copies(size_t bytes);
Result<std::vector<DeviceBuffer>> rotation(const Device& device, DeviceBuffer first, size_t bytes, size_t copies);
// `count` new buffers each holding a copy of `bytes` at `src` (device memory), the copies finished. With
// best_effort, as many as fit: the first allocation that fails ends the list instead of failing the call.
Result<std::vector<DeviceBuffer>> device_copies(const Device& device, const void* src, size_t bytes, size_t count,
                                                bool best_effort);

// Token rows of `width` elements of `type` at the start of `b`.
Loc token_loc(const DeviceBuffer& b, uint32_t width, Dt type, const char* name);

// A batch's index on the device and the context a step over its bucket is made with; `index` must outlive
// every step made from `ctx`.
struct StudyBatch {
  DeviceBuffer index;
  StepContext ctx;
};
Result<StudyBatch> study_batch(const Device& device, const ir::Batch& batch, const ir::Bucket& bucket);
// One sequence of `rows` tokens in a bucket of exactly that size.
Result<StudyBatch> one_sequence(const Device& device, uint32_t rows);

}  // namespace tandem::cuda

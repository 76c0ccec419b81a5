// The kernel studies' shared set-up (study_support_impl.h).
#include "engine/cuda/study_support_impl.h"

#include <algorithm>

#include "engine/cuda/check_impl.h"
#include "engine/cuda/index_impl.h"

namespace tandem::cuda {

Result<DeviceBuffer> upload_bytes(const Device& device, const void* host, size_t bytes, const char* what) {
  TANDEM_ASSIGN(DeviceBuffer b, DeviceBuffer::make(std::max<size_t>(1, bytes), what));
  if (bytes == 0) return b;
  // INVARIANT: the buffer holds `bytes`; the copy is drained before the caller's memory can go.
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(b.data(), host, bytes, cudaMemcpyHostToDevice, device.stream()));
  TANDEM_TRY(device.synchronize());
  return b;
}

Result<std::vector<unsigned char>> download_bytes(const Device& device, const DeviceBuffer& b, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  // INVARIANT: callers ask for at most the buffer's size; the copy is drained before `host` is returned.
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(host.data(), b.data(), bytes, cudaMemcpyDeviceToHost, device.stream()));
  device.count_d2h(bytes);
  TANDEM_TRY(device.synchronize());
  return host;
}

Loc token_loc(const DeviceBuffer& b, uint32_t width, Dt type, const char* name) {
  Loc l;
  l.ptr = b.data();
  l.rows = ir::Rows::kTokens;
  l.width = width;
  l.type = type;
  l.name = name;
  return l;
}

Result<StudyBatch> study_batch(const Device& device, const ir::Batch& batch, const ir::Bucket& bucket) {
  const IndexLayout layout = IndexLayout::for_bucket(bucket);
  std::vector<uint32_t> words(layout.words, 0);
  fill_index(layout, batch, words.data());
  StudyBatch out;
  TANDEM_ASSIGN(out.index, upload_vector(device, words, "a study index"));
  out.ctx.bucket = bucket;
  out.ctx.ix = index_pointers(layout, out.index.as<const unsigned>());
  out.ctx.tiles_max = layout.tiles_max;
  out.ctx.sms = static_cast<uint32_t>(std::max(1, device.info().sms));
  return out;
}

Result<StudyBatch> one_sequence(const Device& device, uint32_t rows) {
  ir::Batch batch;
  batch.add_sequence(std::vector<uint32_t>(rows, 1), {}, 0);
  return study_batch(device, batch, ir::Bucket{rows, 1, 1});
}

size_t rotation_copies(size_t bytes) {
  constexpr size_t kRotateBytes = size_t{320} << 20;  // > the H100's and H200's 50 MB L2, several times over
  constexpr size_t kMaxCopies = 32;
  return std::clamp<size_t>((kRotateBytes + bytes - 1) / std::max<size_t>(bytes, 1), 1, kMaxCopies);
}

Result<std::vector<DeviceBuffer>> rotation(const Device& device, DeviceBuffer first, size_t bytes, size_t copies) {
  TANDEM_ASSIGN(std::vector<DeviceBuffer> rest,
                device_copies(device, first.data(), bytes, copies > 0 ? copies - 1 : 0, false));
  std::vector<DeviceBuffer> out;
  out.push_back(std::move(first));
  for (DeviceBuffer& c : rest) out.push_back(std::move(c));
  return out;
}

Result<std::vector<DeviceBuffer>> device_copies(const Device& device, const void* src, size_t bytes, size_t count,
                                                bool best_effort) {
  std::vector<DeviceBuffer> out;
  for (size_t i = 0; i < count; ++i) {
    Result<DeviceBuffer> c = DeviceBuffer::make(bytes, "a weight copy");
    if (!c.ok()) {
      if (!best_effort) return std::move(c).error();
      (void)cudaGetLastError();  // the failed cudaMalloc's error must not surface at a later launch's check
      break;
    }
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(c->data(), src, bytes, cudaMemcpyDeviceToDevice, device.stream()));
    out.push_back(std::move(c).value());
  }
  TANDEM_TRY(device.synchronize());
  return out;
}

}  // namespace tandem::cuda

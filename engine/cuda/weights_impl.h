// Weights on the device (scorer.md §3): each WeightRef's checkpoint parts stacked along dim 0 and
// converted on the host (exactly, round to nearest even) from F32/F16/BF16. GEMM weights of FP16 and
// BF16 backends are 16-bit only (no FP32 copy stays on the device); norms, biases and tables stay FP32.
// A QGemm's codes and scales travel as their checkpoint bytes (`raw`), never converted.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/tensor.h"
#include "engine/cuda/buffer_impl.h"
#include "engine/cuda/device_impl.h"
#include "engine/ir/backend.h"

namespace tandem::cuda {

struct DeviceTensor {
  std::vector<uint64_t> shape;
  DeviceBuffer f32;   // empty unless some op reads the weight as FP32
  DeviceBuffer half;  // empty unless a 16-bit GEMM reads it: FP16 or BF16, as the backend's precision
  DeviceBuffer raw;   // empty unless a QGemm reads it: the parts' bytes as stored, of dtype raw_dtype
  DType raw_dtype = DType::kF32;
  bool raw_packed = false;  // raw holds a QGemm's codes in the tensor-core layout (qgemm_layout.h)
};

class CudaWeights final : public ir::Weights {
 public:
  size_t bytes() const override;  // every device buffer of every weight
  size_t packed_codes() const;    // the QGemm code tensors uploaded in the tensor-core layout
  // By WeightRef::name(); null when the graph's weight was not uploaded.
  const DeviceTensor* find(const std::string& name) const;
  ir::Precision precision() const { return precision_; }
  const Device* device() const { return device_; }

 private:
  friend Result<std::unique_ptr<CudaWeights>> upload_weights(const Device& device, const WeightSource& source,
                                                             std::span<const ir::Graph* const> graphs,
                                                             ir::Precision precision, bool pack_qgemm_codes);
  const Device* device_ = nullptr;
  ir::Precision precision_ = ir::Precision::kF32;
  std::map<std::string, DeviceTensor> tensors_;
};

// pack_qgemm_codes: a QGemm's codes go up in the tensor-core layout where its k allows (qgemm_layout.h).
Result<std::unique_ptr<CudaWeights>> upload_weights(const Device& device, const WeightSource& source,
                                                    std::span<const ir::Graph* const> graphs,
                                                    ir::Precision precision, bool pack_qgemm_codes = false);

}  // namespace tandem::cuda

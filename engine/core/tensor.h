// TensorView: a read-only view of one checkpoint tensor (dtype, shape, bytes), and WeightSource, where
// backends find tensors by name. engine/io implements WeightSource over (sharded) safetensors files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/result.h"

namespace tandem {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  const void* data = nullptr;  // dtype_size(dtype) · numel() bytes, any alignment
  uint64_t numel() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }
  std::vector<float> to_f32() const;
};

std::string shape_string(const std::vector<uint64_t>& shape);  // "[3, 1024]"

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The tensor, or a kNotFound error naming it.
  virtual Result<TensorView> tensor(std::string_view name) const = 0;
  virtual bool contains(std::string_view name) const = 0;
  virtual std::vector<std::string> names() const = 0;
};

}  // namespace tandem

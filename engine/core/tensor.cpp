// TensorView helpers.
#include "engine/core/tensor.h"

namespace tandem {

std::vector<float> TensorView::to_f32() const {
  std::vector<float> out(numel());
  convert_to_f32(dtype, data, out.size(), out.data());
  return out;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace tandem

// DType names and bulk conversion to f32.
#include "engine/core/dtype.h"

namespace tandem {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
  }
  return "?";
}

void convert_to_f32(DType dtype, const void* src, size_t n, float* dst) {
  if (n == 0) return;  // empty tensors may have null pointers, which memcpy must not see
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = half_to_float(h);
      }
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = bf16_to_float(h);
      }
      return;
    case DType::kI8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<int8_t>(bytes[i]));
      return;
    case DType::kU8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(bytes[i]);
      return;
  }
}

}  // namespace tandem

// The CPU quantized GEMM (ir::QGemm, docs/quantization.md): group-wise int8/int4 codes and their scales
// kept as uploaded, dequantized inside the loop; there is never a float copy of the matrix.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {

// A view of one uploaded quantized matrix (the codes and scales weights of a QGemm).
struct QuantMatrix {
  uint32_t n = 0;      // output columns (rows of W)
  uint32_t k = 0;      // inner dimension
  uint32_t bits = 8;   // 8: one int8 code per element; 4: two codes per byte, low nibble first, stored q + 8
  uint32_t group = 0;  // elements of a row sharing one scale
  const uint8_t* codes = nullptr;  // n rows of k · bits / 8 bytes
  const float* scales = nullptr;   // [n, k / group], exact f32 of the stored F16/BF16 scales
  size_t row_bytes() const { return size_t{k} * bits / 8; }
  // The code of W[r, c] as a signed integer (tests and references).
  int32_t code(uint32_t r, uint32_t c) const;
};

// out = epilogue(a · Wᵀ + b): a is [rows, w.k], out [rows, w.n], bias (w.n floats) may be null; a must not
// alias out. Each output sums, per group in ascending order, s[j, g] · Σ_{c in g} a[c] · q[j, c] in f32,
// so the result is the same for every row count and thread split.
void qgemm(const Exec& ex, Mat a, const QuantMatrix& w, const float* bias, ir::Epilogue epilogue, Mat out);

}  // namespace tandem::cpu

// The CPU GEMM: out = epilogue(a · wᵀ + b) with w packed once at upload into panels of 16 output columns.
// Every output element is one f32 accumulator summed over k in ascending order, whatever the row count,
// tile, thread or SIMD level, so a row's result depends on that row alone (scorer.md §5, determinism).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {

inline constexpr uint32_t kPanel = 16;  // output columns per packed panel

struct PackedMatrix {
  uint32_t n = 0;  // output columns (rows of w)
  uint32_t k = 0;  // inner dimension
  // Panel p holds columns [16p, 16p + 16) as data[(p·k + kk)·16 + j] = w[16p + j][kk], zero past n.
  std::vector<float> data;

  static PackedMatrix pack(const float* w, uint32_t n, uint32_t k);
  uint32_t panels() const { return (n + kPanel - 1) / kPanel; }
  size_t bytes() const { return data.size() * sizeof(float); }
};

// a is [rows, w.k], out is [rows, n] for n = out.width <= w.n: w's first n columns (all of them but for a
// Gemm of w's first rows); bias (n floats) may be null. a must not alias out.
void gemm(const Exec& ex, Mat a, const PackedMatrix& w, const float* bias, ir::Epilogue epilogue, Mat out);

}  // namespace tandem::cpu

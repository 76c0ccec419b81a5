// The CPU quantized GEMM (qgemm_impl.h): per output column its codes are decoded to small integers in a
// k-long row buffer (a row, never the matrix), then every row of a is dotted with it group by group.
#include "engine/cpu/qgemm_impl.h"

#include <algorithm>
#include <vector>

namespace tandem::cpu {

int32_t QuantMatrix::code(uint32_t r, uint32_t c) const {
  const uint8_t* row = codes + size_t{r} * row_bytes();
  if (bits == 8) return static_cast<int8_t>(row[c]);
  const uint8_t byte = row[c / 2];
  return static_cast<int32_t>(c % 2 == 0 ? byte & 0x0fu : byte >> 4) - 8;
}

namespace {

constexpr size_t kColumnsPerTask = 8;

// Row r of W's codes as floats (exact: |q| <= 128).
void decode_row(const QuantMatrix& w, uint32_t r, float* out) {
  const uint8_t* row = w.codes + size_t{r} * w.row_bytes();
  if (w.bits == 8) {
    for (uint32_t c = 0; c < w.k; ++c) out[c] = static_cast<float>(static_cast<int8_t>(row[c]));
    return;
  }
  for (uint32_t j = 0; j < w.k / 2; ++j) {
    out[2 * j] = static_cast<float>(static_cast<int32_t>(row[j] & 0x0fu) - 8);
    out[2 * j + 1] = static_cast<float>(static_cast<int32_t>(row[j] >> 4) - 8);
  }
}

void store(ir::Epilogue epilogue, float sum, float& out) {
  switch (epilogue) {
    case ir::Epilogue::kNone: out = sum; return;
    case ir::Epilogue::kGelu: out = gelu(sum); return;
    case ir::Epilogue::kRelu: out = std::max(0.0f, sum); return;
    case ir::Epilogue::kAccumulate: out += sum; return;
  }
}

}  // namespace

void qgemm(const Exec& ex, Mat a, const QuantMatrix& w, const float* bias, ir::Epilogue epilogue, Mat out) {
  if (out.rows == 0) return;
  const size_t tasks = (size_t{w.n} + kColumnsPerTask - 1) / kColumnsPerTask;
  const uint32_t groups = w.k / w.group;
  ex.pool.parallel_for(tasks, 1, [&](size_t begin, size_t end) {
    std::vector<float> q(w.k);
    for (size_t t = begin; t < end; ++t) {
      const uint32_t j1 = static_cast<uint32_t>(std::min<size_t>(w.n, (t + 1) * kColumnsPerTask));
      for (uint32_t j = static_cast<uint32_t>(t * kColumnsPerTask); j < j1; ++j) {
        decode_row(w, j, q.data());
        const float* s = w.scales + size_t{j} * groups;
        for (uint32_t m = 0; m < out.rows; ++m) {
          const float* x = a.row(m);
          float acc = 0.0f;
          for (uint32_t g = 0; g < groups; ++g) {
            float part = 0.0f;
            for (uint32_t c = g * w.group; c < (g + 1) * w.group; ++c) part += x[c] * q[c];
            acc += s[g] * part;
          }
          if (bias != nullptr) acc += bias[j];
          store(epilogue, acc, out.row(m)[j]);
        }
      }
    }
  });
}

}  // namespace tandem::cpu

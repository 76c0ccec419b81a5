// Row-wise ops (graph.h): Embed, Rope, GeGlu, SwiGlu, AddType, Input, Tap and DFlash 2's DynConv
// (dflash.md §3.2). Each output row depends on its own row (DynConv: on earlier rows of its sequence).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {
namespace {

constexpr size_t kGrain = 16;

// The sequence holding row r: the last s with cu[s] <= r (empty sequences hold no row).
uint32_t seq_of_row(const ir::Batch& batch, size_t r) {
  const auto it = std::upper_bound(batch.cu.begin(), batch.cu.end(), r);
  return static_cast<uint32_t>(it - batch.cu.begin() - 1);
}

}  // namespace

void embed(const Exec& ex, std::span<const uint32_t> ids, const float* table, Mat out) {
  const size_t w = out.width;
  for_rows(ex, out.rows, kGrain, [&](size_t r) {
    std::memcpy(out.row(r), table + size_t{ids[r]} * w, w * sizeof(float));
  });
}

void rope(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t col, uint32_t heads, uint32_t head_dim,
          const float* inv_freq) {
  const size_t half = head_dim / 2;
  for_rows(ex, x.rows, kGrain, [&](size_t r) {
    const uint32_t s = seq_of_row(batch, r);
    const uint32_t pos = batch.seq_start(s) + static_cast<uint32_t>(r - batch.cu[s]);
    float* row = x.row(r) + col;
    for (size_t i = 0; i < half; ++i) {
      // The angle is an f32 product (as HF forms it); cos and sin are taken in f64 and rounded once.
      const double angle = static_cast<float>(pos) * inv_freq[i];
      const float c = static_cast<float>(std::cos(angle));
      const float sn = static_cast<float>(std::sin(angle));
      for (size_t h = 0; h < heads; ++h) {
        float* xh = row + h * head_dim;
        const float a = xh[i];
        const float b = xh[i + half];
        xh[i] = a * c - b * sn;
        xh[i + half] = b * c + a * sn;
      }
    }
  });
}

void geglu(const Exec& ex, Mat x, Mat out) {
  const size_t n = out.width;
  for_rows(ex, x.rows, kGrain, [&](size_t r) {
    const float* xr = x.row(r);
    float* o = out.row(r);
    for (size_t i = 0; i < n; ++i) o[i] = gelu(xr[i]) * xr[n + i];
  });
}

void swiglu(const Exec& ex, Mat x, Mat out) {
  const size_t n = out.width;
  for_rows(ex, x.rows, kGrain, [&](size_t r) {
    const float* xr = x.row(r);
    float* o = out.row(r);
    for (size_t i = 0; i < n; ++i) o[i] = silu(xr[i]) * xr[n + i];
  });
}

void add_type(const ir::Batch& batch, Mat h, const float* table) {
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    const float* t = table + size_t{batch.qtype[s]} * h.width;
    for (size_t r = batch.cu[s]; r < batch.cu[s + 1]; ++r) {
      float* hr = h.row(r);
      for (size_t i = 0; i < h.width; ++i) hr[i] += t[i];
    }
  }
}

void input(std::span<const float> features, Mat out) {
  if (features.empty()) return;  // no rows (memcpy may not take the null pointer of an empty vector)
  std::memcpy(out.data, features.data(), size_t{out.rows} * out.width * sizeof(float));
}

void tap(Mat x, Mat out, uint32_t col) {
  for (size_t r = 0; r < x.rows; ++r) std::memcpy(out.row(r) + col, x.row(r), size_t{x.width} * sizeof(float));
}

void dyn_conv(const ir::Batch& batch, Mat x, Mat d, const float* base, uint32_t stage, uint32_t taps,
              uint32_t group, ir::Epilogue epilogue, Mat out) {
  const size_t w = x.width;
  const size_t groups = w / group;
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    const size_t r0 = batch.cu[s];
    for (size_t t = 0; t < batch.seq_len(s); ++t) {
      const float* dr = d.row(r0 + t);
      float* o = out.row(r0 + t);
      for (size_t c = 0; c < w; ++c) {
        float y = 0.0f;
        // Taps reaching before the sequence's first row read zero: the block never looks past itself.
        for (size_t tau = 0; tau < taps && tau <= t; ++tau) {
          const size_t k = size_t{stage} * taps + tau;
          const float coef = base[k * w + c] + dr[k * groups + c / group];
          y += coef * x.row(r0 + t - tau)[c];
        }
        switch (epilogue) {
          case ir::Epilogue::kAccumulate: o[c] += y; break;
          case ir::Epilogue::kNone:
          case ir::Epilogue::kGelu:
          case ir::Epilogue::kRelu: o[c] = y; break;
        }
      }
    }
  }
}

}  // namespace tandem::cpu

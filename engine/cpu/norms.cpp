// LayerNorm, RMSNorm and per-head RMSNorm (graph.h). Statistics are summed in f64 in index order, so
// each row's result depends on that row alone.
#include <cmath>

#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {
namespace {

constexpr size_t kGrain = 8;

// 1 / sqrt(mean(x²) + eps), in f64.
double rms_scale(const float* x, size_t n, float eps) {
  double sq = 0.0;
  for (size_t i = 0; i < n; ++i) sq += double{x[i]} * double{x[i]};
  return 1.0 / std::sqrt(sq / static_cast<double>(n) + double{eps});
}

// y = w · (x · scale) as HF's Qwen3RMSNorm orders it: normalize, round to f32, then scale by the weight.
void rms_apply(const float* x, size_t n, const float* w, double scale, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = w[i] * static_cast<float>(double{x[i]} * scale);
}

}  // namespace

void layer_norm(const Exec& ex, Mat x, const float* w, const float* b, float eps, Mat out) {
  const size_t n = x.width;
  for_rows(ex, x.rows, kGrain, [&](size_t r) {
    const float* xr = x.row(r);
    float* yr = out.row(r);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(n);
    double var = 0.0;
    for (size_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(n) + double{eps});
    for (size_t i = 0; i < n; ++i) {
      const double y = (xr[i] - mean) * rstd * w[i];
      yr[i] = static_cast<float>(b == nullptr ? y : y + b[i]);
    }
  });
}

void rms_norm(const Exec& ex, Mat x, const float* w, float eps, Mat out) {
  for_rows(ex, x.rows, kGrain, [&](size_t r) {
    rms_apply(x.row(r), x.width, w, rms_scale(x.row(r), x.width, eps), out.row(r));
  });
}

void head_rms_norm(const Exec& ex, Mat x, const float* w, uint32_t heads, uint32_t head_dim, float eps) {
  for_rows(ex, x.rows, kGrain, [&](size_t r) {
    for (uint32_t h = 0; h < heads; ++h) {
      float* xh = x.row(r) + size_t{h} * head_dim;
      rms_apply(xh, head_dim, w, rms_scale(xh, head_dim, eps), xh);
    }
  });
}

}  // namespace tandem::cpu

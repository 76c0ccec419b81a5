// The inner loops shared by packed attention and cache attention: keys transposed so that scores
// vectorize across keys, values made contiguous, and a few queries per pass sharing every load. Each
// output sums over head dims, then keys, in ascending order, so it depends only on its own query, keys
// and values (never on the batch around it or on the queries it was blocked with).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "engine/cpu/simd_impl.h"

namespace tandem::cpu {

// head_dim^-0.5, correctly rounded.
inline float attention_scale(size_t head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// Key columns per transposed row: `count` rounded up past one full score block of the widest SIMD
// level, so score blocks never need a scalar tail. Scores of the zero padding are never used.
inline size_t padded_keys(size_t count) { return (count + 2 * 64 - 1) / 64 * 64; }

// kt[d · padded_keys(count) + j] = key row j's element d, for `count` rows at k + j · stride; zero past
// `count`.
[[gnu::always_inline]] inline void transpose_keys(const float* __restrict k, size_t stride, size_t count,
                                                  size_t head_dim, float* __restrict kt) {
  const size_t ld = padded_keys(count);
  for (size_t d = 0; d < head_dim; ++d) std::fill(kt + d * ld + count, kt + (d + 1) * ld, 0.0f);
  for (size_t j = 0; j < count; ++j) {
    const float* row = k + j * stride;
    for (size_t d = 0; d < head_dim; ++d) kt[d * ld + j] = row[d];
  }
}

// rows[j · head_dim + d] = row j's element d, for `count` rows at x + j · stride: V made contiguous.
[[gnu::always_inline]] inline void gather_rows(const float* __restrict x, size_t stride, size_t count,
                                               size_t head_dim, float* __restrict rows) {
  for (size_t j = 0; j < count; ++j) std::memcpy(rows + j * head_dim, x + j * stride, head_dim * sizeof(float));
}

// Queries attended together: they share every load of K and V. Query i reads keys [j0[i], j1[i]).
template <int L>
struct QueryBlock {
  static constexpr size_t kMax = L == 16 ? 4 : 2;  // what the SIMD level's registers hold
  size_t n = 0;
  const float* q[kMax];
  float* out[kMax];
  size_t j0[kMax];
  size_t j1[kMax];
  void add(const float* query, float* output, size_t lo, size_t hi) {
    q[n] = query;
    out[n] = output;
    j0[n] = lo;
    j1[n] = std::max(lo, hi);
    ++n;
  }
};

// out_i = softmax(scale · q_i · K[j0_i, j1_i)ᵀ) · V[j0_i, j1_i) for each query of the block, with K
// transposed (kt from transpose_keys) and V contiguous (vc, head_dim per key); s is scratch for
// kMax × padded_keys(count) scores. Each output sums over dims, then keys, in ascending order exactly
// as a lone query would: blocking only shares loads. An empty key range gives 0.
template <int L>
[[gnu::always_inline]] inline void attend(QueryBlock<L>& b, const float* __restrict kt, size_t count,
                                          const float* __restrict vc, size_t head_dim, float scale,
                                          float* __restrict s) {
  using V = typename FloatVec<L>::Type;
  constexpr size_t kQ = QueryBlock<L>::kMax;
  constexpr size_t kBlock = 4 * L;
  const size_t real = b.n;
  for (size_t i = real; i < kQ; ++i) b.add(b.q[0], nullptr, 0, 0);  // idle slots compute nothing
  size_t lo = count, hi = 0;
  for (size_t i = 0; i < kQ; ++i) {
    if (b.j0[i] < b.j1[i]) {
      lo = std::min(lo, b.j0[i]);
      hi = std::max(hi, b.j1[i]);
    }
  }
  // Scores over the block's key range, in whole blocks (the padding makes the last one safe to read);
  // a query ignores the scores outside its own range.
  const size_t ld = padded_keys(count);
  size_t j = lo;
  for (; j < hi; j += kBlock) {
    V acc[kQ][4] = {};
    for (size_t d = 0; d < head_dim; ++d) {
      V k[4];
      std::memcpy(k, kt + d * ld + j, sizeof(k));
      for (size_t i = 0; i < kQ; ++i) {
        const float qd = b.q[i][d];
        for (size_t u = 0; u < 4; ++u) acc[i][u] += qd * k[u];
      }
    }
    for (size_t i = 0; i < kQ; ++i) std::memcpy(s + i * ld + j, acc[i], sizeof(acc[i]));
  }
  for (size_t i = 0; i < kQ; ++i) {
    float* si = s + i * ld;
    float top = -std::numeric_limits<float>::infinity();
    for (j = b.j0[i]; j < b.j1[i]; ++j) {
      si[j] *= scale;
      top = std::max(top, si[j]);
    }
    double sum = 0.0;
    for (j = b.j0[i]; j < b.j1[i]; ++j) {
      si[j] = std::exp(si[j] - top);
      sum += si[j];
    }
    const double inv = 1.0 / sum;
    for (j = b.j0[i]; j < b.j1[i]; ++j) si[j] = static_cast<float>(si[j] * inv);
  }
  size_t d = 0;
  for (; d + kBlock <= head_dim; d += kBlock) {
    V acc[kQ][4] = {};
    for (j = lo; j < hi; ++j) {
      V x[4];
      std::memcpy(x, vc + j * head_dim + d, sizeof(x));
      for (size_t i = 0; i < kQ; ++i) {
        if (j < b.j0[i] || j >= b.j1[i]) continue;
        const float p = s[i * ld + j];
        for (size_t u = 0; u < 4; ++u) acc[i][u] += p * x[u];
      }
    }
    for (size_t i = 0; i < real; ++i) std::memcpy(b.out[i] + d, acc[i], sizeof(acc[i]));
  }
  for (; d < head_dim; ++d) {
    for (size_t i = 0; i < real; ++i) {
      float acc = 0.0f;
      for (j = b.j0[i]; j < b.j1[i]; ++j) acc += s[i * ld + j] * vc[j * head_dim + d];
      b.out[i][d] = acc;
    }
  }
  b.n = 0;
}

}  // namespace tandem::cpu

// The CPU backend's ops, by family (norms.cpp, attention.cpp, cache_attention.cpp, elementwise.cpp,
// choice.cpp, scorer_ops.cpp; GEMM is gemm_impl.h). Semantics are graph.h's. Ops touch the batch's real rows only and
// index without checks: ir::validate checked the graph, ir::check and CpuBackend::run the batch.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/core/thread_pool.h"
#include "engine/cpu/simd_impl.h"
#include "engine/ir/batch.h"
#include "engine/ir/graph.h"

namespace tandem::cpu {

// A value's real rows in the arena, row-major; contiguous unless it is a column range of a wider value
// (columns(): then ld is the wider row, and only row() may be used to reach the elements).
struct Mat {
  float* data = nullptr;
  uint32_t rows = 0;
  uint32_t width = 0;
  uint32_t ld = 0;  // row stride in floats; 0: width
  float* row(size_t r) const { return data + r * (ld != 0 ? ld : width); }
};

// Columns [col, col + width) of every row of m (a fused [q | k | v] row's q, k or v).
inline Mat columns(Mat m, uint32_t col, uint32_t width) {
  return Mat{m.data + col, m.rows, width, m.ld != 0 ? m.ld : m.width};
}

// What every op may use to run: the backend's pool and SIMD level.
struct Exec {
  ThreadPool& pool;
  Isa isa;
};

// One persistent cache: K and V of `width` floats per position, `capacity` positions per slot.
struct CacheView {
  float* k = nullptr;
  float* v = nullptr;
  uint32_t capacity = 0;
  uint32_t width = 0;
  size_t offset(uint32_t slot, uint32_t pos) const { return (size_t{slot} * capacity + pos) * width; }
};

// fn(r) for every r < rows, spread over the pool in chunks of at least `grain` rows.
template <typename F>
void for_rows(const Exec& ex, size_t rows, size_t grain, const F& fn) {
  ex.pool.parallel_for(rows, grain, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) fn(r);
  });
}

// Exact erf GELU, 0.5·x·(1 + erf(x/√2)).
inline float gelu(float x) { return x * 0.5f * (1.0f + std::erf(x * 0.70710678118654752440f)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// ---- norms.cpp ----
void layer_norm(const Exec& ex, Mat x, const float* w, const float* b, float eps, Mat out);
void rms_norm(const Exec& ex, Mat x, const float* w, float eps, Mat out);
void head_rms_norm(const Exec& ex, Mat x, const float* w, uint32_t heads, uint32_t head_dim, float eps);

// ---- attention.cpp: packed varlen self-attention over fused [q | k | v] rows ----
void attention(const Exec& ex, const ir::Batch& batch, Mat qkv, uint32_t heads, uint32_t head_dim,
               std::optional<uint32_t> window, Mat out);

// ---- cache_attention.cpp ----
void cache_append(const ir::Batch& batch, Mat k, Mat v, const CacheView& cache);
void cache_attention(const Exec& ex, const ir::Batch& batch, Mat q, const CacheView& cache, uint32_t q_heads,
                     uint32_t kv_heads, uint32_t head_dim, bool causal, std::optional<uint32_t> window, Mat out);

// ---- elementwise.cpp ----
void embed(const Exec& ex, std::span<const uint32_t> ids, const float* table, Mat out);
void rope(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t col, uint32_t heads, uint32_t head_dim,
          const float* inv_freq);
void geglu(const Exec& ex, Mat x, Mat out);
void swiglu(const Exec& ex, Mat x, Mat out);
void add_type(const ir::Batch& batch, Mat h, const float* table);
void input(std::span<const float> features, Mat out);
void tap(Mat x, Mat out, uint32_t col);
void dyn_conv(const ir::Batch& batch, Mat x, Mat d, const float* base, uint32_t stage, uint32_t taps,
              uint32_t group, ir::Epilogue epilogue, Mat out);

// ---- choice.cpp: picked rows and token choice ----
void pick_rows(const ir::Batch& batch, Mat h, Mat out);
void argmax(const Exec& ex, Mat x, uint32_t columns, Mat out);
void top_k(const Exec& ex, Mat x, uint32_t columns, uint32_t k, Mat ids, Mat values);
void sample(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t columns, ir::Stream stream, Mat out);
// The proposals' rows are host addresses (this backend's outputs; CpuBackend::check_run).
void reject_sample(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t columns, Mat ids);
void selector_walk(const Exec& ex, const ir::Batch& batch, Mat cand, Mat values, Mat sel, const float* pred,
                   const float* succ, float softcap, float multiplier, Mat ids, Mat q);

// ---- scorer_ops.cpp ----
void act_features(const ir::Batch& batch, Mat h, Mat logits, Mat out);

}  // namespace tandem::cpu

// Random GEMM operands for the decoder GEMM kernels' tests (gemm_decode_test, gemm_stream_test): a case, its
// operands as the device holds them, the float64 reference, a one-sequence batch of m rows, and the tiny
// target whose plans the routing tests lower.
#pragma once

#include <cmath>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/plan_impl.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::cuda::test {

struct GemmCase {
  uint32_t m, k, n;
  Dt ab, out;
  bool accumulate, bias;
};

inline std::string describe(const GemmCase& c) {
  return fmt::format("m {} k {} n {} {}->{}{}{}", c.m, c.k, c.n, dt_name(c.ab), dt_name(c.out),
                     c.accumulate ? " accumulate" : "", c.bias ? " bias" : "");
}

// A device batch of one sequence of `rows` token rows in a bucket of `bucket_rows` (>= rows).
inline std::unique_ptr<DeviceBatch> rows_batch(uint32_t rows, uint32_t bucket_rows) {
  std::mt19937 rng(rows);
  return device_batch(make_batch({rows}, {0}, 16, rng), ir::Bucket{bucket_rows, 1, bucket_rows});
}

struct GemmOperandsHost {
  std::vector<float> a, w, c, bias;  // as the device holds them (16-bit values already rounded)
  DeviceBuffer ad, wd, bd;
};

inline GemmOperandsHost make_operands(const GemmCase& c, std::mt19937& rng) {
  GemmOperandsHost o;
  o.a = rounded_to(random_floats(size_t{c.m} * c.k, rng), c.ab);
  o.w = rounded_to(random_floats(size_t{c.n} * c.k, rng, 1.0f / std::sqrt(static_cast<float>(c.k))), c.ab);
  o.c = rounded_to(random_floats(size_t{c.m} * c.n, rng), c.out);
  o.bias = random_floats(c.n, rng);
  o.ad = typed_buffer(o.a, c.ab);
  o.wd = typed_buffer(o.w, c.ab);
  o.bd = to_device(o.bias);
  return o;
}

// a · wᵀ (+ bias) (+ the prior output) in float64, [m, n].
inline std::vector<double> float64_gemm(const GemmCase& c, const GemmOperandsHost& o) {
  std::vector<double> want(size_t{c.m} * c.n);
  for (uint32_t r = 0; r < c.m; ++r) {
    for (uint32_t j = 0; j < c.n; ++j) {
      double s = 0.0;
      for (uint32_t i = 0; i < c.k; ++i) s += double{o.a[size_t{r} * c.k + i]} * o.w[size_t{j} * c.k + i];
      if (c.bias) s += o.bias[j];
      if (c.accumulate) s += o.c[size_t{r} * c.n + j];
      want[size_t{r} * c.n + j] = s;
    }
  }
  return want;
}

// Runs `step` (made for rows [first, first + rows) of the operands in a bucket of bucket_rows) and returns
// the output buffer: those rows' prior values (accumulate) or the sentinel, padding rows the sentinel.
template <class MakeStep>
std::vector<float> run_gemm_rows(const GemmCase& c, const GemmOperandsHost& o, uint32_t first, uint32_t rows,
                                 uint32_t bucket_rows, MakeStep&& make_step) {
  std::vector<float> a(o.a.begin() + size_t{first} * c.k, o.a.begin() + size_t{first + rows} * c.k);
  a.resize(size_t{bucket_rows} * c.k, kSentinel);
  std::vector<float> prior(size_t{bucket_rows} * c.n, kSentinel);
  if (c.accumulate) std::copy(o.c.begin() + size_t{first} * c.n, o.c.begin() + size_t{first + rows} * c.n, prior.begin());
  DeviceBuffer ad = typed_buffer(a, c.ab), od = typed_buffer(prior, c.out);
  const auto batch = rows_batch(rows, bucket_rows);
  run_step(make_step(batch->ctx, make_loc(ad, ir::Rows::kTokens, c.k, c.ab, "a"),
                     make_loc(od, ir::Rows::kTokens, c.n, c.out, "out")));
  return read_floats(od, size_t{bucket_rows} * c.n, c.out);
}

// A two-layer Qwen3 target (hidden 64, head_dim 32: the CUDA cache attention's smallest) and its graph, whose
// GEMMs are qkv (fused), o, gate_up and down per layer and the LM head.
struct RoutingTarget {
  testing::TinyTarget t;
  ir::Graph graph;
  size_t gemm_ops = 0;
};
inline RoutingTarget routing_target() {
  testing::TargetShape shape;
  shape.hidden = 64;
  shape.layers = 2;
  shape.head_dim = 32;
  shape.ffn = 96;
  RoutingTarget r{testing::random_target(shape, 3), {}, 0};
  auto graph = models::qwen3::build_target_graph(r.t.cfg, {});
  EXPECT_TRUE(graph.ok()) << graph.error().message();
  if (!graph.ok()) return r;
  r.graph = std::move(graph).value();
  for (const ir::Op& op : r.graph.ops) r.gemm_ops += std::holds_alternative<ir::Gemm>(op) ? 1 : 0;
  EXPECT_EQ(r.gemm_ops, 4 * r.t.cfg.num_hidden_layers + 1);
  return r;
}

// The plan's kernel steps that launch one of `ids`.
inline size_t count_steps(const CudaPlan& plan, std::initializer_list<KernelId> ids) {
  size_t count = 0;
  for (const Step& s : plan.steps()) {
    const auto* k = std::get_if<KernelStep>(&s);
    if (k == nullptr) continue;
    for (KernelId id : ids) count += k->id == id ? 1 : 0;
  }
  return count;
}

}  // namespace tandem::cuda::test

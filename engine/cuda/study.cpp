// The benchmark's kernel studies (study_impl.h): random operands on the device, launches timed one by
// one between events on the device's stream (timing_impl.h), medians.
#include "engine/cuda/study_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/core/dtype.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/steps_impl.h"
#include "engine/cuda/study_support_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {
namespace {

}  // namespace

Result<std::vector<AttentionStudy>> study_attention(const Device& device, const KernelModules& modules,
                                                    const AttentionShape& shape, int reps) {
  TANDEM_TRY(device.activate());
  std::mt19937 rng(17);
  TANDEM_ASSIGN(StudyBatch sb, study_batch(device, shape.batch, shape.bucket));
  StepContext& ctx = sb.ctx;
  const uint32_t width = shape.heads * 64, positions = std::max(1u, shape.bucket.tokens);
  TANDEM_ASSIGN(DeviceBuffer qkv,
                random_device_buffer(device, size_t{shape.bucket.tokens} * 3 * width, Dt::kF32, 1.0f, rng));
  DeviceBuffer rope_buffer;
  RopeTable rope;
  if (shape.theta > 0.0f) {
    TANDEM_ASSIGN(rope_buffer, upload_vector(device, rope_table(shape.theta, 32, positions), "a study RoPE table"));
    rope = RopeTable{rope_buffer.as<float>(), rope_buffer.as<float>() + size_t{positions} * 32};
  }
  ir::Attention op{{}, shape.heads, 64, std::nullopt, {}};
  if (shape.window >= 0) op.window = static_cast<uint32_t>(shape.window);

  std::vector<AttentionStudy> out;
  std::vector<uint16_t> reference;
  const size_t n = size_t{shape.batch.tokens()} * width;  // the real rows' outputs
  for (CudaAttention kernel : {CudaAttention::kSimt, CudaAttention::kTc, CudaAttention::kTc2Split, CudaAttention::kTc2}) {
    if (is_tc2(kernel) && !modules.launchable(KernelId::attention_tc2_f32_f16)) continue;
    ctx.attention = kernel;
    TANDEM_ASSIGN(DeviceBuffer o, DeviceBuffer::make(size_t{shape.bucket.tokens} * width * 2, "a study output"));
    TANDEM_ASSIGN(KernelStep step, attention_step(ctx, token_loc(qkv, 3 * width, Dt::kF32, "qkv"),
                                                  token_loc(o, width, Dt::kF16, "out"), op,
                                                  shape.theta > 0.0f ? &rope : nullptr));
    step.label = std::string("attention ") + to_string(kernel);
    AttentionStudy st;
    st.kernel = kernel;
    TANDEM_ASSIGN(st.median_us, median_us(device, [&] { return launch(modules, step, device.stream()); }, reps));
    std::vector<uint16_t> got(n);
    if (n > 0) {
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(got.data(), o.data(), n * 2, cudaMemcpyDeviceToHost, device.stream()));
      device.count_d2h(n * 2);
    }
    TANDEM_TRY(device.synchronize());
    if (kernel == CudaAttention::kSimt) reference = got;
    for (size_t i = 0; i < n; ++i) {
      const double r = half_to_float(reference[i]), g = half_to_float(got[i]);
      st.max_abs_ref = std::max(st.max_abs_ref, std::fabs(r));
      const double d = std::fabs(g - r);
      st.max_abs_diff = std::isnan(d) ? INFINITY : std::max(st.max_abs_diff, d);
    }
    out.push_back(st);
  }
  return out;
}

Result<std::vector<GemmCandidate>> study_gemm(const Device& device, GemmAlgos& algos, const GemmShape& shape,
                                              uint32_t m, int reps) {
  TANDEM_TRY(device.activate());
  std::mt19937 rng(23);
  TANDEM_ASSIGN(DeviceBuffer w, random_device_buffer(device, size_t{shape.n} * shape.k, shape.ab,
                                              1.0f / std::sqrt(static_cast<float>(shape.k)), rng));
  TANDEM_ASSIGN(DeviceBuffer a, random_device_buffer(device, size_t{m} * shape.k, shape.ab, 1.0f, rng));
  TANDEM_ASSIGN(DeviceBuffer c, random_device_buffer(device, size_t{m} * shape.n, shape.out, 1.0f, rng));
  TANDEM_ASSIGN(DeviceBuffer bias, random_device_buffer(device, shape.n, Dt::kF32, 0.1f, rng));
  const GemmOperands ops{w.data(), a.data(), c.data(), bias.as<const float>()};
  TANDEM_ASSIGN(const Gemm made, Gemm::make(device, algos, shape, m, ops));
  TANDEM_ASSIGN(const auto* ranking, algos.ranked(shape, m, ops.bias, kSearchCandidates));
  std::vector<std::pair<int, cublasLtMatmulAlgo_t>> candidates;
  for (size_t i = 0; i < ranking->size(); ++i) candidates.emplace_back(static_cast<int>(i), (*ranking)[i]);
  auto same = [](const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
    return std::memcmp(&x, &y, sizeof(x)) == 0;
  };
  for (const cublasLtMatmulAlgo_t* extra : {&made.reference(), &made.algo()}) {
    bool listed = false;
    for (const auto& cand : candidates) listed = listed || same(cand.second, *extra);
    if (!listed) candidates.emplace_back(-1, *extra);
  }
  std::vector<GemmCandidate> out;
  for (const auto& [rank, algo] : candidates) {
    auto g = Gemm::with_algo(device, shape, m, ops, algo);
    if (!g.ok()) continue;  // a candidate of another row count that cannot take m
    GemmCandidate cand;
    cand.rank = rank;
    cand.algo = describe_algo(algo);
    cand.reference = same(algo, made.reference());
    cand.chosen = same(algo, made.algo());
    if (cand.reference) {
      cand.same_bits = true;
    } else {
      TANDEM_ASSIGN(cand.same_bits, algos.same_bits(shape, made.reference(), algo, w.data(), ops.bias));
    }
    TANDEM_ASSIGN(cand.median_us, median_us(device, [&] { return g->run(device); }, reps));
    out.push_back(cand);
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.median_us < y.median_us; });
  return out;
}

}  // namespace tandem::cuda

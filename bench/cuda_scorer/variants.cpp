#include "bench/cuda_scorer/variants.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/cuda_scorer/timing.h"
#include "engine/cuda/cuda_backend.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One backend configuration against the default one (TANDEM_CUDA_* switches, set as options here).
struct Variant {
  const char* name;
  void (*apply)(cuda::CudaOptions&);
};
constexpr Variant kVariants[] = {
    {"default (tc2, tiers, timed probe)", [](cuda::CudaOptions&) {}},
    {"attention tc2split", [](cuda::CudaOptions& c) { c.attention = cuda::CudaAttention::kTc2Split; }},
    {"attention tc", [](cuda::CudaOptions& c) { c.attention = cuda::CudaAttention::kTc; }},
    {"attention simt", [](cuda::CudaOptions& c) { c.attention = cuda::CudaAttention::kSimt; }},
    {"GEMM row tiers off", [](cuda::CudaOptions& c) { c.gemm_tiers = false; }},
    {"GEMM timing off", [](cuda::CudaOptions& c) { c.gemm_timed = false; }},
    {"GEMM probe off", [](cuda::CudaOptions& c) { c.gemm_probe = false; }},
};

// Largest |a − b| over two output vectors; infinity when their sizes differ or a value is NaN.
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = std::fabs(static_cast<double>(a[i]) - b[i]);
    d = std::isnan(x) ? INFINITY : std::max(d, x);
  }
  return d;
}

}  // namespace

nlohmann::json run_variants(const Options& o, const models::decision::DecisionModel& model, const Workloads& w) {
  for (const char* v :
       {"TANDEM_CUDA_ATTENTION", "TANDEM_CUDA_GEMM_TIERS", "TANDEM_CUDA_GEMM_PROBE", "TANDEM_CUDA_GEMM_TIMED"}) {
    if (std::getenv(v) != nullptr) std::printf("variants: %s is set; each variant sets its own value\n", v);
    unsetenv(v);
  }
  const int w1_calls = o.tiny ? 2 : 300, w3_calls = o.tiny ? 1 : 30, warm = o.tiny ? 1 : 5;
  nlohmann::json out = nlohmann::json::array();
  std::vector<float> base_w1, base_w3;
  std::printf("\nvariants (p50 ms; logits against the first variant):\n");
  for (const Variant& v : kVariants) {
    if (o.tiny && out.size() == 2) break;  // the emulator's smoke run: two variants show the code works
    const auto t0 = Clock::now();
    cuda::CudaOptions co;
    co.precision = o.precision;
    co.device = o.device;
    v.apply(co);
    nlohmann::json row = {{"variant", v.name}};
    auto result = [&]() -> Status {
      TANDEM_ASSIGN(auto backend, cuda::make_cuda_backend(co));
      const ir::Graph* graphs[] = {&model.graph()};
      TANDEM_ASSIGN(auto weights, backend->upload(model.weights(), graphs));
      ir::Executor exec(*backend, *weights, model.graph(), ir::BucketTable::defaults(), "compat");
      ir::Outputs out1;
      for (const ir::Batch* b : {&w.w1, &w.w3}) TANDEM_TRY(exec.run(*b, nullptr, out1));  // lowers
      for (const ir::Batch& b : w.w3_parts) TANDEM_TRY(exec.run(b, nullptr, out1));
      const ir::Batch& t4096 = w.full[std::min<size_t>(3, w.full.size() - 1)];
      TANDEM_TRY(exec.run(t4096, nullptr, out1));
      row["setup_s"] = std::chrono::duration<double>(Clock::now() - t0).count();
      TANDEM_ASSIGN(Timing t1, time_calls([&] { return exec.run(w.w1, nullptr, out1); }, warm, w1_calls));
      const std::vector<float> logits1 = out1.values[0].data;
      TANDEM_ASSIGN(Timing t3, time_calls([&] { return exec.run(w.w3, nullptr, out1); }, warm, w3_calls));
      const std::vector<float> logits3 = out1.values[0].data;
      TANDEM_ASSIGN(Timing ts, time_calls([&] { return run_parts(exec, w.w3_parts, out1); }, warm, w3_calls));
      TANDEM_ASSIGN(Timing tt, time_calls([&] { return exec.run(t4096, nullptr, out1); }, warm, w3_calls));
      row["w1_p50_ms"] = t1.pct(50);
      row["w3_p50_ms"] = t3.pct(50);
      row["w3_split_p50_ms"] = ts.pct(50);
      row["tokens_per_s_4096"] = t4096.tokens() / tt.pct(50) * 1e3;
      if (base_w1.empty()) {
        base_w1 = logits1;
        base_w3 = logits3;
      }
      row["w1_logits_max_diff"] = max_diff(logits1, base_w1);
      row["w3_logits_max_diff"] = max_diff(logits3, base_w3);
      row["bit_identical"] = logits1 == base_w1 && logits3 == base_w3;
      return {};
    }();
    if (!result.ok()) {
      row["error"] = result.error().message();
      std::printf("  %-36s error: %s\n", v.name, result.error().message().c_str());
    } else {
      std::printf("  %-36s W1 %7.3f  W3 %7.3f  W3 split %7.3f  4096: %8.0f tok/s  logits vs first: %s %.2e/%.2e"
                  "  (setup %.1f s)\n",
                  v.name, row["w1_p50_ms"].get<double>(), row["w3_p50_ms"].get<double>(),
                  row["w3_split_p50_ms"].get<double>(), row["tokens_per_s_4096"].get<double>(),
                  row["bit_identical"].get<bool>() ? "same bits" : "differ", row["w1_logits_max_diff"].get<double>(),
                  row["w3_logits_max_diff"].get<double>(), row["setup_s"].get<double>());
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace tandem::bench

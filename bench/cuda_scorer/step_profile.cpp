#include "bench/cuda_scorer/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "engine/cuda/plan_impl.h"

namespace tandem::bench {

nlohmann::json profile(ir::Backend& backend, const ir::Weights& w, const ir::Graph& g, const ir::Batch& batch,
                       const ir::Bucket& bucket, const char* name) {
  auto plan = backend.lower(w, g, bucket);
  if (!plan.ok()) return {{"error", plan.error().message()}};
  auto* p = dynamic_cast<cuda::CudaPlan*>(plan->get());
  bool in_graph = true;
  auto steps = p->profile(batch, nullptr, true);
  if (!steps.ok()) {
    std::printf("\nprofile %s: in a graph failed (%s); launching steps one by one\n", name,
                steps.error().message().c_str());
    in_graph = false;
    (void)p->profile(batch, nullptr, false);  // warm
    steps = p->profile(batch, nullptr, false);
  }
  if (!steps.ok()) return {{"error", steps.error().message()}};
  std::map<std::string, std::pair<int, double>> by;
  double total = 0;
  for (const cuda::StepTime& s : *steps) {
    auto& e = by[cuda::step_category(s.label)];
    e.first += 1;
    e.second += s.ms;
    total += s.ms;
  }
  const char* how = in_graph ? "graph replay with events between steps" : "steps launched one by one";
  std::printf("\nprofile %s (bucket %s, %zu tokens, %s): %.3f ms of device time\n", name,
              ir::to_string(bucket).c_str(), size_t{batch.tokens()}, how, total);
  nlohmann::json out = {{"bucket", ir::to_string(bucket)}, {"total_ms", total}, {"in_graph", in_graph}};
  for (const auto& [cat, e] : by) {
    std::printf("  %-16s %4d steps %9.3f ms %5.1f%%\n", cat.c_str(), e.first, e.second, 100.0 * e.second / total);
    out["categories"][cat] = {{"steps", e.first}, {"ms", e.second}};
  }
  // GEMM steps by shape, with the algorithm the plan runs for this batch's row tier.
  const size_t tier = p->tier_for(batch.tokens());
  std::map<std::string, std::tuple<int, double, std::string>> shapes;
  int faster = 0;
  for (size_t i = 0; i < p->steps().size(); ++i) {
    const auto* gs = std::get_if<cuda::GemmStep>(&p->steps()[i]);
    if (gs == nullptr) continue;
    const cuda::Gemm& gemm = p->gemms()[gs->at(tier)];
    faster += gemm.faster() >= 0;
    auto& e = shapes[fmt::format("{} m {}", gemm.shape().describe(), gemm.m())];
    std::get<0>(e) += 1;
    std::get<1>(e) += (*steps)[i].ms;
    std::get<2>(e) = fmt::format("{}{}", cuda::describe_algo(gemm.algo()), gemm.faster() >= 0 ? " (faster)" : "");
  }
  std::printf("  GEMMs by shape (row tier %u of %zu; %d on a faster bit-identical algorithm):\n", p->tiers()[tier],
              p->tiers().size(), faster);
  for (const auto& [shape, e] : shapes) {
    const auto& [count, ms, algo] = e;
    std::printf("    %-40s %3d x %8.1f us  %s\n", shape.c_str(), count, 1e3 * ms / count, algo.c_str());
    out["gemm_shapes"].push_back({{"shape", shape}, {"count", count}, {"ms", ms}, {"algo", algo}});
  }
  std::vector<cuda::StepTime> top = *steps;
  std::sort(top.begin(), top.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
  for (size_t i = 0; i < std::min<size_t>(6, top.size()); ++i) {
    std::printf("    %8.4f ms  %s\n", top[i].ms, top[i].label.c_str());
    out["slowest"].push_back({{"label", top[i].label}, {"ms", top[i].ms}});
  }
  return out;
}

}  // namespace tandem::bench

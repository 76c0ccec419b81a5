#include "bench/cuda_scorer/kernel_study.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "engine/cuda/plan_impl.h"
#include "engine/cuda/study_impl.h"

namespace tandem::bench {

nlohmann::json run_study(const Options& o, ir::Backend& backend, const ir::Weights& weights, const ir::Graph& graph,
                         const Workloads& w, const ir::Executor& exec) {
  nlohmann::json out;
  auto device = cuda::Device::open(o.device);
  if (!device.ok()) return {{"error", device.error().message()}};
  auto modules = cuda::KernelModules::load((*device)->info(), cuda::default_cache_dir());
  if (!modules.ok()) return {{"error", modules.error().message()}};
  std::printf("\nattention kernels (median us per launch; max |diff| of the FP16 output against simt):\n");
  const ir::Batch& t4096 = w.full[std::min<size_t>(3, w.full.size() - 1)];
  const std::pair<const char*, const ir::Batch*> batches[] = {{"W1", &w.w1}, {"W3", &w.w3}, {"4096", &t4096}};
  for (const auto& [name, batch] : batches) {
    if (o.tiny && batch != &w.w1) break;  // the emulator's smoke run: one shape shows the code works
    for (int window : {-1, 64}) {
      cuda::AttentionShape shape;
      shape.batch = *batch;
      shape.bucket = exec.bucket_for(*batch).value();
      shape.heads = o.tiny ? 2 : 16;
      shape.window = window;
      shape.theta = window < 0 ? 160000.0f : 10000.0f;
      const std::string label = fmt::format("{} {}", name, window < 0 ? "global" : "local 64");
      auto r = cuda::study_attention(**device, **modules, shape, o.tiny ? 2 : 50);
      if (!r.ok()) {
        std::printf("  %-16s error: %s\n", label.c_str(), r.error().message().c_str());
        out["attention"].push_back({{"shape", label}, {"error", r.error().message()}});
        continue;
      }
      std::string line;
      for (const cuda::AttentionStudy& a : *r) {
        line += fmt::format("  {} {:8.1f} ({:.1e})", cuda::to_string(a.kernel), a.median_us, a.max_abs_diff);
        out["attention"].push_back({{"shape", label},
                                    {"kernel", cuda::to_string(a.kernel)},
                                    {"us", a.median_us},
                                    {"max_abs_diff", a.max_abs_diff},
                                    {"max_abs_ref", a.max_abs_ref}});
      }
      std::printf("  %-16s%s\n", label.c_str(), line.c_str());
    }
  }
  cuda::GemmAlgos algos(**device, true, cuda::kTimedMaxRows);  // picks as the backend does (timing aside)
  std::printf("\nGEMM candidates (median us; * = the plan's choice, R = the reference, = same bits as R):\n");
  std::set<std::pair<cuda::GemmShape, uint32_t>> seen;
  for (const ir::Batch* batch : {&w.w1, &t4096}) {
    if (o.tiny && batch != &w.w1) break;
    auto plan = backend.lower(weights, graph, exec.bucket_for(*batch).value());
    if (!plan.ok()) continue;
    const auto* p = dynamic_cast<const cuda::CudaPlan*>(plan->get());
    const size_t tier = p->tier_for(batch->tokens());
    for (const cuda::Step& step : p->steps()) {
      const auto* gs = std::get_if<cuda::GemmStep>(&step);
      if (gs == nullptr) continue;
      const cuda::Gemm& g = p->gemms()[gs->at(tier)];
      if (!seen.insert({g.shape(), g.m()}).second) continue;
      auto r = cuda::study_gemm(**device, algos, g.shape(), g.m(), o.tiny ? 2 : 20);
      const std::string label = fmt::format("{} m {}", g.shape().describe(), g.m());
      if (!r.ok()) {
        std::printf("  %s: error: %s\n", label.c_str(), r.error().message().c_str());
        continue;
      }
      std::string line;
      for (const cuda::GemmCandidate& c : *r) {
        line += fmt::format("  {:.1f}{}{}{}", c.median_us, c.chosen ? "*" : "", c.reference ? "R" : "",
                            c.same_bits && !c.reference ? "=" : "");
        out["gemm"].push_back({{"shape", label},
                               {"rank", c.rank},
                               {"algo", c.algo},
                               {"us", c.median_us},
                               {"same_bits", c.same_bits},
                               {"reference", c.reference},
                               {"chosen", c.chosen}});
      }
      std::printf("  %-40s%s\n", label.c_str(), line.c_str());
      if (!r->empty()) std::printf("  %-40s  fastest: %s\n", "", r->front().algo.c_str());
    }
  }
  return out;
}

}  // namespace tandem::bench

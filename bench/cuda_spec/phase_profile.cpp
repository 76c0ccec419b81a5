// One phase's step profile (phase_profile.h): gathered by the backend over every plan run the phase makes.
#include "bench/cuda_spec/phase_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_backend.h"

namespace tandem::bench {

Result<nlohmann::ordered_json> profile_phase(ir::Backend& backend, const std::string& what,
                                             const std::function<Status()>& phase) {
  TANDEM_TRY(cuda::set_step_profiling(backend, true));
  const Status ran = phase();
  TANDEM_TRY(cuda::set_step_profiling(backend, false));
  TANDEM_TRY(ran);
  return summarize_profile(backend, what);
}

Result<nlohmann::ordered_json> summarize_profile(const ir::Backend& backend, const std::string& what) {
  TANDEM_ASSIGN(std::vector<cuda::ProfiledStep> steps, cuda::profiled_steps(backend));
  std::map<std::string, std::pair<uint32_t, double>> by;
  double total = 0;
  uint32_t launches = 0;
  for (const cuda::ProfiledStep& s : steps) {
    auto& e = by[s.category];
    e.first += s.launches;
    e.second += s.ms;
    total += s.ms;
    launches += s.launches;
  }
  std::vector<std::pair<std::string, std::pair<uint32_t, double>>> cats(by.begin(), by.end());
  std::sort(cats.begin(), cats.end(), [](const auto& x, const auto& y) { return x.second.second > y.second.second; });
  nlohmann::ordered_json out = {{"steps_ms", total}, {"step_launches", launches}};
  std::fprintf(stderr, "cuda_spec_bench: profile %s: %.3f ms in %u step launches\n", what.c_str(), total, launches);
  for (const auto& [cat, e] : cats) {
    std::fprintf(stderr, "    %-22s %5u launches %9.3f ms %5.1f%%\n", cat.c_str(), e.first, e.second,
                 total > 0 ? 100.0 * e.second / total : 0.0);
    out["categories"][cat] = {{"steps", e.first}, {"ms", e.second}};
  }
  std::sort(steps.begin(), steps.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
  out["slowest"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < std::min<size_t>(8, steps.size()); ++i) {
    std::fprintf(stderr, "    %8.4f ms (%u launches)  %s\n", steps[i].ms, steps[i].launches, steps[i].label.c_str());
    out["slowest"].push_back({{"label", steps[i].label}, {"ms", steps[i].ms}, {"launches", steps[i].launches}});
  }
  return out;
}

}  // namespace tandem::bench

// The decoder GEMM study (PERF_NOTES "Where a batch-1 decode step goes"): each GEMM shape of a Qwen3-8B-shaped
// target at 1, 16, 128 and 512 rows (decode at batch 1, a 16-row verify, batch 8 and batch 32 verify) on
// tandem's production choice, the decode GEMM and cuBLASLt with a K split, weights rotated through more than
// the L2 holds. Device time per launch (median), weight bytes per second, and whether each configuration's rows
// keep their bits at every m. JSON on stdout, a table on stderr.
//   cuda_gemm_study [--reps N] [--rows 1,16,128,512] [--only SUBSTRING-OF-A-SHAPE-NAME] [--production | --stream]
// (--production: only what a decoder plan runs, and the one-pass rule before the K split; --stream: that and
// the streaming GEMM, whose bits are compared with production's at each m)
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/cli_values.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/study_impl.h"

int main(int argc, char** argv) {
  using namespace tandem;
  int reps = 30;
  std::vector<uint32_t> rows = {1, 16, 128, 512};
  std::string only;
  auto parts = cuda::SplitStudyParts::kAll;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--reps" && i + 1 < argc) {
      reps = static_cast<int>(bench::value_or_exit("cuda_gemm_study", bench::count(s, argv[++i], 100000)));
    } else if (s == "--rows" && i + 1 < argc) {
      rows = bench::value_or_exit("cuda_gemm_study", bench::count_list(s, argv[++i]));
    } else if (s == "--production") {
      parts = cuda::SplitStudyParts::kProduction;
    } else if (s == "--stream") {
      parts = cuda::SplitStudyParts::kStream;
    } else if (s == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: cuda_gemm_study [--reps N] [--rows 1,16,128,512] [--only SUBSTRING] [--production | --stream]\n");
      return 1;
    }
  }
  auto device = cuda::Device::open(0);
  if (!device.ok()) {
    std::fprintf(stderr, "cuda_gemm_study: %s\n", device.error().message().c_str());
    return 1;
  }
  auto modules = cuda::KernelModules::load((*device)->info(), cuda::default_cache_dir());
  if (!modules.ok()) {
    std::fprintf(stderr, "cuda_gemm_study: %s\n", modules.error().message().c_str());
    return 1;
  }
  cuda::GemmAlgos algos(**device, true, cuda::kTimedMaxRows);
  struct Shape {
    const char* name;
    cuda::GemmShape shape;
  };
  const cuda::Dt bf = cuda::Dt::kBF16, f = cuda::Dt::kF32;
  const Shape shapes[] = {
      {"q 4096->4096", {4096, 4096, bf, bf, false}},      {"k/v 4096->1024", {4096, 1024, bf, bf, false}},
      {"qkv 4096->6144", {4096, 6144, bf, bf, false}},    {"o 4096->4096 +=", {4096, 4096, bf, f, true}},
      {"gate_up 4096->24576", {4096, 24576, bf, bf, false}}, {"down 12288->4096 +=", {12288, 4096, bf, f, true}},
      {"lm head 4096->151936", {4096, 151936, bf, f, false}},
  };
  nlohmann::json out = nlohmann::json::array();
  int status = 0;
  for (const Shape& sh : shapes) {
    if (!only.empty() && std::string(sh.name).find(only) == std::string::npos) continue;
    auto r = cuda::study_gemm_splits(**device, **modules, algos, sh.shape, rows, reps, parts);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", sh.name, r.error().message().c_str());
      out.push_back({{"shape", sh.name}, {"error", r.error().message()}});
      status = 2;
      continue;
    }
    for (const cuda::SplitStudy& s : *r) {
      const std::string vs_production =
          s.matches_production ? "= production" : fmt::format("!= production ({} ulps)", s.production_ulps);
      std::fprintf(stderr, "%-22s m %4u %-34s %8.1f us %5.2f TB/s %s %s  %s\n", sh.name, s.m, s.config.c_str(),
                   s.median_us, s.weight_tb_per_s, s.rows_invariant ? "same-bits" : "BITS-DIFFER",
                   vs_production.c_str(), s.algo.c_str());
      out.push_back({{"shape", sh.name}, {"m", s.m}, {"config", s.config}, {"algo", s.algo}, {"splits", s.splits},
                     {"median_us", s.median_us}, {"weight_tb_per_s", s.weight_tb_per_s},
                     {"rows_invariant", s.rows_invariant},
                     {"matches_production", s.matches_production}, {"production_ulps", s.production_ulps}});
    }
  }
  std::printf("%s\n", out.dump(1).c_str());
  return status;
}

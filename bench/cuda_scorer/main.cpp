// cuda_scorer_bench: the CUDA scorer benchmark on the ModernBERT-large compat shape with random FP16 weights (scorer.md
// §4): W1, W3 (one batch and split by cost), throughput per full bucket, device memory, (--profile)
// per-step device time, (--study) attention kernels and GEMM candidates timed one by one, (--variants)
// every backend variant end to end; a table on stdout and JSON (--json) for tools/gpu-check.sh.
// The parts live beside this file: random_model, workloads, timing, step_profile, kernel_study, variants.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/cuda_scorer/kernel_study.h"
#include "bench/cuda_scorer/options.h"
#include "bench/cuda_scorer/random_model.h"
#include "bench/cuda_scorer/step_profile.h"
#include "bench/cuda_scorer/timing.h"
#include "bench/cuda_scorer/variants.h"
#include "bench/cuda_scorer/workloads.h"
#include "engine/cuda/cuda_backend.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;

size_t device_used() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total - free;
}

int run(const Options& o) {
  auto fail = [](const std::string& what, const Error& e) {
    std::fprintf(stderr, "cuda_scorer_bench: %s: %s\n", what.c_str(), e.message().c_str());
    return 1;
  };
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "cuda_scorer_bench: no CUDA device\n");
    return 2;
  }
  const auto t0 = Clock::now();
  auto model = make_model(o.tiny);
  if (!model.ok()) return fail("building the model", model.error());
  const ir::Graph& graph = (*model)->graph();
  cuda::CudaOptions co;
  co.precision = o.precision;
  co.device = o.device;
  auto backend = cuda::make_cuda_backend(co);
  if (!backend.ok()) return fail("starting the CUDA backend", backend.error());
  const size_t used_before = device_used();
  const ir::Graph* graphs[] = {&graph};
  auto weights = (*backend)->upload((*model)->weights(), graphs);
  if (!weights.ok()) return fail("uploading weights", weights.error());
  const size_t used_weights = device_used() - used_before;
  const double setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const ir::BucketTable& table = ir::BucketTable::defaults();
  ir::Executor exec(**backend, **weights, graph, table, "compat");
  ir::Outputs out;
  nlohmann::json j = {{"engine", "tandem"},
                      {"precision", ir::to_string(o.precision)},
                      {"device", (*backend)->caps().device},
                      {"setup_s", setup_s}};
  std::printf("tandem CUDA scorer, ModernBERT-large compat shape, %s, on %s (setup %.1f s)\n",
              ir::to_string(o.precision), (*backend)->caps().device.c_str(), setup_s);
  const Workloads w = make_workloads(o.tiny, table, exec);

  // A workload that fails is reported and recorded; the others still run (exit status 1 at the end).
  int rc = 0;
  auto latency = [&](const char* key, const std::string& label, const std::function<Status()>& call, int warm,
                     int calls) {
    auto t = time_calls(call, warm, calls);
    if (!t.ok()) {
      std::fprintf(stderr, "cuda_scorer_bench: %s: %s\n", label.c_str(), t.error().message().c_str());
      j[key] = {{"error", t.error().message()}};
      rc = 1;
      return false;
    }
    j[key] = t->json();
    std::printf("%s: p50 %.3f ms, p95 %.3f ms, p99 %.3f ms\n", label.c_str(), t->pct(50), t->pct(95), t->pct(99));
    return true;
  };
  auto bucket_of = [&](const ir::Batch& b) {
    auto bucket = exec.bucket_for(b);
    return bucket.ok() ? ir::to_string(*bucket) : bucket.error().message();
  };

  const int w1_calls = o.tiny ? 2 : (o.quick ? 200 : 2000), w1_warm = o.tiny ? 1 : (o.quick ? 20 : 200);
  if (latency("w1", fmt::format("W1 (1 question, 4 options, {} tokens, bucket {})", w.w1_len, bucket_of(w.w1)),
              [&] { return exec.run(w.w1, nullptr, out); }, w1_warm, w1_calls)) {
    j["w1"]["bucket"] = bucket_of(w.w1);
  }
  const int w3_calls = o.tiny ? 1 : (o.quick ? 50 : 500), w3_warm = o.tiny ? 1 : (o.quick ? 5 : 50);
  if (latency("w3", fmt::format("W3 (10 questions x {} tokens, one batch, bucket {})", w.w3_len, bucket_of(w.w3)),
              [&] { return exec.run(w.w3, nullptr, out); }, w3_warm, w3_calls)) {
    j["w3"]["bucket"] = bucket_of(w.w3);
  }
  if (latency("w3_split", "W3 split by bucket cost (" + w.w3_split + ")",
              [&] { return run_parts(exec, w.w3_parts, out); }, w3_warm, w3_calls)) {
    j["w3_split"]["buckets"] = w.w3_split;
  }

  j["throughput"] = nlohmann::json::array();
  for (const ir::Batch& b : w.full) {
    const uint32_t tokens = b.tokens();
    auto t = time_calls([&] { return exec.run(b, nullptr, out); }, o.tiny ? 1 : (o.quick ? 3 : 10),
                        o.tiny ? 1 : (o.quick ? 10 : 50));
    if (!t.ok()) {
      std::fprintf(stderr, "cuda_scorer_bench: throughput at %u tokens: %s\n", tokens, t.error().message().c_str());
      j["throughput"].push_back({{"tokens", tokens}, {"error", t.error().message()}});
      rc = 1;
      continue;
    }
    const double ms = t->pct(50);
    j["throughput"].push_back({{"tokens", tokens},
                               {"questions", b.seqs()},
                               {"p50_ms", ms},
                               {"tokens_per_s", tokens / ms * 1e3},
                               {"questions_per_s", b.seqs() / ms * 1e3}});
    std::printf("throughput %5u tokens (%3u x 128): %8.3f ms  %9.0f tokens/s  %7.0f questions/s\n", tokens, b.seqs(), ms,
                tokens / ms * 1e3, b.seqs() / ms * 1e3);
  }

  // The batch a serving job at max_batch_tokens 4096 runs under W1 load: its time caps a rank's W1 rate.
  if (latency("serving", fmt::format("serving batch ({} W1 questions x {} tokens, bucket {})", w.serving.seqs(), w.w1_len,
                                     bucket_of(w.serving)),
              [&] { return exec.run(w.serving, nullptr, out); }, w3_warm, w3_calls)) {
    j["serving"]["bucket"] = bucket_of(w.serving);
    j["serving"]["questions"] = w.serving.seqs();
    j["serving"]["questions_per_s"] = w.serving.seqs() / j["serving"]["p50_ms"].get<double>() * 1e3;
    std::printf("serving batch: %.0f W1 questions/s at its p50\n", j["serving"]["questions_per_s"].get<double>());
  }

  j["memory"] = {{"weights_bytes", (*weights)->bytes()},
                 {"weights_device_bytes", used_weights},
                 {"plans_bytes", exec.plan_bytes()},
                 {"plans", exec.plans()},
                 {"device_used_bytes", device_used()}};
  std::printf("memory: weights %.1f MiB, %zu plans %.1f MiB, device in use %.1f MiB\n",
              static_cast<double>((*weights)->bytes()) / (1 << 20), exec.plans(),
              static_cast<double>(exec.plan_bytes()) / (1 << 20), static_cast<double>(device_used()) / (1 << 20));
  for (const ir::Bucket& b : table.stage("compat")) {
    if ((b.tokens > 512 && b.tokens != 4096) || (o.tiny && b.tokens > 64)) continue;  // latency plans and 4096
    auto plan = (*backend)->lower(**weights, graph, b);
    if (!plan.ok()) {
      std::fprintf(stderr, "cuda_scorer_bench: lowering %s: %s\n", ir::to_string(b).c_str(),
                   plan.error().message().c_str());
      rc = 1;
      continue;
    }
    j["memory"]["plan_by_bucket"][ir::to_string(b)] = (*plan)->bytes();
  }

  if (o.profile) {
    std::fflush(stdout);
    for (const auto& [name, batch] : {std::pair<const char*, const ir::Batch*>{"w1", &w.w1}, {"w3", &w.w3},
                                    {"serving", &w.serving}}) {
      auto bucket = exec.bucket_for(*batch);
      if (bucket.ok()) j["profile"][name] = profile(**backend, **weights, graph, *batch, *bucket, name);
    }
  }
  // The JSON is written after each part, so a part that takes the process down leaves the others'.
  auto save = [&] {
    if (o.json.empty()) return;
    std::ofstream f(o.json);
    f << j.dump(2) << "\n";
    if (!f) std::fprintf(stderr, "cuda_scorer_bench: cannot write %s\n", o.json.c_str());
  };
  save();
  if (o.study) {
    std::fflush(stdout);
    j["study"] = run_study(o, **backend, **weights, graph, w, exec);
    save();
  }
  if (o.variants) {
    std::fflush(stdout);
    j["variants"] = run_variants(o, **model, w);  // each on its own backend, one at a time
    save();
  }
  return rc;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  tandem::bench::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--precision" && i + 1 < argc) {
      auto p = tandem::ir::parse_precision(argv[++i]);
      if (!p.ok()) {
        std::fprintf(stderr, "%s\n", p.error().message().c_str());
        return 2;
      }
      o.precision = *p;
    } else if (a == "--json" && i + 1 < argc) {
      o.json = argv[++i];
    } else if (a == "--device" && i + 1 < argc) {
      o.device = std::atoi(argv[++i]);
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--tiny") {
      o.tiny = true;
    } else if (a == "--variants") {
      o.variants = true;
    } else if (a == "--study") {
      o.study = true;
    } else {
      std::fprintf(stderr,
                   "usage: cuda_scorer_bench [--precision f16|f32] [--json FILE] [--profile] [--study] [--variants] "
                   "[--quick] [--tiny] [--device N]\n");
      return 2;
    }
  }
  try {
    return tandem::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_scorer_bench: %s\n", e.what());
    return 1;
  }
}

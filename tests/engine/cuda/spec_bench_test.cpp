// The speculative benchmark (bench/cuda_spec) at its tiny shape, on the GPU or the emulator: its JSON has
// every field the BENCHMARKS.md tables read, with sane values; every replayed run measured exactly the
// chosen acceptance (1, 3, 6.5, B) without leaving the target's greedy continuation; and a quantized
// drafter the backend cannot run is reported as refused while the BF16 ones are still measured; --profile's
// extra round says where each phase's device time goes without changing what the round computes.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "bench/cuda_spec/spec_bench.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

using json = nlohmann::ordered_json;

void expect_run(const json& run, double acceptance, uint32_t batch, const std::string& where) {
  SCOPED_TRACE(where);
  for (const char* f : {"batch", "rounds_timed", "acceptance_measured", "settle_ms", "draft_ms", "verify_ms",
                        "round_ms", "tokens_per_s", "speedup_vs_plain", "drafter_overhead_of_verify",
                        "replay_diverged"}) {
    ASSERT_TRUE(run.contains(f)) << f << " missing in " << run.dump();
  }
  EXPECT_EQ(run["batch"].get<uint32_t>(), batch);
  EXPECT_EQ(run["rounds_timed"].get<uint32_t>(), 2u);
  // Two timed rounds after one warm-up round: lengths 6, 7 for 6.5 (rounds 1 and 2 of the schedule: 7, 6).
  EXPECT_EQ(run["acceptance_measured"].get<double>(), acceptance);
  EXPECT_EQ(run["replay_diverged"].get<uint32_t>(), 0u);
  for (const char* f : {"settle_ms", "draft_ms", "verify_ms", "round_ms", "tokens_per_s", "speedup_vs_plain",
                        "drafter_overhead_of_verify"}) {
    EXPECT_GT(run[f].get<double>(), 0.0) << f;
  }
  EXPECT_GE(run["round_ms"].get<double>(), run["verify_ms"].get<double>());
  // Wall clock: the warm-up rounds (one at the tiny shape) are part of the whole replay.
  ASSERT_TRUE(run.contains("warmup_wall_s") && run.contains("wall_s")) << run.dump();
  EXPECT_GT(run["warmup_wall_s"].get<double>(), 0.0);
  EXPECT_GT(run["wall_s"].get<double>(), run["warmup_wall_s"].get<double>());
}

TEST(CudaSpecBench, TinyRunReportsEveryFieldAtTheChosenAcceptance) {
  TANDEM_REQUIRE_GPU();
  bench::SpecBenchArgs a;
  a.tiny = true;
  a.quantizations = {models::dflash::Quantization::kInt8};
  auto j = bench::run_spec_bench(a);
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_NE(j->value("drafts", "").find("replay"), std::string::npos);
  for (const char* f : {"timing", "shape", "precision", "device", "context", "weights_seconds", "plain_decode",
                        "drafters"}) {
    ASSERT_TRUE(j->contains(f)) << f;
  }
  EXPECT_EQ((*j)["precision"], "bf16");
  for (const char* b : {"1", "2"}) {
    const json& p = (*j)["plain_decode"][b];
    EXPECT_GT(p["step_ms"].get<double>(), 0.0) << b;
    EXPECT_GT(p["tokens_per_s"].get<double>(), 0.0) << b;
    EXPECT_GT(p["wall_s"].get<double>(), 0.0) << b;
  }
  for (const char* name : {"v1", "v2"}) {
    SCOPED_TRACE(name);
    const json& d = (*j)["drafters"][name];
    ASSERT_FALSE(d.contains("refused")) << d["refused"];
    EXPECT_EQ(d["block"].get<uint32_t>(), 8u);
    EXPECT_EQ(d["quantization"], "none");
    EXPECT_GT(d["bf16_weight_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT(d["create_s"].get<double>(), 0.0);
    for (uint32_t batch : {1u, 2u}) {
      const json& runs = d["batches"][std::to_string(batch)];
      ASSERT_EQ(runs.size(), 4u) << runs.dump();
      for (const auto& [k, acceptance] : {std::pair{"1", 1.0}, {"3", 3.0}, {"6.5", 6.5}, {"8", 8.0}}) {
        ASSERT_TRUE(runs.contains(k)) << k;
        expect_run(runs[k], acceptance, batch, std::string(name) + " batch " + std::to_string(batch) + " a " + k);
      }
      // Eight tokens a round against one for little more work: a full block must be far faster.
      EXPECT_GT(runs["8"]["tokens_per_s"].get<double>(), 2 * runs["1"]["tokens_per_s"].get<double>());
    }
  }
  // The int8 drafters: measured like the BF16 ones where the backend runs them, else refused by name.
  for (const char* name : {"v1-int8", "v2-int8"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE((*j)["drafters"].contains(name));
    const json& d = (*j)["drafters"][name];
    EXPECT_EQ(d["quantization"], "int8");
    if (d.contains("refused")) {
      EXPECT_FALSE(d["refused"].get<std::string>().empty());
    } else {
      expect_run(d["batches"]["1"]["6.5"], 6.5, 1, name);
    }
  }
}

// The categories a phase's profile must name: the ops its plans run (engine/ir/graph.cpp op_name).
void expect_categories(const json& phase, std::initializer_list<const char*> names, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_TRUE(phase.contains("categories")) << phase.dump();
  for (const char* n : names) EXPECT_TRUE(phase["categories"].contains(n)) << n << " missing in " << phase.dump();
  double sum = 0;
  for (const auto& [name, c] : phase["categories"].items()) {
    EXPECT_GT(c["steps"].get<uint32_t>(), 0u) << name;
    sum += c["ms"].get<double>();
  }
  EXPECT_GT(phase["steps_ms"].get<double>(), 0.0);
  EXPECT_NEAR(sum, phase["steps_ms"].get<double>(), 1e-9 * (1 + sum));
  ASSERT_FALSE(phase["slowest"].empty());
  EXPECT_LE(phase["slowest"].size(), 8u);
  EXPECT_NE(phase["slowest"][0]["label"].get<std::string>().find("op "), std::string::npos);
}

TEST(CudaSpecBench, ProfileNamesEachPhasesOpsAndLeavesTheRoundExact) {
  TANDEM_REQUIRE_GPU();
  bench::SpecBenchArgs a;
  a.tiny = true;
  a.batches = {2};
  a.acceptances = {3};
  a.profile = true;
  auto j = bench::run_spec_bench(a);
  ASSERT_TRUE(j.ok()) << j.error().message();
  expect_categories((*j)["plain_decode"]["2"]["profile"], {"gemm", "cache_attention", "sample"}, "plain decode");
  for (const char* name : {"v1", "v2"}) {
    SCOPED_TRACE(name);
    const json& run = (*j)["drafters"][name]["batches"]["2"]["3"];
    expect_run(run, 3.0, 2, name);
    ASSERT_TRUE(run.contains("profile")) << run.dump();
    const json& p = run["profile"];
    EXPECT_TRUE(p["accepted_as_scheduled"].get<bool>());
    expect_categories(p["settle"], {"gemm", "rms_norm"}, "settle");
    if (std::string(name) == "v1") {
      expect_categories(p["draft"], {"gemm", "cache_attention", "sample"}, "draft");
    } else {
      expect_categories(p["draft"], {"gemm", "dyn_conv", "top_k", "selector_walk"}, "draft");
    }
    expect_categories(p["verify"], {"gemm", "cache_attention", "rms_norm"}, "verify");
  }
}

// --draft-vocab: every drafter drafts over the head's first rows only; the replayed rounds stay exact (the target
// verifies) and the JSON says which vocabulary the drafters used. A draft vocabulary larger than the target's is
// refused per drafter, named, not fatal.
TEST(CudaSpecBench, DraftVocabReachesEveryDrafter) {
  TANDEM_REQUIRE_GPU();
  bench::SpecBenchArgs a;
  a.tiny = true;
  a.batches = {1};
  a.acceptances = {3};
  a.draft_vocab = 200;  // of the tiny target's 512
  auto j = bench::run_spec_bench(a);
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ((*j)["draft_vocab"].get<uint32_t>(), 200u);
  for (const char* name : {"v1", "v2"}) {
    SCOPED_TRACE(name);
    const json& d = (*j)["drafters"][name];
    ASSERT_FALSE(d.contains("refused")) << d["refused"];
    expect_run(d["batches"]["1"]["3"], 3.0, 1, name);
  }
  a.draft_vocab = 513;
  auto too_big = bench::run_spec_bench(a);
  ASSERT_TRUE(too_big.ok()) << too_big.error().message();
  for (const char* name : {"v1", "v2"}) {
    const json& d = (*too_big)["drafters"][name];
    ASSERT_TRUE(d.contains("refused")) << name << ": " << d.dump();
    EXPECT_NE(d["refused"].get<std::string>().find("513"), std::string::npos) << d["refused"];
  }
}

}  // namespace
}  // namespace tandem::cuda::test

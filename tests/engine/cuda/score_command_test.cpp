// `tandem score --backend cuda` end to end (the CLI, the checkpoint loader, the backend factory, the
// plans): on the decision-tiny fixture model and its sample, the CUDA answers against the CPU backend's,
// FP32 within 1e-4 (relative to max(1, |cpu|)), FP16 probabilities within 1.5e-2 with the same pick
// where the CPU's top-2 margin exceeds 1e-2 (scorer.md §5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/models/decision/score_cli.h"

namespace tandem::cuda::test {
namespace {

using models::decision::testing::CommandResult;
using models::decision::testing::run_cli;

constexpr const char* kModel = TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny";
constexpr const char* kSample = TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny/sample.json";

nlohmann::json score(const std::string& backend, const std::string& precision) {
  const CommandResult r = run_cli({"score", "--model", kModel, "--input", kSample, "--backend", backend,
                                   "--precision", precision});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

double margin(const std::vector<double>& v) {
  std::vector<double> s = v;
  std::sort(s.rbegin(), s.rend());
  return s.size() < 2 ? 1e300 : s[0] - s[1];
}

void compare(const std::string& precision) {
  TANDEM_REQUIRE_GPU();
  const nlohmann::json cpu = score("cpu", "f32"), gpu = score("cuda", precision);
  ASSERT_FALSE(cpu.is_null());
  ASSERT_FALSE(gpu.is_null());
  EXPECT_EQ(gpu.at("backend"), "cuda");
  EXPECT_EQ(gpu.at("precision"), precision);
  const auto& c = cpu.at("sequences");
  const auto& g = gpu.at("sequences");
  ASSERT_EQ(c.size(), g.size());
  ASSERT_GE(c.size(), 4u);
  const double tol = precision == "f32" ? 1e-4 : 1.5e-2;
  for (size_t i = 0; i < c.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i) + " (" + precision + ")");
    const auto cl = c[i].at("logits").get<std::vector<double>>(), gl = g[i].at("logits").get<std::vector<double>>();
    const auto cp = c[i].at("probs").get<std::vector<double>>(), gp = g[i].at("probs").get<std::vector<double>>();
    ASSERT_EQ(cl.size(), gl.size());
    ASSERT_EQ(cp.size(), gp.size());
    for (size_t k = 0; k < cp.size(); ++k) EXPECT_NEAR(gp[k], cp[k], tol) << "probs[" << k << "]";
    if (precision == "f32") {
      for (size_t k = 0; k < cl.size(); ++k) {
        EXPECT_LE(std::fabs(gl[k] - cl[k]) / std::max(1.0, std::fabs(cl[k])), tol) << "logits[" << k << "]";
      }
      const auto ca = c[i].at("act").get<std::vector<double>>(), ga = g[i].at("act").get<std::vector<double>>();
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_LE(std::fabs(ga[k] - ca[k]) / std::max(1.0, std::fabs(ca[k])), tol) << "act[" << k << "]";
      }
    }
    if (precision == "f32" || margin(cl) > 1e-2) {
      EXPECT_EQ(g[i].at("pick"), c[i].at("pick"));
    }
  }
}

TEST(ScoreCommandCuda, F32MatchesTheCpuBackend) { compare("f32"); }
TEST(ScoreCommandCuda, F16MatchesTheCpuBackendWithinTheFp16Bound) { compare("f16"); }

TEST(ScoreCommandCuda, AMissingDeviceIsAnErrorThatSaysSo) {
  TANDEM_REQUIRE_GPU();
  const CommandResult r = run_cli({"score", "--model", kModel, "--input", kSample, "--backend", "cuda", "--device", "63"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("tandem score: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("63"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tandem::cuda::test

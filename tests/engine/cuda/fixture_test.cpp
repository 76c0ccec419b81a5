// The CUDA backend against the decision fixture (tools/make_decision_fixture.py: HF ModernBERT and the
// PyTorch head in float64): FP32 logits and act within 1e-4, FP16 probabilities within the bound of
// scorer.md §5. A missing fixture fails the test.
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine/io/hf_config.h"
#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/cuda/model_util.h"

namespace tandem::cuda::test {
namespace {

constexpr const char* kReference = TANDEM_SOURCE_DIR "/tests/fixtures/decision/reference.json";

size_t argmax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

double top_margin(const std::vector<double>& v) {
  const size_t best = argmax(v);
  double second = -1e300;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != best) second = std::max(second, v[i]);
  }
  return v[best] - second;
}

void check(ir::Precision precision) {
  auto ref = io::read_json_file(kReference);
  ASSERT_TRUE(ref.ok()) << "the decision fixture is missing (run tools/make_decision_fixture.py): "
                        << ref.error().message();
  const nlohmann::json& j = *ref;
  auto model = decision::DecisionModel::load(std::string(TANDEM_SOURCE_DIR) + "/" + j.at("model").get<std::string>());
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto runner = cuda_runner(**model, precision);
  ASSERT_TRUE(runner.ok()) << runner.error().message();
  const nlohmann::json& batches = j.at("batches");
  ASSERT_GE(batches.size(), 50u);
  const size_t limit = emulated() ? 8 : batches.size();
  double worst = 0, prob_worst = 0, prob_sum = 0;
  size_t questions = 0, prob_questions = 0;
  for (size_t bi = 0; bi < limit; ++bi) {
    const nlohmann::json& seqs = batches[bi].at("sequences");
    ir::Batch batch;
    for (const nlohmann::json& s : seqs) {
      batch.add_sequence(s.at("ids").get<std::vector<uint32_t>>(), s.at("markers").get<std::vector<uint32_t>>(),
                         s.at("qtype").get<uint8_t>());
    }
    ASSERT_TRUE(ir::check(batch, (*model)->batch_limits()).ok()) << "fixture batch " << bi;
    auto st = (*runner)->run(batch);
    ASSERT_TRUE(st.ok()) << "batch " << bi << ": " << st.error().message();
    for (size_t s = 0; s < seqs.size(); ++s, ++questions) {
      const auto want = seqs[s].at("logits").get<std::vector<double>>();
      const auto want_act = seqs[s].at("act").get<std::vector<double>>();
      const uint32_t m0 = batch.pcu[s], k = batch.pcu[s + 1] - m0;
      ASSERT_EQ(want.size(), k);
      std::vector<double> got((*runner)->logits().begin() + m0, (*runner)->logits().begin() + m0 + k);
      const std::string where = "batch " + std::to_string(bi) + " sequence " + std::to_string(s);
      if (precision == ir::Precision::kF32) {
        for (size_t i = 0; i < k; ++i) {
          const double err = std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
          worst = std::max(worst, err);
          EXPECT_LE(err, 1e-4) << where << " logit " << i << ": got " << got[i] << ", want " << want[i];
        }
        for (size_t i = 0; i < 2; ++i) {
          const double a = (*runner)->act()[2 * s + i];
          const double err = std::fabs(a - want_act[i]) / std::max(1.0, std::fabs(want_act[i]));
          worst = std::max(worst, err);
          EXPECT_LE(err, 1e-4) << where << " act " << i << ": got " << a << ", want " << want_act[i];
        }
        if (k > 1 && top_margin(want) > 2e-4 * std::max(1.0, std::fabs(want[argmax(want)]))) {
          EXPECT_EQ(argmax(got), argmax(want)) << where;
        }
      } else if (k > 0) {
        const float t = (*model)->temperature(batch.qtype[s], k);
        const std::vector<float> gf(got.begin(), got.end()), wf(want.begin(), want.end());
        const std::vector<float> p = decision::calibrate(gf, t), q = decision::calibrate(wf, t);
        double err = 0;
        for (size_t i = 0; i < k; ++i) err = std::max(err, static_cast<double>(std::fabs(p[i] - q[i])));
        prob_worst = std::max(prob_worst, err);
        prob_sum += err;
        ++prob_questions;
        EXPECT_LE(err, 1.5e-2) << where;
        const std::vector<double> qd(q.begin(), q.end()), pd(p.begin(), p.end());
        if (k > 1 && top_margin(qd) > 1e-2) {
          EXPECT_EQ(argmax(pd), argmax(qd)) << where;
        }
      }
    }
  }
  if (precision == ir::Precision::kF16) {
    const double mean = prob_questions == 0 ? 0.0 : prob_sum / static_cast<double>(prob_questions);
    EXPECT_LE(mean, 5e-4);
    std::cout << "fixture F16: " << prob_questions << " questions, max probability error " << prob_worst << ", mean "
              << mean << "\n";
  } else {
    std::cout << "fixture F32: " << questions << " questions, worst relative error " << worst << "\n";
  }
}

TEST(CudaFixture, Fp32MatchesTheHfReference) {
  TANDEM_REQUIRE_GPU();
  check(ir::Precision::kF32);
}

TEST(CudaFixture, Fp16ProbabilitiesMatchTheHfReference) {
  TANDEM_REQUIRE_GPU();
  check(ir::Precision::kF16);
}

}  // namespace
}  // namespace tandem::cuda::test

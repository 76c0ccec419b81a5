// The shipped drafters quantized at load (issue 14, docs/quantization.md) on the first kPrompts of their
// held-out prompts (eval.json) at block 8: int8 and int4 output is still plain greedy decoding token for token
// (the target decides), and int8 keeps the float drafter's mean acceptance length within kMargin. The full
// table (every prompt, blocks 4/8/16, both drafters, none/int8/int4) is bench/drafter_acceptance.py's.
#include "tests/engine/spec/shipped_models.h"

namespace tandem::spec {
namespace {

using models::dflash::Quantization;
using shipped::Shipped;

constexpr size_t kPrompts = 3;
constexpr uint32_t kBlock = 8;
// The goal is 3% over all eight prompts (BENCHMARKS.md). Three prompts run about 60 rounds, so one
// round more or less moves the mean by ~1.6%: 5% allows three rounds lost to the quantization's near-ties.
constexpr double kMargin = 0.05;

class QuantizedAcceptance : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedAcceptance, Int8KeepsTheFloatDrafterAcceptanceAndEveryFormatIsLossless) {
  const auto s = Shipped::open(GetParam(), kPrompts);
  ASSERT_NE(s, nullptr);
  const std::vector<Request> plain = s->run(nullptr, 0);
  double float_mean = 0.0;
  for (const std::optional<Quantization> q : {std::optional<Quantization>{}, std::optional{Quantization::kInt8},
                                              std::optional{Quantization::kInt4}}) {
    const std::string what = GetParam() + " " + (q ? models::dflash::to_string(*q) : "float");
    const auto drafter = s->drafter(q);
    ASSERT_NE(drafter, nullptr);
    const std::vector<Request> spec = s->run(drafter.get(), kBlock);
    EXPECT_TRUE(shipped::same_tokens(spec, plain, what));
    const double mean = shipped::mean_acceptance(spec);
    ASSERT_GT(mean, 1.0) << what << ": nothing accepted";
    RecordProperty(what + "_mean_acceptance", std::to_string(mean));
    if (!q) float_mean = mean;
    if (q == Quantization::kInt8) {
      EXPECT_GE(mean, (1.0 - kMargin) * float_mean)
          << what << ": mean acceptance " << mean << " against the float drafter's " << float_mean;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Drafters, QuantizedAcceptance, ::testing::Values("pylm-dflash", "pylm-dflash2"),
                         [](const auto& p) { return std::string(p.param == "pylm-dflash" ? "v1" : "v2"); });

}  // namespace
}  // namespace tandem::spec

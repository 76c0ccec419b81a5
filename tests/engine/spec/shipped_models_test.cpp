// The shipped LM and drafters (models/pylm, models/pylm-dflash, models/pylm-dflash2, trained by
// tools/train_default_models.sh) on held-out-file prompts (each drafter's eval.json): at blocks 4, 8 and 16
// speculative output equals plain greedy decoding token for token, and the mean acceptance length (committed
// tokens per round over all rounds) stays within kMargin of what the reference loop of tools/train/spec_loop.py
// measured on the same prompts. Plain greedy must also agree with PyTorch's greedy tokens on most prompts. A
// missing model fails the test.
#include "tests/engine/spec/shipped_models.h"

namespace tandem::spec {
namespace {

using shipped::Shipped;

// F32 on the CPU against the reference loop's F32 on the GPU: the same weights, so paths differ only where a
// near-tie flips a token; 0.3 tokens per round absorbs a few such rounds.
constexpr double kMargin = 0.3;

class ShippedModels : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedModels, LosslessAndKeepTheirAcceptance) {
  const auto s = Shipped::open(GetParam());
  ASSERT_NE(s, nullptr);
  ASSERT_FALSE(s->prompts.empty());
  const auto drafter = s->drafter(std::nullopt);
  ASSERT_NE(drafter, nullptr);
  const std::vector<Request> plain = s->run(nullptr, 0);
  const auto python_greedy = s->ev.at("greedy").get<std::vector<std::vector<uint32_t>>>();
  ASSERT_EQ(python_greedy.size(), s->prompts.size());
  size_t same_as_python = 0;
  for (size_t i = 0; i < s->prompts.size(); ++i) {
    const auto g = plain[i].generated();
    same_as_python += std::vector<uint32_t>(g.begin(), g.end()) == python_greedy[i];
  }
  EXPECT_GE(same_as_python * 4, s->prompts.size() * 3) << same_as_python << " of " << s->prompts.size()
                                                        << " greedy runs equal PyTorch's";
  for (uint32_t block : {4u, 8u, 16u}) {
    const std::vector<Request> spec = s->run(drafter.get(), block);
    ASSERT_TRUE(shipped::same_tokens(spec, plain, GetParam() + " block " + std::to_string(block)));
    const double mean = shipped::mean_acceptance(spec);
    ASSERT_GT(mean, 0.0);
    const double measured = s->ev.at("mean_acceptance").at(std::to_string(block)).get<double>();
    EXPECT_GE(mean, measured - kMargin) << GetParam() << " block " << block << ": " << mean
                                        << " tokens per round; the reference loop measured " << measured;
    RecordProperty("block" + std::to_string(block) + "_mean_acceptance", std::to_string(mean));
  }
}

INSTANTIATE_TEST_SUITE_P(Drafters, ShippedModels, ::testing::Values("pylm-dflash", "pylm-dflash2"),
                         [](const auto& p) { return p.param == "pylm-dflash" ? std::string("v1") : std::string("v2"); });

}  // namespace
}  // namespace tandem::spec

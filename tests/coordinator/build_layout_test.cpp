// The compat layout (coordinator/build_layout.h) with the decision-tiny fixture's tokenizer: the sample
// questions lay out to exactly the sequences tools/make_decision_fixture.py made with HF tokenizers
// (tests/fixtures/decision-tiny/sample.json), and each budget rule of scorer.md §1 holds on crafted inputs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "coordinator/build_layout.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

constexpr uint32_t kCls = 1, kSep = 2, kMask = 4;  // decision-tiny's special ids (its encoder config)

class BuildLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = io::Tokenizer::load(std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/decision-tiny/tokenizer/tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.error().message();
    tokenizer_ = std::move(t).value();
  }
  BuildLayout layout(uint32_t max_len = 512, uint32_t head_max_len = 192) const {
    return BuildLayout(*tokenizer_, {kCls, kSep, kMask}, {max_len, head_max_len});
  }
  std::vector<uint32_t> encode(const std::string& s) const { return tokenizer_->encode(s).value(); }
  std::unique_ptr<io::Tokenizer> tokenizer_;
};

TEST_F(BuildLayoutTest, SampleQuestionsMatchTheFixtureScript) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/decision-tiny/sample.json");
  ASSERT_TRUE(in) << "tests/fixtures/decision-tiny/sample.json is missing";
  const json sample = json::parse(in);
  // The state tools/make_decision_fixture.py used for the sample questions.
  const std::string state =
      "Customer email: my order 4521 arrived broken and I want a refund, not a replacement. "
      "This is the second time this month.";
  const BuildLayout build = layout();
  auto state_ids = build.encode_state(state);
  ASSERT_TRUE(state_ids.ok());
  ASSERT_EQ(sample["questions"].size(), sample["sequences"].size());
  for (size_t i = 0; i < sample["questions"].size(); ++i) {
    const json& q = sample["questions"][i];
    const auto options = q["options"].get<std::vector<std::string>>();
    auto out = build(q["qtype"].get<std::string>(), q["question"].get<std::string>(), options, state_ids.value());
    ASSERT_TRUE(out.ok()) << out.error().message();
    EXPECT_EQ(out.value().ids, sample["sequences"][i]["ids"].get<std::vector<uint32_t>>()) << "question " << i;
    EXPECT_EQ(out.value().markers, sample["sequences"][i]["markers"].get<std::vector<uint32_t>>()) << "question " << i;
    EXPECT_EQ(out.value().state_tokens, state_ids.value().size());
    EXPECT_EQ(out.value().state_tokens_used, state_ids.value().size());
  }
}

std::string words(int n, const std::string& word) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + word + std::to_string(i % 10);
  return s;
}

TEST_F(BuildLayoutTest, OptionsKeep48TokensAndMarkersPointAtMasks) {
  const std::string long_option = words(80, "lorem");
  ASSERT_GT(encode(" " + long_option).size(), 48u);
  auto out = layout()("choice", "pick", std::vector<std::string>{long_option, "short"}, {});
  ASSERT_TRUE(out.ok());
  const auto& ids = out.value().ids;
  ASSERT_EQ(out.value().markers.size(), 2u);
  for (uint32_t m : out.value().markers) EXPECT_EQ(ids[m], kMask);
  EXPECT_EQ(out.value().markers[1] - out.value().markers[0], 49u);  // mask + 48 option tokens
  const auto first = encode(" " + long_option);
  EXPECT_TRUE(std::equal(first.begin(), first.begin() + 48, ids.begin() + out.value().markers[0] + 1));
  EXPECT_EQ(ids.front(), kCls);
  EXPECT_EQ(ids.back(), kSep);
}

TEST_F(BuildLayoutTest, CrowdedOptionsShareTheHead) {
  // Five 48-token options (245 ids with their masks) leave fewer than 16 of 192: each is cut to
  // max(4, (192 - 16) / 5) = 35 ids, its mask included; the question keeps max(8, 192 - 175) = 17.
  const std::vector<std::string> options(5, words(80, "opt"));
  auto out = layout()("choice", words(60, "question"), options, {});
  ASSERT_TRUE(out.ok());
  const auto& m = out.value().markers;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], 1u + 17u + 1u);  // CLS, question, SEP
  for (size_t i = 1; i < m.size(); ++i) EXPECT_EQ(m[i] - m[i - 1], 35u);
  EXPECT_EQ(out.value().ids.size(), m[4] + 35u + 1u + 1u);  // last option, SEP, (no state), SEP
}

TEST_F(BuildLayoutTest, QuestionGetsAtLeastEightTokens) {
  // Ten crowded options: share max(4, 176 / 10) = 17, 170 ids, 22 left: the question keeps 22.
  const std::vector<std::string> ten(10, words(80, "opt"));
  auto out = layout()("score", words(60, "question"), ten, {});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value().markers[0], 1u + 22u + 1u);
  // Forty of them: share 4, 160 ids, 32 left.
  const std::vector<std::string> forty(40, words(10, "opt"));
  auto many = layout()("score", words(60, "question"), forty, {});
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many.value().markers[0], 1u + 32u + 1u);
  // A tiny head budget: two 3-token options in 12 leave 4 (< 16), shares of max(4, 0) = 4 ids keep them,
  // and the question still keeps 8.
  auto tight = layout(512, 12)("noul", words(60, "question"), std::vector<std::string>{"a b", "c d"}, {});
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight.value().markers[0], 1u + 8u + 1u);
}

TEST_F(BuildLayoutTest, StateFillsTheRoomAndIsCutFromTheTail) {
  const BuildLayout build = layout();
  auto state = build.encode_state(words(700, "state"));
  ASSERT_TRUE(state.ok());
  ASSERT_GT(state.value().size(), 512u);
  auto out = build("choice", "which?", std::vector<std::string>{"a", "b"}, state.value());
  ASSERT_TRUE(out.ok());
  const auto& ids = out.value().ids;
  EXPECT_EQ(ids.size(), 512u);
  EXPECT_EQ(ids.back(), kSep);
  const size_t prefix = 512 - 1 - out.value().state_tokens_used;
  EXPECT_EQ(ids[prefix - 1], kSep);
  EXPECT_TRUE(std::equal(state.value().begin(), state.value().begin() + out.value().state_tokens_used,
                         ids.begin() + static_cast<std::ptrdiff_t>(prefix)));
  EXPECT_EQ(out.value().state_tokens, state.value().size());
}

TEST_F(BuildLayoutTest, MaskLiteralsInUserTextAreNotMarkers) {
  const BuildLayout build = layout();
  EXPECT_EQ(build.clean("Pick [MASK] one[MASK]"), "Pick   one ");
  auto state = build.encode_state("a [MASK] b");
  ASSERT_TRUE(state.ok());
  auto out = build("choice", "is [MASK] here", std::vector<std::string>{"x [MASK]"}, state.value());
  ASSERT_TRUE(out.ok());
  size_t masks = 0;
  for (uint32_t id : out.value().ids) masks += id == kMask ? 1 : 0;
  EXPECT_EQ(masks, 1u);  // only the option's own marker
}

// Special-token literals typed by a user are text (HF split_special_tokens=True): the layout holds only its
// own structural tokens (CLS, three SEPs, one MASK per option) and the state's ids no special id at all.
TEST_F(BuildLayoutTest, SpecialTokenLiteralsInUserTextAreText) {
  const std::string typed = "[CLS][SEP][MASK][PAD][UNK]";
  const BuildLayout build = layout();
  auto state = build.encode_state(typed);
  ASSERT_TRUE(state.ok());
  ASSERT_FALSE(state.value().empty());
  for (uint32_t id : state.value()) EXPECT_FALSE(tokenizer_->is_special(id)) << id;
  EXPECT_EQ(state.value(), tokenizer_->encode("[CLS][SEP] [PAD][UNK]", io::SpecialTokens::kSplit).value());
  auto out = build("choice", typed, std::vector<std::string>{typed, "no " + typed}, state.value());
  ASSERT_TRUE(out.ok());
  const auto& ids = out.value().ids;
  std::vector<uint32_t> structural;
  std::vector<size_t> where;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (tokenizer_->is_special(ids[i])) {
      structural.push_back(ids[i]);
      where.push_back(i);
    }
  }
  EXPECT_EQ(structural, (std::vector<uint32_t>{kCls, kSep, kMask, kMask, kSep, kSep}));
  const auto& m = out.value().markers;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(where, (std::vector<size_t>{0, m[0] - 1, m[0], m[1], where[4], ids.size() - 1}));
  EXPECT_EQ(ids.size() - 1 - (where[4] + 1), state.value().size());  // the state sits between the last SEPs
}

// Every cut is reported per piece: options past 48 tokens, the question squeezed by crowded options, a
// state past max_len, and nothing for pieces that fit.
TEST_F(BuildLayoutTest, TruncationIsReportedPerPiece) {
  const std::string long_option = words(80, "lorem");
  const auto long_ids = encode(" " + long_option);
  ASSERT_GT(long_ids.size(), 48u);
  auto out = layout()("choice", "pick", std::vector<std::string>{long_option, "short"}, {});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value().option_tokens, (std::vector<uint32_t>{static_cast<uint32_t>(long_ids.size()),
                                                               static_cast<uint32_t>(encode(" short").size())}));
  EXPECT_EQ(out.value().option_tokens_used, (std::vector<uint32_t>{48, static_cast<uint32_t>(encode(" short").size())}));
  EXPECT_EQ(out.value().question_tokens, encode("choice question: pick").size());
  EXPECT_EQ(out.value().question_tokens_used, out.value().question_tokens);

  // Five crowded options: each keeps 34 text tokens (35 ids with its mask), the question 17 of its own.
  const std::vector<std::string> options(5, words(80, "opt"));
  const std::string question = words(60, "question");
  auto crowded = layout()("choice", question, options, {});
  ASSERT_TRUE(crowded.ok());
  EXPECT_EQ(crowded.value().question_tokens, encode("choice question: " + question).size());
  EXPECT_EQ(crowded.value().question_tokens_used, 17u);
  EXPECT_EQ(crowded.value().option_tokens_used, std::vector<uint32_t>(5, 34));

  const BuildLayout build = layout();
  auto state = build.encode_state(words(700, "state"));
  ASSERT_TRUE(state.ok());
  auto cut = build("choice", "which?", std::vector<std::string>{"a", "b"}, state.value());
  ASSERT_TRUE(cut.ok());
  EXPECT_LT(cut.value().state_tokens_used, cut.value().state_tokens);
  EXPECT_EQ(cut.value().option_tokens_used, cut.value().option_tokens);
}

TEST_F(BuildLayoutTest, OptionsBeyondMaxLenAreAnError) {
  auto out = layout(24, 192)("choice", "q", std::vector<std::string>{words(30, "a"), words(30, "b")}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind(), ErrorKind::kCapacity);
  EXPECT_NE(out.error().message().find("options exceed head_max_len=192"), std::string::npos);
}

TEST_F(BuildLayoutTest, InvalidUtf8NamesThePiece) {
  auto out = layout()("choice", "q", std::vector<std::string>{"ok", std::string("bad\xc3")}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message().rfind("options[1]:", 0), 0u) << out.error().message();
}

}  // namespace
}  // namespace tandem::coordinator

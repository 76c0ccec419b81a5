// The shipped decision model (models/decision-tickets, trained by tools/train_decision.py) on its held-out
// set (eval.json: tickets written with sentence frames the training never saw): the compat layout tandem builds
// from each question's text equals the ids the training script laid out with HF tokenizers (the Python layout of
// tools/train/laya_layout.py), and the CPU backend's accuracy per question type stays within kMargin of what
// PyTorch measured on the same questions. A missing model fails: tools/train_default_models.sh makes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "coordinator/build_layout.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/io/hf_config.h"
#include "engine/models/decision/decision_model.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

const std::string kModel = TANDEM_SOURCE_DIR "/models/decision-tickets";
// FP32 on the CPU against PyTorch's FP32 from the same BF16 weights: picks differ only on near-ties.
constexpr double kMargin = 0.02;

uint8_t qtype_index(const std::string& name) {
  for (uint8_t i = 0; i < io::kQuestionTypes.size(); ++i) {
    if (name == io::kQuestionTypes[i]) return i;
  }
  return 255;
}

TEST(ShippedDecisionModel, LaysOutAsTrainedAndKeepsItsHeldOutAccuracy) {
  auto ev_or = io::read_json_file(kModel + "/eval.json");
  ASSERT_TRUE(ev_or.ok()) << "the shipped decision model is missing (run tools/train_default_models.sh on the GPU "
                             "machine and unpack its models): " << ev_or.error().message();
  const json& ev = *ev_or;
  auto model = models::decision::DecisionModel::load(kModel);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto tokenizer = io::Tokenizer::load(kModel + "/tokenizer/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message();
  const auto& special = (*model)->special();
  const auto& laya = (*model)->laya();
  EXPECT_EQ(laya.max_len, ev.at("max_len").get<uint32_t>());
  EXPECT_EQ(laya.head_max_len, ev.at("head_max_len").get<uint32_t>());
  const BuildLayout build(**tokenizer, {special.cls, special.sep, special.mask}, {laya.max_len, laya.head_max_len});

  const json& questions = ev.at("questions");
  ASSERT_GE(questions.size(), 300u);
  std::vector<LaidOut> laid;
  std::vector<uint8_t> qtypes;
  for (size_t i = 0; i < questions.size(); ++i) {
    const json& q = questions[i];
    auto state = build.encode_state(q.at("state").get<std::string>());
    ASSERT_TRUE(state.ok()) << i << ": " << state.error().message();
    const auto options = q.at("options").get<std::vector<std::string>>();
    auto out = build(q.at("qtype").get<std::string>(), q.at("question").get<std::string>(), options, *state);
    ASSERT_TRUE(out.ok()) << i << ": " << out.error().message();
    ASSERT_EQ(out->ids, q.at("ids").get<std::vector<uint32_t>>()) << "question " << i << " lays out differently";
    ASSERT_EQ(out->markers, q.at("markers").get<std::vector<uint32_t>>()) << "question " << i;
    laid.push_back(std::move(out).value());
    qtypes.push_back(qtype_index(q.at("qtype").get<std::string>()));
    ASSERT_LT(qtypes.back(), 3) << i;
  }

  auto backend = cpu::make_cpu_backend(0);
  auto scorer = models::decision::Scorer::create(**model, *backend, ir::BucketTable::defaults());
  ASSERT_TRUE(scorer.ok()) << scorer.error().message();
  std::map<std::string, std::pair<int, int>> right;  // qtype -> (right, asked)
  constexpr size_t kBatch = 12;
  for (size_t begin = 0; begin < laid.size(); begin += kBatch) {
    const size_t end = std::min(laid.size(), begin + kBatch);
    ir::Batch batch;
    for (size_t i = begin; i < end; ++i) batch.add_sequence(laid[i].ids, laid[i].markers, qtypes[i]);
    auto out = (*scorer)->score(batch);
    ASSERT_TRUE(out.ok()) << out.error().message();
    for (size_t i = begin; i < end; ++i) {
      const auto s = static_cast<uint32_t>(i - begin);
      const std::vector<float> logits(out->logits.begin() + batch.pcu[s], out->logits.begin() + batch.pcu[s + 1]);
      const std::vector<float> p = (*model)->probabilities(qtypes[i], logits);
      const int answer = questions[i].at("answer").get<int>();
      bool ok = false;
      if (qtypes[i] == models::decision::kNoul && p.size() == 1) {
        ok = (p[0] > 0.5f) == (answer == 1);  // P(statement true)
      } else {
        ok = std::max_element(logits.begin(), logits.end()) - logits.begin() == answer;
      }
      auto& [r, n] = right[io::kQuestionTypes[qtypes[i]]];
      r += ok;
      ++n;
    }
  }
  for (const char* q : io::kQuestionTypes) {
    const auto [r, n] = right[q];
    ASSERT_GT(n, 0) << q;
    const double accuracy = static_cast<double>(r) / n;
    const double measured = ev.at("measured").at(q).get<double>();
    EXPECT_GE(accuracy, measured - kMargin) << q << ": " << r << "/" << n << " right; PyTorch measured " << measured;
    RecordProperty(std::string(q) + "_accuracy", std::to_string(accuracy));
  }
}

}  // namespace
}  // namespace tandem::coordinator

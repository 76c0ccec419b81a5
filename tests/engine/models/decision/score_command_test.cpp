// `tandem score` (launch/score_command.cpp) run in-process through CLI11: the JSON it prints against
// the Scorer itself, batching across several batches, and input errors that name their field.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/decision/decision_model.h"
#include "tests/engine/models/decision/decision_test_util.h"
#include "tests/engine/models/decision/score_cli.h"

namespace tandem::models::decision::testing {
namespace {

class ScoreCommand : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(write_tiny_model(dir_.path() / "model")); }
  std::string model() const { return (dir_.path() / "model").string(); }
  std::string input(const std::string& text) {
    write_text(dir_.path(), "input.json", text);
    return (dir_.path() / "input.json").string();
  }
  CommandResult score(const std::string& text, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"score", "--model", model(), "--input", input(text), "--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }
  // A failing run: non-zero exit, nothing on stdout, and stderr naming `field`.
  void expect_error(const std::string& text, const std::string& field, std::vector<std::string> extra = {}) {
    const CommandResult r = score(text, std::move(extra));
    EXPECT_NE(r.exit_code, 0) << text;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find(field), std::string::npos) << "stderr '" << r.err << "' does not name " << field;
  }
  TempDir dir_{"score"};
};

TEST_F(ScoreCommand, PrintsWhatTheScorerComputes) {
  const std::string text = R"({"note": "extra top-level keys are ignored", "sequences": [
    {"ids": [1, 10, 2, 4, 20, 4, 21, 2], "markers": [3, 5], "qtype": "choice"},
    {"ids": [1, 4, 30, 31, 2], "markers": [1], "qtype": 2},
    {"ids": [], "markers": [], "qtype": "score"},
    {"ids": [1, 40, 41, 2], "markers": [], "qtype": 1},
    {"ids": [1, 4, 50, 2], "markers": [1], "qtype": "choice"}]})";
  const CommandResult r = score(text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("model"), model());
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_EQ(j.at("precision"), "f32");
  const nlohmann::json& seqs = j.at("sequences");
  ASSERT_EQ(seqs.size(), 5u);

  auto m = DecisionModel::load(model());
  ASSERT_TRUE(m.ok());
  auto backend = cpu::make_cpu_backend(1);
  auto scorer = Scorer::create(**m, *backend, ir::BucketTable::defaults());
  ASSERT_TRUE(scorer.ok());
  ir::Batch batch;
  batch.add_sequence({1, 10, 2, 4, 20, 4, 21, 2}, {3, 5}, 0);
  batch.add_sequence({1, 4, 30, 31, 2}, {1}, 2);
  batch.add_sequence({}, {}, 1);
  batch.add_sequence({1, 40, 41, 2}, {}, 1);
  batch.add_sequence({1, 4, 50, 2}, {1}, 0);
  auto want = (*scorer)->score(batch);
  ASSERT_TRUE(want.ok());
  for (size_t s = 0; s < 5; ++s) {
    const auto logits = seqs[s].at("logits").get<std::vector<float>>();
    ASSERT_EQ(logits.size(), batch.pcu[s + 1] - batch.pcu[s]);
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_EQ(logits[i], want->logits[batch.pcu[s] + i]);  // exact
    EXPECT_EQ(seqs[s].at("act").get<std::vector<float>>(), (std::vector<float>{want->act[s][0], want->act[s][1]}));
    const auto probs = seqs[s].at("probs").get<std::vector<float>>();
    ASSERT_EQ(probs.size(), logits.size());
    if (logits.empty()) {
      EXPECT_TRUE(seqs[s].at("pick").is_null());
      continue;
    }
    const auto options = static_cast<uint32_t>(logits.size());
    const float t = (*m)->temperature(batch.qtype[s], options);
    std::vector<float> p = calibrate(logits, t);
    // A one-option noul question answers P(statement true) = sigmoid(z / T).
    if (batch.qtype[s] == kNoul && options == 1) p = {static_cast<float>(1.0 / (1.0 + std::exp(-logits[0] / t)))};
    EXPECT_EQ(probs, p) << "sequence " << s;
    EXPECT_EQ(seqs[s].at("pick").get<size_t>(),
              static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  // One option: a choice is certain; a noul statement gets the sigmoid of its logit, strictly inside (0, 1).
  EXPECT_EQ(seqs[4].at("probs").get<std::vector<float>>(), std::vector<float>{1.0f});
  const float statement = seqs[1].at("probs")[0].get<float>();
  EXPECT_GT(statement, 0.0f);
  EXPECT_LT(statement, 1.0f);
}

TEST_F(ScoreCommand, SplitsLargeInputsIntoBatchesWithTheSameResults) {
  // 40 sequences of 30 tokens: more than one batch; each result equals the sequence scored alone.
  nlohmann::json in = {{"sequences", nlohmann::json::array()}};
  for (uint32_t i = 0; i < 40; ++i) {
    std::vector<uint32_t> ids(30);
    for (uint32_t t = 0; t < 30; ++t) ids[t] = 5 + (i * 7 + t * 3) % 90;
    ids[4] = ids[9] = 4;
    in["sequences"].push_back({{"ids", ids}, {"markers", {4, 9}}, {"qtype", i % 3}});
  }
  const CommandResult all = score(in.dump());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const nlohmann::json j = nlohmann::json::parse(all.out);
  ASSERT_EQ(j.at("sequences").size(), 40u);
  for (size_t i : {0u, 17u, 39u}) {
    const CommandResult one = score(nlohmann::json{{"sequences", {in["sequences"][i]}}}.dump());
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(nlohmann::json::parse(one.out).at("sequences")[0], j.at("sequences")[i]) << i;
  }
}

TEST_F(ScoreCommand, ErrorsNameTheFieldAtFault) {
  expect_error(R"({"sequences": [{"ids": [1, 2], "markers": [0], "qtype": 0},
    {"ids": [1, 2, 3], "markers": [0, 3], "qtype": 0}]})", "sequences[1].markers[1]: 3 is outside the sequence of 3");
  expect_error(R"({"sequences": [{"ids": [1, 97], "markers": [], "qtype": 0}]})",
               "sequences[0].ids[1]: 97 is outside the vocabulary of 97");
  expect_error(R"({"sequences": [{"ids": [1, -2], "markers": [], "qtype": 0}]})", "sequences[0].ids[1]: -2 is not");
  expect_error(R"({"sequences": [{"ids": [1], "markers": [], "qtype": "maybe"}]})", "sequences[0].qtype: \"maybe\"");
  expect_error(R"({"sequences": [{"ids": [1], "markers": [], "qtype": 3}]})", "sequences[0].qtype: 3");
  expect_error(R"({"sequences": [{"ids": [1], "markers": [], "qtype": 0, "options": 2}]})",
               "sequences[0].options: unknown key");
  expect_error(R"({"sequences": [{"ids": [1], "qtype": 0}]})", "sequences[0].markers: missing");
  expect_error(R"({"sequences": [{"ids": "1 2", "markers": [], "qtype": 0}]})", "sequences[0].ids: expected a list");
  expect_error(R"({"sequences": [7]})", "sequences[0]: expected an object");
  expect_error(R"({"questions": []})", "\"sequences\" is a list");
  expect_error(R"({"sequences": [)", "input.json");
  expect_error(R"({"sequences": [{"ids": [1], "markers": [], "qtype": 0}]})", "f32 only", {"--precision", "f16"});
  // As POST /v1/score answers 400 "sequences is empty".
  expect_error(R"({"sequences": []})", "input.json: sequences is empty; give at least one sequence");
}

// Past the checkpoint's length limits (max_len in rl_agent_config.json, max_position_embeddings in
// encoder/config.json, whichever is smaller) a sequence is refused with both named, at 1 token past.
TEST_F(ScoreCommand, SequencesPastTheModelsLengthLimitAreRefused) {
  auto ids = [](size_t n) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) list.push_back(5 + i % 80);
    return nlohmann::json{{"sequences", {{{"ids", list}, {"markers", nlohmann::json::array()}, {"qtype", 0}}}}}.dump();
  };
  // The tiny model: max_len 512 (Laya's default), no max_position_embeddings (HF's default, 8192).
  EXPECT_EQ(score(ids(512)).exit_code, 0);
  expect_error(ids(513), "sequences[0].ids: 513 tokens; the model takes at most 512 (max_len 512 in "
                         "rl_agent_config.json, max_position_embeddings 8192 in encoder/config.json)");
  // A smaller max_position_embeddings wins.
  const auto config = dir_.path() / "model" / "encoder" / "config.json";
  std::ifstream in(config);
  nlohmann::json encoder = nlohmann::json::parse(in);
  in.close();
  encoder["max_position_embeddings"] = 300;
  std::ofstream(config, std::ios::trunc) << encoder.dump();
  EXPECT_EQ(score(ids(300)).exit_code, 0);
  expect_error(ids(301), "sequences[0].ids: 301 tokens; the model takes at most 300 (max_len 512 in "
                         "rl_agent_config.json, max_position_embeddings 300 in encoder/config.json)");
}

TEST_F(ScoreCommand, MissingModelAndBadFlags) {
  const CommandResult r = run_cli({"score", "--model", (dir_.path() / "nothing").string(), "--input", input("{}")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nothing"), std::string::npos) << r.err;
  const CommandResult flags = run_cli({"score", "--model", model(), "--input", input("{}"), "--backend", "tpu"});
  EXPECT_NE(flags.exit_code, 0);
}

}  // namespace
}  // namespace tandem::models::decision::testing

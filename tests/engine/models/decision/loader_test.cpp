// Loading a DecisionModel: a good checkpoint, every missing, extra and misshaped tensor named in one
// error, configs the graph cannot express, special tokens, temperatures, and loading from a directory.
#include <gtest/gtest.h>

#include "engine/models/decision/decision_model.h"
#include "tests/engine/models/decision/decision_test_util.h"

namespace tandem::models::decision::testing {
namespace {

std::vector<io::HostTensor> without(std::vector<io::HostTensor> t, const std::string& name) {
  std::erase_if(t, [&](const io::HostTensor& x) { return x.name == name; });
  return t;
}

Result<std::unique_ptr<DecisionModel>> from(const std::vector<io::HostTensor>& t,
                                            io::ModernBertConfig enc = tiny_encoder()) {
  return DecisionModel::from_parts(to_source(t), std::move(enc), tiny_laya());
}

TEST(DecisionLoader, GoodCheckpointLoads) {
  auto model = from(tiny_tensors());
  ASSERT_TRUE(model.ok()) << model.error().message();
  const DecisionModel& m = **model;
  EXPECT_EQ(m.vocab(), 97u);
  EXPECT_EQ(m.hidden(), 128u);
  ASSERT_EQ(m.graph().outputs.size(), 2u);
  EXPECT_EQ(m.graph().outputs[0].name, "logits");
  EXPECT_EQ(m.graph().info(m.graph().outputs[0].val).rows, ir::Rows::kPicks);
  EXPECT_EQ(m.graph().info(m.graph().outputs[0].val).width, 1u);
  EXPECT_EQ(m.graph().outputs[1].name, "act");
  EXPECT_EQ(m.graph().info(m.graph().outputs[1].val).rows, ir::Rows::kSeqs);
  EXPECT_EQ(m.graph().info(m.graph().outputs[1].val).width, 2u);
  EXPECT_EQ(m.special().cls, 1u);
  EXPECT_EQ(m.special().sep, 2u);
  EXPECT_EQ(m.special().pad, 3u);
  EXPECT_EQ(m.special().mask, 4u);
  EXPECT_EQ(m.batch_limits().vocab, 97u);
  // The graph reads every checkpoint tensor but the temperature buffer.
  EXPECT_EQ(m.graph().weights.size() + 1, compat_tensor_list({}).size());
}

TEST(DecisionLoader, NamesEveryMissingExtraAndMisshapedTensorInOneError) {
  std::vector<io::HostTensor> t = without(without(tiny_tensors(), "encoder.layers.2.mlp.Wo.weight"), "temperature");
  t.push_back(io::HostTensor::from_f32("encoder.head.dense.weight", {4, 4}, std::vector<float>(16)));
  t.push_back(io::HostTensor::from_f32("encoder.layers.0.attn_norm.weight", {128}, std::vector<float>(128)));
  for (io::HostTensor& x : t) {
    if (x.name == "type_emb.weight") x = io::HostTensor::from_f32(x.name, {4, 128}, std::vector<float>(512));
  }
  auto model = from(t);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().kind(), ErrorKind::kShape);
  const std::string& e = model.error().message();
  for (const char* line : {"(5 problems)", "missing encoder.layers.2.mlp.Wo.weight: expected [128, 96], found none",
                           "missing temperature: expected [3], found none",
                           "misshaped type_emb.weight: expected [3, 128], found [4, 128]",
                           "extra encoder.head.dense.weight: expected none, found [4, 4]",
                           "extra encoder.layers.0.attn_norm.weight: expected none, found [128]"}) {
    EXPECT_NE(e.find(line), std::string::npos) << "no '" << line << "' in:\n" << e;
  }
}

TEST(DecisionLoader, ConfigBiasesAddTheirTensors) {
  io::ModernBertConfig enc = tiny_encoder();
  enc.norm_bias = true;
  auto model = from(tiny_tensors(), enc);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message().find("missing encoder.final_norm.bias: expected [128], found none"),
            std::string::npos)
      << model.error().message();
}

TEST(DecisionLoader, RejectsEncodersTheGraphCannotExpress) {
  io::ModernBertConfig act = tiny_encoder();
  act.hidden_activation = "gelu_new";
  auto a = from(tiny_tensors(), act);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message().find("hidden_activation: 'gelu_new' is not supported"), std::string::npos)
      << a.error().message();

  TinyShape narrow;
  narrow.d = 96;
  narrow.heads = 2;
  auto b = DecisionModel::from_parts(to_source(tiny_tensors(narrow)), tiny_encoder(narrow), tiny_laya(narrow));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("96 is not a multiple of 64"), std::string::npos) << b.error().message();
}

TEST(DecisionLoader, MaskTokenRules) {
  io::ModernBertConfig enc = tiny_encoder();
  enc.mask_token_id.reset();
  auto none = from(tiny_tensors(), enc);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("no mask_token_id"), std::string::npos) << none.error().message();

  // ModernBERT's vocabulary without a mask id: [MASK] is 50284.
  TinyShape big;
  big.vocab = 50368;
  io::ModernBertConfig modern = tiny_encoder(big);
  modern.mask_token_id.reset();
  auto m = DecisionModel::from_parts(to_source(tiny_tensors(big)), modern, tiny_laya(big));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ((*m)->special().mask, 50284u);
}

TEST(DecisionLoader, TemperaturesByOptionsThenTheBuffer) {
  std::vector<io::HostTensor> t = tiny_tensors();
  for (io::HostTensor& x : t) {
    if (x.name == "temperature") x = io::HostTensor::from_f32("temperature", {3}, {2.0f, 3.0f, 4.0f});
  }
  auto model = from(t);
  ASSERT_TRUE(model.ok()) << model.error().message();
  EXPECT_EQ((*model)->temperature(0, 2), 1.5f);  // rl_agent_config's choice:2
  EXPECT_EQ((*model)->temperature(0, 3), 2.0f);
  EXPECT_EQ((*model)->temperature(1, 2), 3.0f);
  EXPECT_EQ((*model)->temperature(2, 1), 4.0f);

  for (io::HostTensor& x : t) {
    if (x.name == "temperature") x = io::HostTensor::from_f32("temperature", {3}, {2.0f, 0.0f, 4.0f});
  }
  auto bad = from(t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("temperature[1] = 0 is not a positive temperature"), std::string::npos);
}

class DecisionDir : public ::testing::Test {
 protected:
  void write(const std::string& rel, const std::string& text) { write_text(dir_.path(), rel, text); }
  void write_model(DType dtype, bool with_mask) { ASSERT_TRUE(write_tiny_model(dir_.path(), dtype, with_mask)); }
  TempDir dir_{"decision"};
};

TEST_F(DecisionDir, LoadsADirectoryInThePublicLayout) {
  write_model(DType::kBF16, true);
  auto model = DecisionModel::load(dir_.path().string());
  ASSERT_TRUE(model.ok()) << model.error().message();
  EXPECT_EQ((*model)->dir(), dir_.path().string());
  EXPECT_EQ((*model)->special().mask, 4u);
  EXPECT_EQ((*model)->temperature(0, 2), 1.5f);
  EXPECT_EQ((*model)->encoder().global_layer, (std::vector<bool>{true, false, false, true}));
}

TEST_F(DecisionDir, MaskFromTheTokenizersAddedTokens) {
  write_model(DType::kF32, false);
  write("tokenizer/tokenizer.json",
        R"({"added_tokens": [{"id": 1, "content": "[CLS]"}, {"id": 4, "content": "[MASK]"}]})");
  auto model = DecisionModel::load(dir_.path().string());
  ASSERT_TRUE(model.ok()) << model.error().message();
  EXPECT_EQ((*model)->special().mask, 4u);
}

TEST_F(DecisionDir, MissingFilesAreNamed) {
  write_model(DType::kF32, true);
  std::filesystem::remove(dir_.path() / "rl_agent_config.json");
  auto model = DecisionModel::load(dir_.path().string());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message().find("rl_agent_config.json"), std::string::npos) << model.error().message();
  EXPECT_NE(model.error().message().find("loading decision model " + dir_.path().string()), std::string::npos);
}

}  // namespace
}  // namespace tandem::models::decision::testing

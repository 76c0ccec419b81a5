// What rank 0 opens of a generation checkpoint (coordinator/generation_frontend.h): the shipped pylm's
// tokenizer, ChatML template and EOS ids; a chat template it cannot render is refused at start-up with
// the construct and line, never rendered wrongly; malformed config files are refused naming the file.
#include <gtest/gtest.h>

#include "coordinator/generation_frontend.h"

namespace tandem::coordinator {
namespace {

const std::string kPylm = std::string(TANDEM_SOURCE_DIR) + "/models/pylm";

std::unique_ptr<io::Tokenizer> pylm_tokenizer() { return io::Tokenizer::load(kPylm + "/tokenizer.json").value(); }

TEST(GenerationFrontend, OpensTheShippedPylm) {
  auto f = GenerationFrontend::load("pylm", kPylm, kPylm + "/tokenizer.json");
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f.value()->name(), "pylm");
  EXPECT_TRUE(f.value()->has_chat_template());
  EXPECT_EQ(f.value()->eos_ids(), (std::vector<uint32_t>{0}));  // eos_token_id 0 = <|endoftext|>
  auto text = f.value()->render_chat({{"system", "S", std::nullopt}, {"user", "U", std::nullopt}},
                                     nlohmann::ordered_json::object());
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_EQ(text.value(), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(GenerationFrontend, EosIdsFromBothConfigs) {
  auto f = GenerationFrontend::make("m", pylm_tokenizer(), R"({"eos_token": "<|im_end|>"})",
                                    R"({"eos_token_id": [0, 3]})", "/ckpt");
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f.value()->eos_ids(), (std::vector<uint32_t>{0, 3, 2}));
  EXPECT_FALSE(f.value()->has_chat_template());
  EXPECT_EQ(f.value()->render_chat({{"user", "U", std::nullopt}}, nlohmann::ordered_json::object()).error().message(),
            "the model has no chat template");
}

TEST(GenerationFrontend, UnsupportedTemplateIsRefusedAtStartUp) {
  auto f = GenerationFrontend::make(
      "m", pylm_tokenizer(),
      R"({"chat_template": "{% for m in messages %}\n{{ m.content|selectattr('x') }}{% endfor %}"})", "", "/ckpt");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(f.error().message(),
            "/ckpt/tokenizer_config.json: the chat template cannot be rendered: line 2: the filter 'selectattr' is "
            "not supported");
}

TEST(GenerationFrontend, TemplateThatCannotRenderOneMessageIsRefused) {
  auto f = GenerationFrontend::make(
      "m", pylm_tokenizer(), R"({"chat_template": "{{ raise_exception('only tool calls here') }}"})", "", "/ckpt");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message(),
            "/ckpt/tokenizer_config.json: the chat template cannot render a one-message conversation: the chat "
            "template refused the conversation: only tool calls here");
}

TEST(GenerationFrontend, MalformedConfigsAreRefusedNamingTheFile) {
  auto a = GenerationFrontend::make("m", pylm_tokenizer(), "", R"({"eos_token_id": 99999})", "/ckpt");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message(), "/ckpt/generation_config.json: eos id 99999 is outside the vocabulary (6144 ids)");
  auto b = GenerationFrontend::make("m", pylm_tokenizer(), R"({"chat_template": [{"name": "default"}]})", "", "/ckpt");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message(),
            "/ckpt/tokenizer_config.json: chat_template is a list of named templates; only a single template (a "
            "string) is supported");
  auto c = GenerationFrontend::make("m", pylm_tokenizer(), "{not json", "", "/ckpt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "/ckpt/tokenizer_config.json is not a JSON object");
  auto d = GenerationFrontend::make("m", pylm_tokenizer(), R"({"eos_token": "<nope>"})", "", "/ckpt");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(), "/ckpt/tokenizer_config.json: eos_token '<nope>' is not in the tokenizer");
}

}  // namespace
}  // namespace tandem::coordinator

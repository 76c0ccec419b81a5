// /v1/completions and /v1/chat/completions bodies (coordinator/parse_completion.h): well-formed ones parse
// to exactly what they say (every OpenAI field, vLLM's stop_token_ids and return_token_ids, tandem's
// speculative); each malformed one gets its status, the field at fault in `param`, and a message saying
// what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "coordinator/parse_completion.h"

namespace tandem::coordinator {
namespace {

CompletionLimits limits() { return CompletionLimits{6144, 1024}; }

TEST(ParseCompletion, EveryField) {
  auto r = parse_completion_request(
      R"({"model": "pylm", "prompt": "Hello", "max_tokens": 32, "temperature": 0.7, "top_p": 0.9,
          "seed": 18446744073709551615, "stop": ["\n\n", "END"], "stop_token_ids": [2, 0], "stream": true,
          "stream_options": {"include_usage": true}, "return_token_ids": true, "n": 1, "user": "u1",
          "logprobs": null, "speculative": false, "ignore_eos": true, "top_k": -1, "min_p": 0,
          "presence_penalty": 0, "frequency_penalty": 0.0, "repetition_penalty": 1})",
      limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CompletionRequest& c = r.value();
  EXPECT_FALSE(c.chat);
  EXPECT_EQ(c.model, "pylm");
  EXPECT_EQ(c.prompt_text, "Hello");
  EXPECT_FALSE(c.prompt_ids.has_value());
  EXPECT_EQ(c.max_tokens, 32u);
  EXPECT_FLOAT_EQ(c.temperature, 0.7f);
  EXPECT_FLOAT_EQ(c.top_p, 0.9f);
  EXPECT_EQ(c.seed, 18446744073709551615ull);
  EXPECT_EQ(c.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(c.stop_token_ids, (std::vector<uint32_t>{2, 0}));
  EXPECT_TRUE(c.stream);
  EXPECT_TRUE(c.include_usage);
  EXPECT_TRUE(c.return_token_ids);
  EXPECT_FALSE(c.speculative);
  EXPECT_TRUE(c.ignore_eos);
  EXPECT_EQ(c.user, "u1");
}

TEST(ParseCompletion, DefaultsAndPromptForms) {
  auto r = parse_completion_request(R"({"prompt": [5, 6, 6143], "max_tokens": null, "stop": "x"})", limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompt_ids, (std::vector<uint32_t>{5, 6, 6143}));
  EXPECT_FALSE(r.value().max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.value().temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.value().top_p, 1.0f);
  EXPECT_FALSE(r.value().seed.has_value());
  EXPECT_EQ(r.value().stop, (std::vector<std::string>{"x"}));
  EXPECT_FALSE(r.value().stream);
  EXPECT_TRUE(r.value().speculative);
  EXPECT_FALSE(r.value().ignore_eos);
  // OpenAI's one-element batch forms.
  auto text = parse_completion_request(R"({"prompt": ["once"]})", limits());
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text.value().prompt_text, "once");
  auto ids = parse_completion_request(R"({"prompt": [[7, 8]], "max_tokens": 1024})", limits());
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(ids.value().prompt_ids, (std::vector<uint32_t>{7, 8}));
  EXPECT_EQ(ids.value().max_tokens, 1024u);
}

TEST(ParseChat, MessagesAndTextParts) {
  auto r = parse_chat_request(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "name": "ann"},
                       {"role": "assistant", "content": "ok"}],
          "max_completion_tokens": 8, "chat_template_kwargs": {"enable_thinking": false}})",
      limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CompletionRequest& c = r.value();
  EXPECT_TRUE(c.chat);
  ASSERT_EQ(c.messages.size(), 3u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[0].content, "Be brief.");
  EXPECT_EQ(c.messages[1].content, "a\nb");
  EXPECT_EQ(c.messages[1].name, "ann");
  EXPECT_EQ(c.messages[2].role, "assistant");
  EXPECT_EQ(c.max_tokens, 8u);
  EXPECT_EQ(c.template_kwargs.dump(), R"({"enable_thinking":false})");
}

struct Case {
  const char* name;
  bool chat;
  std::string body;
  unsigned status;
  std::optional<std::string> param;
  std::string message_part;
};

class Malformed : public ::testing::TestWithParam<Case> {};

TEST_P(Malformed, IsRejectedNamingTheField) {
  const Case& c = GetParam();
  auto r = c.chat ? parse_chat_request(c.body, limits()) : parse_completion_request(c.body, limits());
  ASSERT_FALSE(r.ok()) << c.body;
  const ApiError& e = r.error();
  EXPECT_EQ(e.status, c.status) << e.message;
  EXPECT_EQ(e.param, c.param) << e.message;
  EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
  EXPECT_FALSE(e.type.empty());
}

const std::string kMsgs = R"("messages": [{"role": "user", "content": "hi"}])";

std::string deep(int levels) { return R"({"prompt": )" + std::string(levels, '[') + "1" + std::string(levels, ']') + "}"; }

INSTANTIATE_TEST_SUITE_P(
    Bodies, Malformed,
    ::testing::Values(
        Case{"NotJson", false, "hello", 400, std::nullopt, "the body is not valid JSON: parse error"},
        Case{"TruncatedJson", false, "{\"prompt\": ", 400, "prompt", "the body is not valid JSON at prompt"},
        Case{"NotAnObject", false, "[1, 2]", 400, std::nullopt, "the body must be a JSON object, not an array"},
        Case{"BadJsonInsideAField", false, R"({"prompt": "a", "stop": [tru]})", 400, "stop[0]",
             "the body is not valid JSON at stop[0]"},
        Case{"TooDeep", false, deep(40), 400, std::nullopt, "deeper than 32 levels"},
        Case{"NoPrompt", false, "{}", 400, "prompt", "prompt is required"},
        Case{"PromptWrongType", false, R"({"prompt": 5})", 400, "prompt",
             "prompt must be a string, an array of token ids, or an array with one of either, not an integer"},
        Case{"PromptEmptyString", false, R"({"prompt": ""})", 400, "prompt", "prompt is empty"},
        Case{"PromptEmptyList", false, R"({"prompt": []})", 400, "prompt", "prompt is empty"},
        Case{"BatchedTextPrompts", false, R"({"prompt": ["a", "b"]})", 400, "prompt",
             "prompt holds 2 prompts; batched prompts are not supported"},
        Case{"BatchedIdPrompts", false, R"({"prompt": [[1], [2], [3]]})", 400, "prompt",
             "prompt holds 3 prompts; batched prompts are not supported"},
        Case{"NegativeTokenId", false, R"({"prompt": [1, -2]})", 400, "prompt[1]",
             "prompt[1] = -2 is not a token id: the vocabulary has 6144 (0..6143)"},
        Case{"TokenIdPastVocab", false, R"({"prompt": [1, 6144]})", 400, "prompt[1]",
             "prompt[1] = 6144 is not a token id"},
        Case{"TokenIdNotAnInteger", false, R"({"prompt": [1, "x"]})", 400, "prompt[1]",
             "prompt[1] must be a token id (an integer), not a string"},
        Case{"NestedTokenIdPastVocab", false, R"({"prompt": [[3, 99999]]})", 400, "prompt[0][1]",
             "prompt[0][1] = 99999 is not a token id"},
        Case{"EmptyNestedPrompt", false, R"({"prompt": [[]]})", 400, "prompt[0]", "prompt[0] is empty"},
        Case{"MaxTokensZero", false, R"({"prompt": "a", "max_tokens": 0})", 400, "max_tokens",
             "max_tokens = 0 must be at least 1"},
        Case{"MaxTokensNegative", false, R"({"prompt": "a", "max_tokens": -5})", 400, "max_tokens",
             "max_tokens = -5 must be at least 1"},
        Case{"MaxTokensHuge", false, R"({"prompt": "a", "max_tokens": 100000})", 422, "max_tokens",
             "max_tokens = 100000 exceeds the model's context of 1024 tokens (max_context)"},
        Case{"MaxTokensFraction", false, R"({"prompt": "a", "max_tokens": 2.5})", 400, "max_tokens",
             "max_tokens must be an integer, not a number with a fraction"},
        Case{"MaxTokensString", false, R"({"prompt": "a", "max_tokens": "5"})", 400, "max_tokens",
             "max_tokens must be an integer, not a string"},
        Case{"TemperatureHigh", false, R"({"prompt": "a", "temperature": 2.5})", 400, "temperature",
             "temperature = 2.5 is outside [0, 2]"},
        Case{"TemperatureNegative", false, R"({"prompt": "a", "temperature": -0.1})", 400, "temperature",
             "temperature = -0.1 is outside [0, 2]"},
        Case{"TemperatureString", false, R"({"prompt": "a", "temperature": "hot"})", 400, "temperature",
             "temperature must be a number, not a string"},
        Case{"TopPZero", false, R"({"prompt": "a", "top_p": 0})", 400, "top_p", "top_p = 0 is outside (0, 1]"},
        Case{"TopPHigh", false, R"({"prompt": "a", "top_p": 1.5})", 400, "top_p", "top_p = 1.5 is outside (0, 1]"},
        Case{"SeedNegative", false, R"({"prompt": "a", "seed": -1})", 400, "seed", "seed = -1 is negative"},
        Case{"SeedFraction", false, R"({"prompt": "a", "seed": 1.5})", 400, "seed",
             "seed must be an integer, not a number with a fraction"},
        Case{"NTwo", false, R"({"prompt": "a", "n": 2})", 400, "n", "n = 2 is not supported: one choice per request"},
        Case{"LogprobsInteger", false, R"({"prompt": "a", "logprobs": 5})", 400, "logprobs",
             "logprobs = 5 is not supported (only null or false)"},
        Case{"LogprobsTrue", true, "{" + kMsgs + R"(, "logprobs": true})", 400, "logprobs",
             "logprobs = true is not supported"},
        Case{"StopEmpty", false, R"({"prompt": "a", "stop": ""})", 400, "stop", "stop is an empty string"},
        Case{"StopTooMany", false, R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", 400, "stop",
             "stop has 5 sequences; at most 4 are allowed"},
        Case{"StopNotAString", false, R"({"prompt": "a", "stop": ["a", 3]})", 400, "stop[1]",
             "stop[1] must be a string, not an integer"},
        Case{"StopEmptyInList", false, R"({"prompt": "a", "stop": ["a", ""]})", 400, "stop[1]",
             "stop[1] is an empty string"},
        Case{"StopWrongType", false, R"({"prompt": "a", "stop": {"s": 1}})", 400, "stop",
             "stop must be a string or an array of up to 4 strings, not an object"},
        Case{"StopTokenIdPastVocab", false, R"({"prompt": "a", "stop_token_ids": [0, 7000]})", 400,
             "stop_token_ids[1]", "stop_token_ids[1] = 7000 is not a token id"},
        Case{"StopTokenIdsNotAList", false, R"({"prompt": "a", "stop_token_ids": 2})", 400, "stop_token_ids",
             "stop_token_ids must be an array of token ids, not an integer"},
        Case{"StreamString", false, R"({"prompt": "a", "stream": "yes"})", 400, "stream",
             "stream must be a boolean, not a string"},
        Case{"StreamOptionsWithoutStream", false, R"({"prompt": "a", "stream_options": {"include_usage": true}})",
             400, "stream_options", "stream_options is only allowed when stream is true"},
        Case{"IncludeUsageNotBool", false,
             R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}})", 400,
             "stream_options.include_usage", "stream_options.include_usage must be a boolean, not an integer"},
        Case{"StreamOptionsUnknownKey", false, R"({"prompt": "a", "stream": true, "stream_options": {"x": 1}})",
             400, "stream_options.x", "unknown field 'stream_options.x'; allowed: include_usage"},
        Case{"UnknownField", false, R"({"prompt": "a", "best_of": 2})", 400, "best_of", "unknown field 'best_of'"},
        Case{"ModelNotAString", false, R"({"prompt": "a", "model": 3})", 400, "model",
             "model must be a string, not an integer"},
        Case{"ReturnTokenIdsNotBool", false, R"({"prompt": "a", "return_token_ids": 1})", 400, "return_token_ids",
             "return_token_ids must be a boolean, not an integer"},
        Case{"TopKOn", false, R"({"prompt": "a", "top_k": 40})", 400, "top_k",
             "top_k = 40 is not supported (only -1 or 0: tandem samples with temperature and top_p)"},
        Case{"PresencePenaltyOn", true, R"({"messages": [{"role": "user", "content": "a"}], "presence_penalty": 0.5})",
             400, "presence_penalty", "presence_penalty = 0.5 is not supported (only 0"},
        Case{"RepetitionPenaltyOn", false, R"({"prompt": "a", "repetition_penalty": 1.1})", 400, "repetition_penalty",
             "repetition_penalty = 1.1 is not supported (only 1"},
        Case{"MinPNotANumber", false, R"({"prompt": "a", "min_p": "0"})", 400, "min_p",
             "min_p must be a number, not a string"},
        Case{"IgnoreEosNotBool", true, R"({"messages": [{"role": "user", "content": "a"}], "ignore_eos": "yes"})",
             400, "ignore_eos", "ignore_eos must be a boolean, not a string"},
        Case{"SpeculativeNotBool", false, R"({"prompt": "a", "speculative": "no"})", 400, "speculative",
             "speculative must be a boolean, not a string"},
        Case{"ChatNoMessages", true, R"({"model": "m"})", 400, "messages", "messages is required"},
        Case{"ChatMessagesNotAList", true, R"({"messages": {"role": "user"}})", 400, "messages",
             "messages must be an array of messages, not an object"},
        Case{"ChatMessagesEmpty", true, R"({"messages": []})", 400, "messages", "messages is empty"},
        Case{"ChatMessageNotAnObject", true, R"({"messages": ["hi"]})", 400, "messages[0]",
             "messages[0] must be an object with role and content, not a string"},
        Case{"ChatToolRole", true, R"({"messages": [{"role": "tool", "content": "x"}]})", 400, "messages[0].role",
             "messages[0].role = \"tool\" is not supported; allowed: \"system\", \"user\", \"assistant\""},
        Case{"ChatNoRole", true, R"({"messages": [{"content": "x"}]})", 400, "messages[0].role",
             "messages[0].role is required"},
        Case{"ChatNoContent", true, R"({"messages": [{"role": "user"}]})", 400, "messages[0].content",
             "messages[0].content is required"},
        Case{"ChatContentNumber", true, R"({"messages": [{"role": "user", "content": 5}]})", 400,
             "messages[0].content",
             "messages[0].content must be a string or an array of text parts, not an integer"},
        Case{"ChatImagePart", true,
             R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
             400, "messages[0].content[0].type",
             "messages[0].content[0].type = \"image_url\" is not supported; only text parts are"},
        Case{"ChatPartWithoutText", true, R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", 400,
             "messages[0].content[0].text", "messages[0].content[0].text must be a string"},
        Case{"ChatToolCalls", true,
             R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "", "tool_calls": []}]})",
             400, "messages[1].tool_calls", "unknown field 'messages[1].tool_calls'; allowed: role, content, name"},
        Case{"ChatBothMaxTokens", true, "{" + kMsgs + R"(, "max_tokens": 4, "max_completion_tokens": 4})", 400,
             "max_completion_tokens", "give max_tokens or max_completion_tokens, not both"},
        Case{"ChatMaxCompletionTokensHuge", true, "{" + kMsgs + R"(, "max_completion_tokens": 5000})", 422,
             "max_completion_tokens", "max_completion_tokens = 5000 exceeds the model's context of 1024 tokens"},
        Case{"ChatKwargsReserved", true, "{" + kMsgs + R"(, "chat_template_kwargs": {"add_generation_prompt": false}})",
             400, "chat_template_kwargs.add_generation_prompt",
             "chat_template_kwargs.add_generation_prompt is set by the server"},
        Case{"ChatKwargsNotAnObject", true, "{" + kMsgs + R"(, "chat_template_kwargs": [1]})", 400,
             "chat_template_kwargs", "chat_template_kwargs must be an object, not an array"},
        Case{"ChatPromptField", true, "{" + kMsgs + R"(, "prompt": "x"})", 400, "prompt", "unknown field 'prompt'"},
        Case{"CompletionMessagesField", false, R"({"prompt": "a", "messages": []})", 400, "messages",
             "unknown field 'messages'"}),
    [](const ::testing::TestParamInfo<Case>& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace tandem::coordinator

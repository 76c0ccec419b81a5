// What POST /v1/completions and /v1/chat/completions bodies parse into (parse_completion.h), before
// tokenization: the prompt as text or token ids, or the chat messages, and the OpenAI sampling, stop and
// streaming fields with tandem's `speculative` extension.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::coordinator {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;  // a string, or the text parts joined with "\n" (as vLLM joins them)
  std::optional<std::string> name;
};

struct CompletionRequest {
  bool chat = false;
  std::optional<std::string> model;
  std::string prompt_text;                         // /v1/completions, when given as text
  std::optional<std::vector<uint32_t>> prompt_ids;  // /v1/completions, when given as token ids (checked < vocab)
  std::vector<ChatMessage> messages;                // /v1/chat/completions
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::optional<uint32_t> max_tokens;  // absent: 16 for completions (OpenAI), the rest of the context for chat
  std::string max_tokens_field = "max_tokens";  // or "max_completion_tokens" (chat), for messages
  float temperature = 1.0f;            // OpenAI's default
  float top_p = 1.0f;
  std::optional<uint64_t> seed;        // absent: a random one
  std::vector<std::string> stop;       // up to 4, non-empty; the text is cut before the first one
  std::vector<uint32_t> stop_token_ids;  // vLLM's; end the request, not part of the text
  bool ignore_eos = false;  // vLLM's and SGLang's: the model's EOS ids do not end the request (benchmarks' fixed
                            // output lengths); stop_token_ids and stop strings still do
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool return_token_ids = false;
  bool speculative = true;     // tandem: false decodes this request without drafts
  std::optional<std::string> user;
};

// What a body is checked against before tokenization.
struct CompletionLimits {
  uint32_t vocab = 0;        // token ids must be below it
  uint32_t max_context = 0;  // prompt + max_tokens must fit (GenerationService::max_context)
};

}  // namespace tandem::coordinator

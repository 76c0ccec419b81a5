// The bodies of /v1/completions and /v1/chat/completions answers, as OpenAI shapes them: the whole JSON
// answer, and for streams the server-sent events (`data: {...}\n\n` chunks, the usage chunk, an error
// event, `data: [DONE]`). vLLM's `token_ids` / `prompt_token_ids` when asked for; `usage.speculative`
// is tandem's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/api_types.h"
#include "coordinator/generation_service.h"

namespace tandem::coordinator {

// What every chunk of one answer repeats.
struct AnswerIdentity {
  std::string id;        // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;   // Unix seconds
  std::string model;
  bool chat = false;
};

struct AnswerUsage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  SpeculativeStats stats;
};

// The non-streamed answer. `token_ids` / `prompt_ids` are included when given.
std::string completion_body(const AnswerIdentity& who, const std::string& text, const char* finish_reason,
                            const std::vector<uint32_t>* token_ids, const std::vector<uint32_t>* prompt_ids,
                            const AnswerUsage& usage);
// A stream chunk: text (chat: delta.content), the finish reason or null, the round's ids when given.
// A chat stream's first chunk (`role`) carries delta.role = "assistant".
std::string chunk_event(const AnswerIdentity& who, const std::string& text, const char* finish_reason,
                        const std::vector<uint32_t>* token_ids, bool role = false);
std::string usage_event(const AnswerIdentity& who, const AnswerUsage& usage);  // choices: [], usage
std::string error_event(const ApiError& error);  // data: {"error": {...}}
inline constexpr const char* kDoneEvent = "data: [DONE]\n\n";

}  // namespace tandem::coordinator

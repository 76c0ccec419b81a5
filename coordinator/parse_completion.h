// Parsing and checking /v1/completions and /v1/chat/completions bodies at the edge (OpenAI's fields, as
// README "HTTP API" lists them): every problem is an ApiError naming the field in `param` (400 malformed
// or unsupported, 422 past the model's context). Unknown fields are errors, as for /v1/decide.
#pragma once

#include <string_view>

#include "coordinator/api_types.h"
#include "coordinator/completion_types.h"

namespace tandem::coordinator {

ApiResult<CompletionRequest> parse_completion_request(std::string_view body, const CompletionLimits& limits);
ApiResult<CompletionRequest> parse_chat_request(std::string_view body, const CompletionLimits& limits);

}  // namespace tandem::coordinator

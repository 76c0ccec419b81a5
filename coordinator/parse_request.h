// Parsing and checking /v1/score and /v1/decide bodies at the edge (style.md "check once at the
// edge"): every problem is an ApiError naming the field ("sequences[3].markers[1]") with the status
// that fits (400 malformed, 404 unknown model, 413 too large, 422 too long for the model).
#pragma once

#include <string_view>

#include "coordinator/api_types.h"

namespace tandem::coordinator {

ApiResult<ScoreRequest> parse_score_request(std::string_view body, const RequestLimits& limits);
ApiResult<DecideRequest> parse_decide_request(std::string_view body, const RequestLimits& limits);

// The question type of a name ("choice", "score", "noul") or index (0..2); -1 when neither.
int question_type(std::string_view name);

}  // namespace tandem::coordinator

// Committing tokens to a request: the one place that applies max_tokens and stop ids.
#pragma once

#include <cstdint>

#include "engine/core/result.h"
#include "engine/spec/spec.h"

namespace tandem::spec {

// A request a round may run: prefilled, not finished, with the bonus token at `start` (spec.h's invariant).
Status check_round_ready(const Request& r);

// Appends a committed token; returns false when the request has finished (max tokens or a stop id;
// the token that ends it is kept).
bool commit_token(Request& r, uint32_t token);

}  // namespace tandem::spec

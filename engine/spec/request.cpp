// Request creation (parameter checks at the edge) and token commits.
#include <algorithm>
#include <cmath>

#include "engine/spec/request_impl.h"

namespace tandem::spec {

const char* to_string(Finish f) {
  switch (f) {
    case Finish::kNone: return "none";
    case Finish::kLength: return "length";
    case Finish::kStop: return "stop";
  }
  return "?";
}

Result<Request> make_request(RequestParams params, uint32_t slot, uint32_t vocab) {
  if (params.prompt.empty()) return Error(ErrorKind::kInvalidArgument, "prompt: at least one token is needed");
  for (size_t i = 0; i < params.prompt.size(); ++i) {
    if (params.prompt[i] >= vocab) {
      return Error::make(ErrorKind::kInvalidArgument, "prompt[{}] = {} is outside the vocabulary of {} tokens", i,
                         params.prompt[i], vocab);
    }
  }
  for (size_t i = 0; i < params.stop_ids.size(); ++i) {
    if (params.stop_ids[i] >= vocab) {
      return Error::make(ErrorKind::kInvalidArgument, "stop_ids[{}] = {} is outside the vocabulary of {} tokens", i,
                         params.stop_ids[i], vocab);
    }
  }
  if (params.max_tokens == 0) return Error(ErrorKind::kInvalidArgument, "max_tokens must be at least 1");
  const SamplingParams& s = params.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
    return Error::make(ErrorKind::kInvalidArgument, "temperature {} must be a finite number >= 0", s.temperature);
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return Error::make(ErrorKind::kInvalidArgument, "top_p {} must be in (0, 1]", s.top_p);
  }
  Request r;
  r.slot = slot;
  r.prompt_len = static_cast<uint32_t>(params.prompt.size());
  r.tokens = params.prompt;
  r.params = std::move(params);
  return r;
}

Status check_round_ready(const Request& r) {
  if (!r.active()) return Error::make(ErrorKind::kInvalidArgument, "slot {}: the request has finished", r.slot);
  if (r.tokens.size() != size_t{r.start} + 1 || r.start < r.prompt_len) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "slot {}: {} tokens with start {} (prompt {}): the request is not prefilled", r.slot,
                       r.tokens.size(), r.start, r.prompt_len);
  }
  return {};
}

bool commit_token(Request& r, uint32_t token) {
  r.tokens.push_back(token);
  const auto& stops = r.params.stop_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    r.finish = Finish::kStop;
  } else if (r.tokens.size() - r.prompt_len >= r.params.max_tokens) {
    r.finish = Finish::kLength;
  }
  return r.active();
}

}  // namespace tandem::spec

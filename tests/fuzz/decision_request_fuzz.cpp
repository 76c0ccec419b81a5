// libFuzzer target: a /v1/decide or /v1/score body from the network, through both parsers with the limits
// of a served checkpoint (the shipped decision-tickets model's vocabulary and the default request limits).
// Nothing may crash, hang or trip ASan/UBSan; a body either parses or is an ApiError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "coordinator/parse_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);  // NOLINT: bytes as text
  tandem::coordinator::RequestLimits limits;
  limits.vocab = 1501;
  limits.max_sequences = 64;
  limits.max_questions = 32;
  limits.max_options = 16;
  limits.max_request_tokens = 8192;
  limits.max_sequence_tokens = 512;
  limits.max_sequence_markers = 64;
  limits.max_model_tokens = 512;
  limits.model_limit = "max_len 512";
  (void)tandem::coordinator::parse_decide_request(body, limits);
  (void)tandem::coordinator::parse_score_request(body, limits);
  return 0;
}

// What the HTTP routes exchange (serving.md "HTTP API"): errors as {"error": {"message", "type",
// "param"}} with their status, and the parsed forms of /v1/score and /v1/decide bodies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tandem::coordinator {

// Deepest nesting of arrays and objects a request body may have; deeper bodies are refused before parsing.
inline constexpr int kMaxJsonDepth = 32;

struct ApiError {
  unsigned status = 400;
  std::string message;
  std::string type;                  // "invalid_request_error", "queue_full", ...
  std::optional<std::string> param;  // the field at fault: "questions[2].options"
};
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
ApiError too_large(std::string message, std::optional<std::string> param = std::nullopt);
ApiError unprocessable(std::string message, std::optional<std::string> param = std::nullopt);
ApiError unavailable(std::string message);
std::string error_json(const ApiError& error);

// A value or the ApiError that answers the request instead.
template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

// One compat sequence to score: token ids, marker positions within it, question type 0..2.
struct SequenceInput {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> markers;
  uint8_t qtype = 0;
};

struct ScoreRequest {
  std::optional<std::string> model;
  std::vector<SequenceInput> sequences;
};

struct Question {
  std::string id;  // echoed back; "q<index>" when the request has none
  uint8_t qtype = 0;
  std::string question;
  std::vector<std::string> options;
};

struct DecideRequest {
  std::optional<std::string> model;
  std::string state;
  std::vector<Question> questions;
};

// The limits a body is checked against: the deployment's, and what the model and buckets can hold.
struct RequestLimits {
  uint32_t vocab = 0;
  uint32_t max_sequences = 0;       // per /v1/score request
  uint32_t max_questions = 0;       // per /v1/decide request
  uint32_t max_options = 0;
  uint32_t max_request_tokens = 0;
  uint32_t max_sequence_tokens = 0;   // one sequence must fit one batch
  uint32_t max_sequence_markers = 0;  // and one bucket
  uint32_t max_model_tokens = 0;      // and the checkpoint's length limits (0: none)
  std::string model_limit;            // which they are, for the message
};

}  // namespace tandem::coordinator

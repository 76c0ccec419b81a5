// ApiError constructors and the error body of serving.md: {"error": {"message", "type", "param"}}.
#include "coordinator/api_types.h"

#include <nlohmann/json.hpp>

namespace tandem::coordinator {

ApiError bad_request(std::string message, std::optional<std::string> param) {
  return {400, std::move(message), "invalid_request_error", std::move(param)};
}

ApiError too_large(std::string message, std::optional<std::string> param) {
  return {413, std::move(message), "request_too_large", std::move(param)};
}

ApiError unprocessable(std::string message, std::optional<std::string> param) {
  return {422, std::move(message), "unprocessable_request", std::move(param)};
}

ApiError unavailable(std::string message) { return {503, std::move(message), "unavailable", std::nullopt}; }

std::string error_json(const ApiError& e) {
  nlohmann::json j;
  j["error"]["message"] = e.message;
  j["error"]["type"] = e.type;
  j["error"]["param"] = e.param ? nlohmann::json(*e.param) : nlohmann::json(nullptr);
  // Replace, not throw, if a message quotes invalid UTF-8 from a request.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::coordinator

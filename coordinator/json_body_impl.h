// The JSON body helpers the request parsers share (parse_request.cpp, parse_completion.cpp): a body
// parsed without exceptions with every failure naming its field, unknown-key checks, and the wording of
// type errors. Internal to coordinator/.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "coordinator/api_types.h"

namespace tandem::coordinator {

// The body as a JSON object, or a 400 naming where the parser stopped ("messages[2].content").
ApiResult<nlohmann::json> parse_json_object(std::string_view body);
// A 400 for the first key of `obj` not in `keys`, listing the allowed ones.
std::optional<ApiError> check_keys(const nlohmann::json& obj, const std::string& path,
                                   std::initializer_list<const char*> keys);
// 400 "<path> must be <expected>, not <what it is>".
ApiError wrong_type(const std::string& path, const nlohmann::json& j, std::string_view expected);
const char* json_kind(const nlohmann::json& j);    // "a string", "an integer", ...
std::string json_shown(const nlohmann::json& j);  // its JSON text, shortened for a message

// Whether a Content-Type names JSON ("application/json", any parameters; none at all, as curl -d sends).
bool is_json_content_type(std::string_view type);

std::string at(const std::string& path, std::string_view key);  // "a.b"
std::string at(const std::string& path, size_t index);          // "a[3]"

}  // namespace tandem::coordinator

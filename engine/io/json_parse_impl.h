// Strict JSON for untrusted files (safetensors headers, config.json, index files): a duplicate key is an
// error (nlohmann silently keeps the last), nesting depth is capped, and no exception escapes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"

namespace tandem::io {

// Parses `text`; errors are kFormat and start with `origin` ("model.safetensors: header JSON: ...").
// A container nested deeper than `max_depth` levels is an error, so hostile input cannot exhaust memory
// through depth before any check runs.
Result<nlohmann::json> parse_json_strict(std::string_view text, std::string_view origin, size_t max_depth);

// The whole file at `path`, at most `max_bytes` long (a kFormat error names a longer one).
Result<std::string> read_file_capped(const std::string& path, size_t max_bytes);

// A short description of a value for error messages: scalars as JSON text (strings cut at 64 bytes),
// containers by kind and size; never a dump of a possibly huge or deeply nested value.
std::string describe_json(const nlohmann::json& value);

}  // namespace tandem::io

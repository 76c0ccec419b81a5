// Typed JSON member reads with file and key path in every message (json_fields_impl.h).
#include "engine/io/json_fields_impl.h"

#include <cmath>

#include "engine/io/json_parse_impl.h"

namespace tandem::io {

using nlohmann::json;

JsonLoc::JsonLoc(std::string origin, std::string path) : origin_(std::move(origin)), path_(std::move(path)) {}

JsonLoc JsonLoc::key(std::string_view name) const {
  return JsonLoc(origin_, path_.empty() ? std::string(name) : fmt::format("{}.{}", path_, name));
}

JsonLoc JsonLoc::index(size_t i) const { return JsonLoc(origin_, fmt::format("{}[{}]", path_, i)); }

Error JsonLoc::error(ErrorKind kind, std::string_view what) const {
  if (path_.empty()) return Error::make(kind, "{}: {}", origin_, what);
  return Error::make(kind, "{}: key \"{}\": {}", origin_, path_, what);
}

Result<uint64_t> json_to_uint(const json& v, const JsonLoc& loc, uint64_t lo, uint64_t hi) {
  const auto expected = [&] {
    return loc.error(ErrorKind::kFormat,
                     fmt::format("expected an integer in [{}, {}], found {}", lo, hi, describe_json(v)));
  };
  // Parsed non-negative integers are number_unsigned; values set from C++ ints are number_integer.
  if (!v.is_number_integer()) return expected();
  if (!v.is_number_unsigned() && v.get<int64_t>() < 0) return expected();
  const uint64_t x = v.get<uint64_t>();
  if (x < lo || x > hi) return expected();
  return x;
}

Result<uint32_t> json_to_u32(const json& v, const JsonLoc& loc, uint32_t lo, uint32_t hi) {
  TANDEM_ASSIGN(const uint64_t x, json_to_uint(v, loc, lo, hi));
  return static_cast<uint32_t>(x);
}

Result<double> json_to_number(const json& v, const JsonLoc& loc, double lo, double hi) {
  if (v.is_number()) {
    const double x = v.get<double>();
    if (std::isfinite(x) && x >= lo && x <= hi) return x;
  }
  return loc.error(ErrorKind::kFormat,
                   fmt::format("expected a number in [{}, {}], found {}", lo, hi, describe_json(v)));
}

Result<bool> json_to_bool(const json& v, const JsonLoc& loc) {
  if (v.is_boolean()) return v.get<bool>();
  return loc.error(ErrorKind::kFormat, fmt::format("expected true or false, found {}", describe_json(v)));
}

Result<std::string> json_to_string(const json& v, const JsonLoc& loc) {
  if (v.is_string()) return v.get<std::string>();
  return loc.error(ErrorKind::kFormat, fmt::format("expected a string, found {}", describe_json(v)));
}

Result<JsonFields> JsonFields::of(const json& value, JsonLoc loc) {
  if (!value.is_object()) {
    return loc.error(ErrorKind::kFormat, fmt::format("expected an object, found {}", describe_json(value)));
  }
  return JsonFields(&value, std::move(loc));
}

const json* JsonFields::find(std::string_view key) const {
  const auto it = obj_->find(key);
  if (it == obj_->end() || it->is_null()) return nullptr;
  return &*it;
}

Error JsonFields::missing(std::string_view key) const {
  return loc(key).error(ErrorKind::kNotFound, "missing (required)");
}

Result<uint32_t> JsonFields::u32(std::string_view key, uint32_t lo, uint32_t hi) const {
  const json* v = find(key);
  if (!v) return missing(key);
  return json_to_u32(*v, loc(key), lo, hi);
}

Result<uint32_t> JsonFields::u32_or(std::string_view key, uint32_t fallback, uint32_t lo, uint32_t hi) const {
  const json* v = find(key);
  if (!v) return fallback;
  return json_to_u32(*v, loc(key), lo, hi);
}

Result<std::optional<uint32_t>> JsonFields::opt_u32(std::string_view key, uint32_t lo, uint32_t hi) const {
  const json* v = find(key);
  if (!v) return std::optional<uint32_t>();
  TANDEM_ASSIGN(const uint32_t x, json_to_u32(*v, loc(key), lo, hi));
  return std::optional<uint32_t>(x);
}

Result<std::optional<double>> JsonFields::opt_number(std::string_view key, double lo, double hi) const {
  const json* v = find(key);
  if (!v) return std::optional<double>();
  TANDEM_ASSIGN(const double x, json_to_number(*v, loc(key), lo, hi));
  return std::optional<double>(x);
}

Result<float> JsonFields::f32_or(std::string_view key, float fallback, double lo, double hi) const {
  TANDEM_ASSIGN(const std::optional<double> x, opt_number(key, lo, hi));
  return x ? static_cast<float>(*x) : fallback;
}

Result<bool> JsonFields::bool_or(std::string_view key, bool fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  return json_to_bool(*v, loc(key));
}

Result<std::optional<std::string>> JsonFields::opt_string(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::optional<std::string>();
  TANDEM_ASSIGN(std::string s, json_to_string(*v, loc(key)));
  return std::optional<std::string>(std::move(s));
}

Result<std::optional<JsonFields>> JsonFields::opt_object(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::optional<JsonFields>();
  TANDEM_ASSIGN(JsonFields fields, JsonFields::of(*v, loc(key)));
  return std::optional<JsonFields>(std::move(fields));
}

}  // namespace tandem::io

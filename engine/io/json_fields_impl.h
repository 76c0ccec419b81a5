// Typed reads of JSON members for config files: present, of the right type, in range, with the file and
// the key path in every message: `config.json: key "dflash_config.block_size": expected an integer in
// [2, 4096], found "16"`. A member that is null counts as absent (HF writes None as null).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"

namespace tandem::io {

// Where a value sits: the file and the key path from the root ("rope_parameters.full_attention",
// "layer_types[3]"; empty at the root).
class JsonLoc {
 public:
  explicit JsonLoc(std::string origin, std::string path = {});
  JsonLoc key(std::string_view name) const;
  JsonLoc index(size_t i) const;
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }
  // `{origin}: key "{path}": {what}`, or `{origin}: {what}` at the root.
  Error error(ErrorKind kind, std::string_view what) const;

 private:
  std::string origin_;
  std::string path_;
};

inline constexpr uint64_t kJsonU32Max = std::numeric_limits<uint32_t>::max();

// Conversions of one value at `loc`; a wrong type or a value outside [lo, hi] is a kFormat error.
Result<uint64_t> json_to_uint(const nlohmann::json& v, const JsonLoc& loc, uint64_t lo, uint64_t hi);
Result<uint32_t> json_to_u32(const nlohmann::json& v, const JsonLoc& loc, uint32_t lo = 0,
                             uint32_t hi = std::numeric_limits<uint32_t>::max());
Result<double> json_to_number(const nlohmann::json& v, const JsonLoc& loc, double lo, double hi);
Result<bool> json_to_bool(const nlohmann::json& v, const JsonLoc& loc);
Result<std::string> json_to_string(const nlohmann::json& v, const JsonLoc& loc);

// The members of one JSON object (which must outlive this view).
class JsonFields {
 public:
  static Result<JsonFields> of(const nlohmann::json& value, JsonLoc loc);  // kFormat unless an object

  const nlohmann::json* find(std::string_view key) const;  // nullptr when absent or null
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const JsonLoc& loc() const { return loc_; }
  JsonLoc loc(std::string_view key) const { return loc_.key(key); }
  const nlohmann::json& value() const { return *obj_; }
  Error missing(std::string_view key) const;  // kNotFound naming the key

  Result<uint32_t> u32(std::string_view key, uint32_t lo = 0,
                       uint32_t hi = std::numeric_limits<uint32_t>::max()) const;
  Result<uint32_t> u32_or(std::string_view key, uint32_t fallback, uint32_t lo = 0,
                          uint32_t hi = std::numeric_limits<uint32_t>::max()) const;
  Result<std::optional<uint32_t>> opt_u32(std::string_view key, uint32_t lo = 0,
                                          uint32_t hi = std::numeric_limits<uint32_t>::max()) const;
  Result<std::optional<double>> opt_number(std::string_view key, double lo, double hi) const;
  Result<float> f32_or(std::string_view key, float fallback, double lo, double hi) const;
  Result<bool> bool_or(std::string_view key, bool fallback) const;
  Result<std::optional<std::string>> opt_string(std::string_view key) const;
  Result<std::optional<JsonFields>> opt_object(std::string_view key) const;

 private:
  JsonFields(const nlohmann::json* obj, JsonLoc loc) : obj_(obj), loc_(std::move(loc)) {}
  const nlohmann::json* obj_;
  JsonLoc loc_;
};

}  // namespace tandem::io

// YamlMap and the scalar readers: the checks every deployment field goes through (yaml_map_impl.h).
#include "config/yaml_map_impl.h"

#include <charconv>

#include <fmt/format.h>

namespace tandem::config {
namespace {

const char* node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined: return "nothing";
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
  }
  return "an unknown node";
}

std::string join(const std::set<std::string, std::less<>>& keys) {
  std::string out;
  for (const auto& k : keys) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Error yaml_error(const YamlPlace& place, const YAML::Node& node, std::string_view problem) {
  std::string where = place.origin ? *place.origin : std::string("<yaml>");
  if (node.IsDefined()) {
    const YAML::Mark mark = node.Mark();
    if (mark.line >= 0) where += fmt::format(":{}:{}", mark.line + 1, mark.column + 1);
  }
  const std::string path = place.path.empty() ? "(top level)" : place.path;
  return Error::make(ErrorKind::kFormat, "{}: {}: {}", where, path, problem);
}

Result<std::string> yaml_scalar(const YamlPlace& place, const YAML::Node& node, std::string_view expected) {
  if (!node.IsScalar()) {
    return yaml_error(place, node, fmt::format("expected {}, found {}", expected, node_kind(node)));
  }
  return node.Scalar();
}

Result<uint64_t> yaml_uint(const YamlPlace& place, const YAML::Node& node, uint64_t min, uint64_t max) {
  const std::string expected = fmt::format("an integer in {}..{}", min, max);
  TANDEM_ASSIGN(std::string text, yaml_scalar(place, node, expected));
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) return yaml_error(place, node, fmt::format("'{}' is not {}", text, expected));
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value < min || value > max) {
    return yaml_error(place, node, fmt::format("{} is out of range; allowed: {}", text, expected));
  }
  return value;
}

Result<YamlMap> YamlMap::of(const YAML::Node& node, YamlPlace place) {
  if (!node.IsDefined() || node.IsNull()) return YamlMap(YAML::Node(YAML::NodeType::Map), std::move(place));
  if (!node.IsMap()) {
    return yaml_error(place, node, fmt::format("expected a mapping, found {}", node_kind(node)));
  }
  // yaml-cpp keeps both entries of a repeated key; a typo'd duplicate must not pass unnoticed.
  std::set<std::string, std::less<>> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) return yaml_error(place, it->first, "keys must be plain names");
    if (!seen.insert(it->first.Scalar()).second) {
      YamlPlace at{place.origin, place.path.empty() ? it->first.Scalar() : place.path + "." + it->first.Scalar()};
      return yaml_error(at, it->first, "the key appears twice");
    }
  }
  return YamlMap(node, std::move(place));
}

bool YamlMap::has(std::string_view key) const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.Scalar() == key) return true;
  }
  return false;
}

YAML::Node YamlMap::get(std::string_view key) {
  known_.emplace(key);
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.Scalar() == key) return it->second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

YamlPlace YamlMap::child(std::string_view key) const {
  return {place_.origin, place_.path.empty() ? std::string(key) : fmt::format("{}.{}", place_.path, key)};
}

Result<uint64_t> YamlMap::uint(std::string_view key, uint64_t fallback, uint64_t min, uint64_t max) {
  YAML::Node n = get(key);
  if (!n.IsDefined()) return fallback;
  return yaml_uint(child(key), n, min, max);
}

Result<std::string> YamlMap::string(std::string_view key, std::string fallback) {
  YAML::Node n = get(key);
  if (!n.IsDefined()) return fallback;
  return yaml_scalar(child(key), n, "a string");
}

Result<std::string> YamlMap::required_string(std::string_view key) {
  YAML::Node n = get(key);
  if (!n.IsDefined()) return yaml_error(place_, node_, fmt::format("'{}' is required", key));
  TANDEM_ASSIGN(std::string text, yaml_scalar(child(key), n, "a string"));
  if (text.empty()) return yaml_error(child(key), n, "must not be empty");
  return text;
}

Result<std::string> YamlMap::choice(std::string_view key, std::string fallback,
                                    std::span<const std::string_view> allowed) {
  YAML::Node n = get(key);
  if (!n.IsDefined()) return fallback;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  TANDEM_ASSIGN(std::string text, yaml_scalar(child(key), n, fmt::format("one of {}", list)));
  for (auto a : allowed) {
    if (text == a) return text;
  }
  return yaml_error(child(key), n, fmt::format("'{}' is not allowed; allowed: {}", text, list));
}

Result<YamlMap> YamlMap::map(std::string_view key) {
  YAML::Node n = get(key);
  return YamlMap::of(n, child(key));
}

Status YamlMap::finish() const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string& key = it->first.Scalar();
    if (known_.count(key) == 0) {
      return yaml_error(child(key), it->first, fmt::format("unknown key; allowed keys here: {}", join(known_)));
    }
  }
  return ok_status();
}

}  // namespace tandem::config

// Reading one YAML mapping with its path: typed fields with ranges and allowed values, and, when done,
// an error for every key nobody asked for. Messages are "file:line:col: path: problem; allowed: ...".
// Internal to config/ (load_deployment.cpp); not an API for other rooms.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace tandem::config {

// Where a node sits: the file and the dotted path ("ranks[2].backend").
struct YamlPlace {
  const std::string* origin = nullptr;
  std::string path;
};

// A kFormat error pointing at `node` (its line and column when it has a mark).
Error yaml_error(const YamlPlace& place, const YAML::Node& node, std::string_view problem);

// The scalar text of a node as YAML wrote it ("8080", "cpu"), or an error naming what it is instead.
Result<std::string> yaml_scalar(const YamlPlace& place, const YAML::Node& node, std::string_view expected);
// An integer in [min, max]; "8080" yes, "8080.5", "0x10", "-1" (when min is 0) no.
Result<uint64_t> yaml_uint(const YamlPlace& place, const YAML::Node& node, uint64_t min, uint64_t max);

class YamlMap {
 public:
  // A missing or null node reads as an empty map; anything else but a map is an error.
  static Result<YamlMap> of(const YAML::Node& node, YamlPlace place);

  const YamlPlace& place() const { return place_; }
  const YAML::Node& node() const { return node_; }
  bool has(std::string_view key) const;
  // The child, recorded as known; an undefined node when absent.
  YAML::Node get(std::string_view key);
  YamlPlace child(std::string_view key) const;

  Result<uint64_t> uint(std::string_view key, uint64_t fallback, uint64_t min, uint64_t max);
  Result<std::string> string(std::string_view key, std::string fallback);
  Result<std::string> required_string(std::string_view key);
  // One of `allowed`; the fallback when absent.
  Result<std::string> choice(std::string_view key, std::string fallback,
                             std::span<const std::string_view> allowed);
  Result<YamlMap> map(std::string_view key);

  // Errors on the first key not asked for, listing the keys this map knows.
  Status finish() const;

 private:
  YamlMap(YAML::Node node, YamlPlace place) : node_(std::move(node)), place_(std::move(place)) {}
  YAML::Node node_;
  YamlPlace place_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace tandem::config

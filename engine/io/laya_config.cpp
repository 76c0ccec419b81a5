// Laya's rl_agent_config.json (scorer.md §1): head depth, input budgets and calibration temperatures.
// Laya writes more keys than tandem reads; unknown top-level keys are ignored, known ones are checked.
#include "engine/io/laya_config.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "engine/io/hf_config.h"  // read_json_file
#include "engine/io/json_fields_impl.h"
#include "engine/io/json_parse_impl.h"

namespace tandem::io {
namespace {

using nlohmann::json;

// Calibration temperatures divide logits: positive and finite, within a range no calibration leaves.
constexpr double kMinTemperature = 1e-3;
constexpr double kMaxTemperature = 1e3;
constexpr uint32_t kMaxOptions = 255;  // ActFeatures encodes the option count as kf / 255

Result<float> parse_temperature(const json& v, const JsonLoc& loc) {
  TANDEM_ASSIGN(const double t, json_to_number(v, loc, kMinTemperature, kMaxTemperature));
  return static_cast<float>(t);
}

// The index of a question type name in kQuestionTypes, or an error naming the allowed names.
Result<size_t> question_type_index(std::string_view name, const JsonLoc& loc) {
  for (size_t i = 0; i < kQuestionTypes.size(); ++i) {
    if (name == kQuestionTypes[i]) return i;
  }
  return loc.error(ErrorKind::kFormat,
                   fmt::format("unknown question type; expected one of {}, {}, {}", kQuestionTypes[0],
                               kQuestionTypes[1], kQuestionTypes[2]));
}

// temperature: [choice, score, noul], or {"choice": .., "score": .., "noul": ..}.
Status parse_temperatures(const json& v, const JsonLoc& loc, LayaAgentConfig& c) {
  if (v.is_array()) {
    if (v.size() != kQuestionTypes.size()) {
      return loc.error(ErrorKind::kFormat, fmt::format("expected {} temperatures (choice, score, noul), found {}",
                                                       kQuestionTypes.size(), v.size()));
    }
    for (size_t i = 0; i < v.size(); ++i) {
      TANDEM_ASSIGN(c.temperature[i], parse_temperature(v[i], loc.index(i)));
    }
    return ok_status();
  }
  if (!v.is_object()) {
    return loc.error(ErrorKind::kFormat, fmt::format("expected a list of 3 numbers or an object by question "
                                                     "type, found {}", describe_json(v)));
  }
  for (const auto& [name, value] : v.items()) TANDEM_TRY(question_type_index(name, loc.key(name)));
  for (size_t i = 0; i < kQuestionTypes.size(); ++i) {
    const auto it = v.find(kQuestionTypes[i]);
    if (it == v.end()) return loc.key(kQuestionTypes[i]).error(ErrorKind::kNotFound, "missing (required)");
    TANDEM_ASSIGN(c.temperature[i], parse_temperature(*it, loc.key(kQuestionTypes[i])));
  }
  return ok_status();
}

// temperature_by_options: {"choice": {"4": 1.3, ...}, ...}, question type -> option count -> temperature.
Status parse_temperature_by_options(const json& v, const JsonLoc& loc, LayaAgentConfig& c) {
  TANDEM_ASSIGN(const JsonFields types, JsonFields::of(v, loc));
  for (const auto& [name, per_count] : types.value().items()) {
    const JsonLoc type_loc = loc.key(name);
    TANDEM_ASSIGN(const size_t q, question_type_index(name, type_loc));
    if (per_count.is_null()) continue;
    TANDEM_ASSIGN(const JsonFields counts, JsonFields::of(per_count, type_loc));
    for (const auto& [count_text, temperature] : counts.value().items()) {
      const JsonLoc count_loc = type_loc.key(count_text);
      uint32_t count = 0;
      const char* first = count_text.data();
      const char* last = first + count_text.size();
      const auto [end, ec] = std::from_chars(first, last, count);
      if (ec != std::errc() || end != last || count < 1 || count > kMaxOptions) {
        return count_loc.error(ErrorKind::kFormat,
                               fmt::format("expected an option count in [1, {}] as the key", kMaxOptions));
      }
      TANDEM_ASSIGN(const float t, parse_temperature(temperature, count_loc));
      c.temperature_by_options[q][count] = t;
    }
  }
  return ok_status();
}

}  // namespace

Result<LayaAgentConfig> parse_laya_config(const json& j, const std::string& origin) {
  TANDEM_ASSIGN(const JsonFields f, JsonFields::of(j, JsonLoc(origin)));
  LayaAgentConfig c;
  TANDEM_ASSIGN(c.head_layers, f.u32_or("head_layers", c.head_layers, 0, 64));
  TANDEM_ASSIGN(c.max_len, f.u32_or("max_len", c.max_len, 1, 1u << 20));
  TANDEM_ASSIGN(c.head_max_len, f.u32_or("head_max_len", c.head_max_len, 1, 1u << 20));
  if (const json* t = f.find("temperature")) {
    TANDEM_TRY(parse_temperatures(*t, f.loc("temperature"), c));
    c.has_temperature = true;
  }
  if (const json* t = f.find("temperature_by_options")) {
    TANDEM_TRY(parse_temperature_by_options(*t, f.loc("temperature_by_options"), c));
  }
  return c;
}

Result<LayaAgentConfig> load_laya_config(const std::string& path) {
  TANDEM_ASSIGN(const json j, read_json_file(path));
  return parse_laya_config(j, path);
}

}  // namespace tandem::io

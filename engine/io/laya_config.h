// Laya's rl_agent_config.json: head depth, input budgets and calibration temperatures (scorer.md §1).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/core/result.h"

namespace tandem::io {

// Question types in the order of the temperature list: choice, score, noul.
inline constexpr std::array<const char*, 3> kQuestionTypes = {"choice", "score", "noul"};

struct LayaAgentConfig {
  uint32_t head_layers = 2;
  uint32_t max_len = 512;
  uint32_t head_max_len = 192;
  std::array<float, 3> temperature = {1.0f, 1.0f, 1.0f};  // per question type
  bool has_temperature = false;  // the file named one (else the checkpoint's buffer decides)
  // Optional: per question type, a temperature per option count ({"choice": {"4": 1.3}}).
  std::array<std::map<uint32_t, float>, 3> temperature_by_options;
};
Result<LayaAgentConfig> parse_laya_config(const nlohmann::json& j, const std::string& origin);
Result<LayaAgentConfig> load_laya_config(const std::string& path);

}  // namespace tandem::io

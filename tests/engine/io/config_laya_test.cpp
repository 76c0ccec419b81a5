// engine/io Laya rl_agent_config.json: both temperature spellings, per-option-count temperatures,
// ignored unknown keys, and malformed files rejected naming the key.
#include "engine/io/laya_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/engine/io/safetensors_test_util.h"

namespace tandem::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const char* const kLaya = R"({
  "head_layers": 2, "max_len": 512, "head_max_len": 192, "temperature": [1.6369, 1.2514, 1.9834],
  "lr": 0.0001, "epochs": 3, "base_model": "answerdotai/ModernBERT-large", "notes": {"anything": [1, 2]}
})";

TEST(LayaConfig, ListAndObjectTemperaturesAgree) {
  auto list = parse_laya_config(json::parse(kLaya), "rl_agent_config.json");
  ASSERT_TRUE(list.ok()) << list.error().message();
  EXPECT_EQ(list->head_layers, 2u);
  EXPECT_EQ(list->max_len, 512u);
  EXPECT_EQ(list->head_max_len, 192u);
  EXPECT_TRUE(list->has_temperature);
  EXPECT_EQ(list->temperature, (std::array<float, 3>{1.6369f, 1.2514f, 1.9834f}));
  for (const auto& by_count : list->temperature_by_options) EXPECT_TRUE(by_count.empty());

  json j = json::parse(kLaya);
  j["temperature"] = {{"noul", 1.9834}, {"choice", 1.6369}, {"score", 1.2514}};
  auto object = parse_laya_config(j, "rl_agent_config.json");
  ASSERT_TRUE(object.ok()) << object.error().message();
  EXPECT_EQ(object->temperature, list->temperature);
}

TEST(LayaConfig, TemperatureByOptionsAndDefaults) {
  json j = {{"max_len", 1024}, {"head_max_len", 256},
            {"temperature_by_options", {{"choice", {{"2", 1.1}, {"4", 1.3}}}, {"noul", {{"2", 0.9}}}}}};
  auto c = parse_laya_config(j, "rl_agent_config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->head_layers, 2u);  // default
  EXPECT_EQ(c->max_len, 1024u);
  EXPECT_FALSE(c->has_temperature);
  EXPECT_EQ(c->temperature, (std::array<float, 3>{1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(c->temperature_by_options[0], (std::map<uint32_t, float>{{2, 1.1f}, {4, 1.3f}}));
  EXPECT_TRUE(c->temperature_by_options[1].empty());
  EXPECT_EQ(c->temperature_by_options[2], (std::map<uint32_t, float>{{2, 0.9f}}));
}

TEST(LayaConfig, MalformedConfigs) {
  const struct {
    const char* label;
    std::function<void(json&)> edit;
    ErrorKind kind;
    std::string needle;
  } cases[] = {
      {"temperature of wrong length", [](json& j) { j["temperature"] = {1.0, 2.0}; }, ErrorKind::kFormat,
       "key \"temperature\": expected 3 temperatures (choice, score, noul), found 2"},
      {"temperature not a number", [](json& j) { j["temperature"][1] = "1.2"; }, ErrorKind::kFormat,
       "key \"temperature[1]\": expected a number"},
      {"temperature zero", [](json& j) { j["temperature"][2] = 0; }, ErrorKind::kFormat,
       "key \"temperature[2]\": expected a number"},
      {"temperature a string", [](json& j) { j["temperature"] = "1.0"; }, ErrorKind::kFormat,
       "key \"temperature\": expected a list of 3 numbers or an object"},
      {"temperature object missing a type", [](json& j) { j["temperature"] = {{"choice", 1.0}, {"score", 1.0}}; },
       ErrorKind::kNotFound, "key \"temperature.noul\": missing"},
      {"temperature object with an unknown type",
       [](json& j) { j["temperature"] = {{"choice", 1.0}, {"score", 1.0}, {"noul", 1.0}, {"rank", 1.0}}; },
       ErrorKind::kFormat, "key \"temperature.rank\": unknown question type"},
      {"head_layers a string", [](json& j) { j["head_layers"] = "2"; }, ErrorKind::kFormat,
       "key \"head_layers\": expected an integer in [0, 64], found \"2\""},
      {"max_len zero", [](json& j) { j["max_len"] = 0; }, ErrorKind::kFormat, "key \"max_len\": expected an integer"},
      {"by_options not an object", [](json& j) { j["temperature_by_options"] = {1.0}; }, ErrorKind::kFormat,
       "key \"temperature_by_options\": expected an object"},
      {"by_options unknown type", [](json& j) { j["temperature_by_options"] = {{"pick", {{"2", 1.0}}}}; },
       ErrorKind::kFormat, "key \"temperature_by_options.pick\": unknown question type"},
      {"by_options count not a number", [](json& j) { j["temperature_by_options"] = {{"choice", {{"four", 1.0}}}}; },
       ErrorKind::kFormat, "key \"temperature_by_options.choice.four\": expected an option count in [1, 255]"},
      {"by_options count zero", [](json& j) { j["temperature_by_options"] = {{"choice", {{"0", 1.0}}}}; },
       ErrorKind::kFormat, "key \"temperature_by_options.choice.0\": expected an option count"},
      {"by_options value negative", [](json& j) { j["temperature_by_options"] = {{"score", {{"5", -1.0}}}}; },
       ErrorKind::kFormat, "key \"temperature_by_options.score.5\": expected a number"},
      {"not an object", [](json& j) { j = 3; }, ErrorKind::kFormat, "expected an object, found 3"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.label);
    json j = json::parse(kLaya);
    bad.edit(j);
    auto c = parse_laya_config(j, "laya/rl_agent_config.json");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().kind(), bad.kind) << c.error().message();
    EXPECT_THAT(c.error().message(), HasSubstr("laya/rl_agent_config.json: "));
    EXPECT_THAT(c.error().message(), HasSubstr(bad.needle));
  }
}

TEST(LayaConfig, LoadFromDisk) {
  testing::TempDir dir;
  testing::write_file(dir.file("rl_agent_config.json"), kLaya);
  auto c = load_laya_config(dir.file("rl_agent_config.json"));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->temperature[2], 1.9834f);
  testing::write_file(dir.file("bad.json"), R"({"temperature": [1, 2, 3], "temperature": [1, 2, 3]})");
  auto dup = load_laya_config(dir.file("bad.json"));
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.error().message(), HasSubstr("duplicate key \"temperature\""));
}

}  // namespace
}  // namespace tandem::io

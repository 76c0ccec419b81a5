// What the job tests under tests/launch feed their jobs and read back, so each test file keeps only
// what it asserts: the models' folders, CPU deployments (decision-tiny scorers, models/pylm generation),
// pylm-dflash's held-out prompts, prompt files and what plain decoding answers to them, the decision
// fixture's sequences with `tandem score`'s answers, and the JSON a command prints amid its log. Jobs
// themselves run through service_job.h. The including test defines TANDEM_BINARY.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/launch/service_job.h"

namespace tandem::testing {

inline const std::string kModels = TANDEM_SOURCE_DIR "/models/";
// The tiny decision model of the fixtures.
inline const std::string kDecisionTiny = TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny";

// A CPU deployment of the decision-tiny fixture model: the coordinator and `scorers` scorer ranks with
// one thread each, port 0, and `extra` YAML sections appended (limits, health, ...).
inline std::string cpu_deployment(int scorers, const std::string& extra = "") {
  std::string yaml = "server: {host: 127.0.0.1, port: 0}\n"
                     "backend: {name: cpu, threads: 1}\n"
                     "models:\n  scorer: {dir: " + kDecisionTiny + "}\n" + extra +
                     "ranks:\n  - role: coordinator\n";
  for (int i = 0; i < scorers; ++i) yaml += "  - role: scorer\n";
  return yaml;
}

// A CPU deployment (one thread a rank, port 0) of models/pylm with models/pylm-dflash, and
// models/decision-tickets when a rank scores: `generation` is the generation section's flow map,
// `roles` the ranks after the coordinator, `sections` more YAML lines (health, limits, ...).
inline std::string pylm_deployment(const std::string& generation, const std::vector<std::string>& roles,
                                   const std::string& sections = "") {
  std::string yaml = "server: {host: 127.0.0.1, port: 0}\n"
                     "backend: {name: cpu, threads: 1}\n"
                     "models:\n";
  bool scores = false;
  for (const std::string& r : roles) scores = scores || r == "scorer";
  if (scores) yaml += "  scorer: {dir: " + kModels + "decision-tickets}\n";
  yaml += "  target: {dir: " + kModels + "pylm}\n"
          "  drafter: {dir: " + kModels + "pylm-dflash}\n"
          "generation: " + generation + "\n" + sections + "ranks:\n  - role: coordinator\n";
  for (const std::string& r : roles) yaml += "  - role: " + r + "\n";
  return yaml;
}

// pylm-dflash's held-out prompts (its eval.json).
inline std::vector<std::vector<uint32_t>> held_out_prompts() {
  std::ifstream in(kModels + "pylm-dflash/eval.json");
  return nlohmann::json::parse(in).at("prompts").get<std::vector<std::vector<uint32_t>>>();
}

// One prompt a line, ids joined by commas, as `tandem generate --prompt-file` and tandem-gen-loadgen read.
inline void write_prompt_file(const std::filesystem::path& file, const std::vector<std::vector<uint32_t>>& prompts) {
  std::ofstream out(file);
  for (const auto& p : prompts) {
    for (size_t i = 0; i < p.size(); ++i) out << (i ? "," : "") << p[i];
    out << "\n";
  }
}

// Every sequence of the decision fixture (the model's reference inputs) of at most `max_tokens` tokens,
// as a `tandem score` input's "sequences".
inline nlohmann::json fixture_sequences(size_t max_tokens = 100000) {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/fixtures/decision/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  nlohmann::json seqs = nlohmann::json::array();
  for (const nlohmann::json& batch : ref.at("batches")) {
    for (const nlohmann::json& s : batch.at("sequences")) {
      if (s.at("ids").size() > max_tokens) continue;
      seqs.push_back({{"ids", s.at("ids")}, {"markers", s.at("markers")}, {"qtype", s.at("qtype")}});
    }
  }
  return seqs;
}

// The JSON object a command prints after its log lines: from the first '{' on (tandem score,
// tandem-loadgen); discarded when there is none.
inline nlohmann::json json_from_first_brace(const std::string& text) {
  const size_t begin = text.find('{');
  if (begin == std::string::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text.substr(begin), nullptr, false);
}

// The indented object `tandem generate` prints, as text: from its last line that is "{" to the last
// "}" (the log around it holds other lines); "" when there is none.
inline std::string last_json_text(const std::string& text) {
  const size_t last = text.rfind("\n{\n");
  const size_t begin = last == std::string::npos ? text.find("{\n") : last + 1;
  const size_t end = text.rfind("\n}");
  if (begin == std::string::npos || end == std::string::npos || end < begin) return "";
  return text.substr(begin, end + 2 - begin);
}

// The same, parsed; discarded when there is none.
inline nlohmann::json last_json_object(const std::string& text) {
  return nlohmann::json::parse(last_json_text(text), nullptr, false);
}

// `tandem score` with the decision-tiny model on `input` (a JSON object with "sequences"): its
// "sequences" list.
inline nlohmann::json tandem_score(const TempDir& dir, const nlohmann::json& input) {
  const auto in = dir.path() / "score-input.json";
  std::ofstream(in) << input.dump();
  auto r = run_command({TANDEM_BINARY, "score", "--model", kDecisionTiny, "--input", in.string(), "--threads", "1"},
                       dir.path() / "score.log");
  EXPECT_EQ(r.code, 0) << r.output;
  const nlohmann::json out = json_from_first_brace(r.output);
  EXPECT_TRUE(out.is_object()) << r.output;
  return out.is_object() ? out.at("sequences") : nlohmann::json::array();
}

// The fixture's short sequences (at most 40 tokens) and `tandem score`'s answers to them, as files for
// tandem-loadgen's --input and --expect.
inline std::pair<std::string, std::string> score_pool_files(const TempDir& dir) {
  const nlohmann::json pool = {{"sequences", fixture_sequences(40)}};
  EXPECT_GE(pool.at("sequences").size(), 20u);
  const auto input = dir.path() / "pool.json";
  std::ofstream(input) << pool.dump();
  const auto expect = dir.path() / "expect.json";
  std::ofstream(expect) << nlohmann::json{{"sequences", tandem_score(dir, pool)}}.dump();
  return {input.string(), expect.string()};
}

// Each prompt's tokens as `tandem generate --target models/pylm` decodes them plainly (no drafter), the
// generation tests' reference (a final EOS included: the API's token_ids end before it).
inline std::vector<std::vector<uint32_t>> plain_decoding(const TempDir& dir,
                                                         const std::vector<std::vector<uint32_t>>& prompts,
                                                         uint32_t max_tokens, float temperature, uint64_t seed) {
  const auto file = dir.path() / "prompts.txt";
  write_prompt_file(file, prompts);
  auto r = run_command({TANDEM_BINARY, "generate", "--target", kModels + "pylm", "--prompt-file", file.string(),
                        "--max-tokens", std::to_string(max_tokens), "--temperature", std::to_string(temperature),
                        "--seed", std::to_string(seed), "--threads", "1"},
                       dir.path() / "generate.log");
  EXPECT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = last_json_object(r.output);
  std::vector<std::vector<uint32_t>> out;
  if (!j.is_object()) return out;
  for (const auto& req : j.at("requests")) out.push_back(req.at("tokens").get<std::vector<uint32_t>>());
  return out;
}

}  // namespace tandem::testing

// A generation job under mpirun (label mpi): a coordinator and two `generator` ranks (models/pylm with
// models/pylm-dflash on CPU ranks) answer the held-out prompts of pylm-dflash's eval.json, all submitted
// at once through GenerationService::submit (tandem-gen-job), exactly as `tandem generate` decodes them
// plainly, token for token, greedy and seeded; speculation ran; no slot is left held on either rank.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/launch/service_job.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

const std::string kModels = TANDEM_SOURCE_DIR "/models/";

json last_json_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, found;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') found = line;
  }
  return found.empty() ? json() : json::parse(found, nullptr, false);
}

// `tandem generate` prints one indented object; the log around it holds other lines.
json last_json_object(const std::string& text) {
  const size_t begin = text.rfind("\n{\n") == std::string::npos ? text.find("{\n") : text.rfind("\n{\n") + 1;
  const size_t end = text.rfind("\n}");
  if (begin == std::string::npos || end == std::string::npos || end < begin) return json();
  return json::parse(text.substr(begin, end + 2 - begin), nullptr, false);
}

class GenJob : public ::testing::TestWithParam<std::pair<float, uint64_t>> {};

TEST_P(GenJob, CompletionsEqualTandemGenerate) {
  const auto [temperature, seed] = GetParam();
  TempDir dir;
  std::ifstream ev_in(kModels + "pylm-dflash/eval.json");
  const json ev = json::parse(ev_in);
  const auto prompts = ev.at("prompts").get<std::vector<std::vector<uint32_t>>>();
  const std::string prompt_file = (dir.path() / "prompts.txt").string();
  {
    std::ofstream out(prompt_file);
    for (const auto& p : prompts) {
      for (size_t i = 0; i < p.size(); ++i) out << (i ? "," : "") << p[i];
      out << "\n";
    }
  }
  const std::string yaml = (dir.path() / "deploy.yaml").string();
  std::ofstream(yaml) << "backend: {name: cpu, threads: 1}\n"
                         "models:\n"
                         "  target: {dir: " + kModels + "pylm, tokenizer: " + kModels + "pylm/tokenizer.json}\n"
                         "  drafter: {dir: " + kModels + "pylm-dflash}\n"
                         "generation: {slots: 3, kv_capacity: 512, block_size: 8}\n"
                         "health: {heartbeat_ms: 100, dead_after_ms: 10000}\n"
                         "ranks:\n  - role: coordinator\n  - role: generator\n  - role: generator\n";
  const std::string max_tokens = "48";
  const std::string t = std::to_string(temperature);
  auto job = run_command({"mpirun", "--oversubscribe", "-np", "3", TANDEM_GEN_JOB, yaml, prompt_file, max_tokens, t,
                          std::to_string(seed)},
                         dir.path() / "job.log");
  ASSERT_EQ(job.code, 0) << job.output;
  const json got = last_json_line(job.output);
  ASSERT_TRUE(got.is_object()) << job.output;
  auto plain = run_command({TANDEM_BINARY, "generate", "--target", kModels + "pylm", "--prompt-file", prompt_file,
                            "--max-tokens", max_tokens, "--temperature", t, "--seed", std::to_string(seed),
                            "--threads", "1"},
                           dir.path() / "generate.log");
  ASSERT_EQ(plain.code, 0) << plain.output;
  const json want = last_json_object(plain.output);
  ASSERT_TRUE(want.is_object()) << plain.output;
  ASSERT_EQ(got.at("requests").size(), prompts.size());
  uint64_t accepted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& g = got.at("requests")[i];
    const json& w = want.at("requests")[i];
    EXPECT_EQ(g.at("tokens"), w.at("tokens")) << "request " << i;
    EXPECT_EQ(g.at("finish"), w.at("finish")) << "request " << i;
    accepted += g.at("accepted").get<uint64_t>();
  }
  EXPECT_GT(accepted, 0u) << "no draft was ever accepted: speculation did not run";
  ASSERT_EQ(got.at("targets").size(), 2u);
  for (const json& r : got.at("targets")) {
    EXPECT_GT(r.at("tokens").get<uint64_t>(), 0u) << r.dump();
    EXPECT_EQ(r.at("rank_slots_used"), 0) << r.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, GenJob,
                         ::testing::Values(std::pair<float, uint64_t>{0.0f, 0}, std::pair<float, uint64_t>{0.8f, 7}));

}  // namespace
}  // namespace tandem::testing

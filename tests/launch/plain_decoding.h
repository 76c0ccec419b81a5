// The reference of the generation service tests (gen_serve_test.cpp, gen_drain_test.cpp): pylm-dflash's
// held-out prompts, and what `tandem generate` without a drafter (plain decoding) answers for each. The
// including test defines TANDEM_BINARY.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/launch/service_job.h"

namespace tandem::testing {

inline std::vector<std::vector<uint32_t>> held_out_prompts() {
  std::ifstream in(TANDEM_SOURCE_DIR "/models/pylm-dflash/eval.json");
  return nlohmann::json::parse(in).at("prompts").get<std::vector<std::vector<uint32_t>>>();
}

// Each prompt's tokens as `tandem generate --target models/pylm` decodes them (a final EOS included: the
// API's token_ids end before it).
inline std::vector<std::vector<uint32_t>> plain_decoding(const TempDir& dir,
                                                         const std::vector<std::vector<uint32_t>>& prompts,
                                                         uint32_t max_tokens, float temperature, uint64_t seed) {
  const auto file = dir.path() / "prompts.txt";
  {
    std::ofstream out(file);
    for (const auto& p : prompts) {
      for (size_t i = 0; i < p.size(); ++i) out << (i ? "," : "") << p[i];
      out << "\n";
    }
  }
  auto r = run_command({TANDEM_BINARY, "generate", "--target", TANDEM_SOURCE_DIR "/models/pylm", "--prompt-file",
                        file.string(), "--max-tokens", std::to_string(max_tokens), "--temperature",
                        std::to_string(temperature), "--seed", std::to_string(seed), "--threads", "1"},
                       dir.path() / "generate.log");
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t begin = r.output.rfind("\n{\n") == std::string::npos ? r.output.find("{\n") : r.output.rfind("\n{\n") + 1;
  const auto j = nlohmann::json::parse(r.output.substr(begin, r.output.rfind("\n}") + 2 - begin), nullptr, false);
  std::vector<std::vector<uint32_t>> out;
  if (!j.is_object()) return out;
  for (const auto& req : j.at("requests")) out.push_back(req.at("tokens").get<std::vector<uint32_t>>());
  return out;
}

}  // namespace tandem::testing

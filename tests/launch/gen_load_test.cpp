// The generation service under load (issue 11, label mpi): a job with a coordinator and two generator
// ranks (models/pylm + models/pylm-dflash, CPU) answers 10,000 POST /v1/completions over 64 keep-alive
// connections, greedy and seeded, a third streamed, with no answer lost, duplicated or different from
// what `tandem generate` decodes plainly; every status is 200 and no KV slot is left held.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/loadgen_http.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using nlohmann::json;

constexpr uint32_t kMaxTokens = 8;
constexpr size_t kRequests = 10000;
constexpr size_t kConnections = 64;

struct Sampling {
  std::string temperature;
  uint64_t seed;
};
const std::vector<Sampling> kSamplings = {{"0", 0}, {"0.8", 7}, {"0.8", 99}};

std::string deployment() {
  return pylm_deployment("{slots: 32, kv_capacity: 128, block_size: 2}", {"generator", "generator"});
}

// pylm-dflash's held-out prompts cut to every length from 2 to 33 tokens: 256 distinct prompts, one a
// line, as `tandem generate --prompt-file` and tandem-gen-loadgen read them. (Short prompts and block 2
// keep 10,000 requests within minutes on 2 shared cores: prefill and verify are most of a rank's time.)
std::filesystem::path write_prompts(const TempDir& dir) {
  std::vector<std::vector<uint32_t>> cut;
  for (const auto& p : held_out_prompts()) {
    for (size_t len = 2; len <= std::min<size_t>(33, p.size()); ++len) cut.emplace_back(p.begin(), p.begin() + len);
  }
  const auto file = dir.path() / "prompts.txt";
  write_prompt_file(file, cut);
  return file;
}

// `tandem generate` (plain decoding) over every prompt at one temperature and seed; its output file.
std::filesystem::path expectations(const TempDir& dir, const std::filesystem::path& prompts, const Sampling& s) {
  const auto log = dir.path() / ("generate-" + std::to_string(s.seed) + ".json");
  auto r = run_command({TANDEM_BINARY, "generate", "--target", kModels + "pylm", "--prompt-file", prompts.string(),
                        "--max-tokens", std::to_string(kMaxTokens), "--temperature", s.temperature, "--seed",
                        std::to_string(s.seed), "--threads", "2"},
                       dir.path() / "generate.log");
  EXPECT_EQ(r.code, 0) << r.output;
  std::ofstream(log) << last_json_text(r.output);
  return log;
}

// tandem-gen-loadgen's summary (its stdout is the JSON; it logs nothing when all goes well).
json load(const TempDir& dir, uint16_t port, const std::filesystem::path& prompts,
          const std::vector<std::string>& expect, size_t requests, int& code) {
  std::vector<std::string> argv = {TANDEM_GEN_LOADGEN, "--url", "http://127.0.0.1:" + std::to_string(port),
                                   "--prompt-file", prompts.string(), "--requests", std::to_string(requests),
                                   "--connections", std::to_string(kConnections), "--max-tokens",
                                   std::to_string(kMaxTokens), "--stream-every", "3"};
  for (const auto& e : expect) {
    argv.push_back("--expect");
    argv.push_back(e);
  }
  auto r = run_command(argv, dir.path() / "loadgen.log", 600s);
  code = r.code;
  const json j = json_from_first_brace(r.output);
  EXPECT_TRUE(j.is_object()) << r.output;
  std::fprintf(stderr, "%s\n", r.output.c_str());
  return j.is_object() ? j : json::object();
}

TEST(GenLoad, TenThousandCompletionsOver64ConnectionsAllAnsweredRight) {
  TempDir dir;
  const auto prompts = write_prompts(dir);
  std::vector<std::string> expect;
  std::filesystem::path seed7, seed99;
  for (const Sampling& s : kSamplings) {
    const auto file = expectations(dir, prompts, s);
    expect.push_back(s.temperature + ":" + std::to_string(s.seed) + ":" + file.string());
    (s.seed == 7 ? seed7 : seed99) = file;
  }
  ServiceJob job(deployment());
  const auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  EXPECT_NE(job.output().find("tandem: serving pylm at"), std::string::npos) << job.output();

  // The checker itself: seed 7's requests held against seed 99's tokens do not pass.
  int code = 0;
  const json wrong = load(dir, *port, prompts, {"0.8:7:" + seed99.string()}, 50, code);
  EXPECT_EQ(code, 1);
  EXPECT_GT(wrong.value("mismatched", 0), 0) << wrong.dump(2);
  EXPECT_EQ(wrong.value("mismatched", 0) + wrong.value("ok", 0), 50) << wrong.dump(2);

  const json s = load(dir, *port, prompts, expect, kRequests, code);
  EXPECT_EQ(code, 0) << s.dump(2);
  EXPECT_EQ(s.value("distinct_cases", 0), 768) << s.dump(2);
  EXPECT_EQ(s.value("ok", 0), kRequests) << s.dump(2);
  EXPECT_EQ(s.value("mismatched", -1), 0) << s.dump(2);
  EXPECT_EQ(s.value("lost", -1), 0) << s.dump(2);
  EXPECT_EQ(s.value("timed_out", -1), 0) << s.dump(2);
  EXPECT_EQ(s.value("refused", -1), 0) << s.dump(2);
  EXPECT_EQ(s.value("duplicated", -1), 0) << s.dump(2);
  EXPECT_EQ(s.value("statuses", json()), (json{{"200", kRequests}})) << s.dump(2);
  // Client-side timing of the streamed third: each one owing tokens was timed; a first token comes
  // before its answer ends, and a token's gap is under the whole answer's time.
  EXPECT_GT(s.value("streamed_owing_tokens", size_t{0}), kRequests / 4) << s.dump(2);
  EXPECT_EQ(s.value("streamed_with_tokens", size_t{0}), s.value("streamed_owing_tokens", size_t{1})) << s.dump(2);
  const double latency_max = s["latency_ms"].value("max", 0.0);
  EXPECT_GT(s["ttft_ms"].value("p50", 0.0), 0.0) << s.dump(2);
  EXPECT_LE(s["ttft_ms"].value("max", 1e9), latency_max) << s.dump(2);
  EXPECT_GT(s["tpot_ms"].value("p50", 0.0), 0.0) << s.dump(2);
  EXPECT_LE(s["itl_ms"].value("max", 1e9), latency_max) << s.dump(2);

  // Every slot came back on both generator ranks.
  HttpConnection conn(*port);
  auto metrics = conn.request("GET", "/metrics", "", 10s);
  ASSERT_TRUE(metrics);
  for (const char* rank : {"1", "2"}) {
    EXPECT_NE(metrics->body.find(std::string("tandem_gen_kv_slots_used{rank=\"") + rank + "\"} 0\n"),
              std::string::npos)
        << metrics->body;
  }
  kill(job.launcher(), SIGINT);
  const auto stopped = job.wait(60s);
  ASSERT_TRUE(stopped) << job.output();
  EXPECT_EQ(*stopped, 0) << job.output();
  EXPECT_EQ(mpi_noise(job.output()), "") << job.output();
}

}  // namespace
}  // namespace tandem::testing

// The whole generation service under mpirun (label mpi): `tandem launch` on a deployment with a
// coordinator, a scorer and a generator rank (models/pylm with models/pylm-dflash, CPU), and
// concurrent POST /v1/completions for pylm-dflash's held-out prompts, whole and streamed (SSE), greedy
// and seeded, each answering exactly the tokens `tandem generate` decodes plainly; /v1/decide still
// answers beside it; /metrics shows the rounds and no KV slot left held; the job stops cleanly.
#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include <nlohmann/json.hpp>

#include "bench/loadgen_http.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using loadgen::HttpReply;
using nlohmann::json;

constexpr uint32_t kMaxTokens = 40;

std::string deployment() {
  return pylm_deployment("{slots: 3, kv_capacity: 512, block_size: 8}", {"scorer", "generator"},
                         "health: {heartbeat_ms: 100, dead_after_ms: 1500}\n");
}

// The completion's token ids: from the whole answer, or joined from the SSE chunks (which must end
// with a finish reason, a usage chunk and [DONE]).
std::vector<uint32_t> completion_ids(const HttpReply& reply, bool stream, json& usage) {
  std::vector<uint32_t> ids;
  if (!stream) {
    const json j = json::parse(reply.body);
    usage = j.at("usage");
    return j.at("choices")[0].at("token_ids").get<std::vector<uint32_t>>();
  }
  std::istringstream in(reply.body);
  std::string line;
  bool done = false, finished = false;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const json chunk = json::parse(data);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
    for (const json& c : chunk.at("choices")) {
      if (c.contains("token_ids")) {
        for (const json& id : c["token_ids"]) ids.push_back(id.get<uint32_t>());
      }
      if (!c.at("finish_reason").is_null()) finished = true;
    }
  }
  EXPECT_TRUE(done) << reply.body;
  EXPECT_TRUE(finished) << reply.body;
  return ids;
}

struct Case {
  float temperature;
  uint64_t seed;
};

class GenServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    job_ = new ServiceJob(deployment());
    port_ = job_->wait_listening().value_or(0);
  }
  static void TearDownTestSuite() {
    delete job_;
    job_ = nullptr;
  }
  static ServiceJob* job_;
  static uint16_t port_;
};
ServiceJob* GenServe::job_ = nullptr;
uint16_t GenServe::port_ = 0;

TEST_F(GenServe, CompletionsEqualPlainDecodingWholeAndStreamed) {
  ASSERT_NE(port_, 0) << job_->output();
  const auto prompts = held_out_prompts();
  ASSERT_GE(prompts.size(), 4u);
  TempDir dir;
  for (const Case c : {Case{0.0f, 0}, Case{0.8f, 1234}}) {
    const auto want = plain_decoding(dir, prompts, kMaxTokens, c.temperature, c.seed);
    ASSERT_EQ(want.size(), prompts.size());
    for (const bool stream : {false, true}) {
      // Every prompt at once, each on its own connection: the rounds batch them.
      std::vector<std::future<std::optional<HttpReply>>> replies;
      for (const auto& p : prompts) {
        json body = {{"prompt", p},    {"max_tokens", kMaxTokens},  {"temperature", c.temperature},
                     {"seed", c.seed}, {"return_token_ids", true}, {"stream", stream}};
        if (stream) body["stream_options"] = {{"include_usage", true}};
        replies.push_back(std::async(std::launch::async, [port = port_, b = body.dump()] {
          HttpConnection conn(port);
          return conn.request("POST", "/v1/completions", b, 120s);
        }));
      }
      uint64_t drafted = 0, accepted = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        auto reply = replies[i].get();
        ASSERT_TRUE(reply) << "request " << i;
        ASSERT_EQ(reply->status, 200) << reply->body;
        json usage;
        const std::vector<uint32_t> got = completion_ids(*reply, stream, usage);
        // `tandem generate` stops at the EOS id and keeps it; the API ends there without it.
        std::vector<uint32_t> expect = want[i];
        if (!expect.empty() && expect.size() < kMaxTokens && expect.back() == 0) expect.pop_back();
        EXPECT_EQ(got, expect) << "request " << i << " temperature " << c.temperature << (stream ? " streamed" : "");
        ASSERT_TRUE(usage.is_object()) << reply->body;
        EXPECT_EQ(usage.at("prompt_tokens").get<size_t>(), prompts[i].size());
        drafted += usage.at("speculative").at("drafted_tokens").get<uint64_t>();
        accepted += usage.at("speculative").at("accepted_tokens").get<uint64_t>();
      }
      EXPECT_GT(drafted, 0u) << "speculation did not run";
      EXPECT_GT(accepted, 0u) << "no draft was ever accepted";
    }
  }
  // The scorer answers beside the generator.
  std::ifstream sample(kModels + "decision-tickets/sample.json");
  const json questions = {{"state", "Email: my drill came in the wrong color, I want a refund before tomorrow."},
                          {"questions", json::parse(sample).at("questions")}};
  HttpConnection conn(port_);
  auto decide = conn.request("POST", "/v1/decide", questions.dump(), 60s);
  ASSERT_TRUE(decide);
  EXPECT_EQ(decide->status, 200) << decide->body;
  // Every slot came back: the scheduler's gauge of slots in use reads 0 on the generator rank.
  auto metrics = conn.request("GET", "/metrics", "", 10s);
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tandem_gen_rounds_total{rank=\"2\"}"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("tandem_gen_kv_slots_used{rank=\"2\"} 0"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("tandem_generation_tokens_total{endpoint=\"/v1/completions\"}"), std::string::npos);
}

TEST_F(GenServe, ModelsAndHealthNameTheGenerationModel) {
  ASSERT_NE(port_, 0) << job_->output();
  HttpConnection conn(port_);
  auto models = conn.request("GET", "/v1/models", "", 10s);
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  const json m = json::parse(models->body);
  std::vector<std::string> ids;
  for (const json& e : m.at("data")) ids.push_back(e.at("id").get<std::string>());
  EXPECT_EQ(ids, (std::vector<std::string>{"decision-tickets", "pylm"})) << models->body;
  auto health = conn.request("GET", "/health", "", 10s);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(json::parse(health->body).at("status"), "ok") << health->body;
}

TEST_F(GenServe, StopsCleanly) {
  ASSERT_NE(port_, 0) << job_->output();
  kill(job_->launcher(), SIGINT);
  const auto code = job_->wait(60s);
  ASSERT_TRUE(code) << job_->output();
  EXPECT_EQ(*code, 0) << job_->output();
  EXPECT_NE(job_->output().find("the job stopped cleanly"), std::string::npos) << job_->output();
}

}  // namespace
}  // namespace tandem::testing

// Draining a drafter rank of a live job (label mpi): `tandem launch` with a coordinator, a target and two
// drafter ranks (models/pylm with models/pylm-dflash, CPU) under concurrent POST /v1/completions, greedy
// and seeded; POST /admin/drain takes drafter rank 2 out of service mid-load. Every completion equals
// `tandem generate` token for token; the drained rank's requests moved with their contexts handed over
// (counted), it ends holding no context slot, /health says drained, and later requests speculate on rank 3
// alone; /admin/undrain puts it back. The admin routes' refusals: a rank that is not a drafter, unknown,
// malformed, twice, the last drafter in service, a wrong method or media type.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <regex>

#include <nlohmann/json.hpp>

#include "bench/loadgen_http.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using loadgen::HttpReply;
using nlohmann::json;

constexpr uint32_t kMaxTokens = 64;

std::string deployment() {
  return pylm_deployment("{slots: 4, kv_capacity: 512, block_size: 8}", {"target", "drafter", "drafter"},
                         "health: {heartbeat_ms: 100, dead_after_ms: 3000}\n");
}

struct Sampling {
  float temperature = 0.0f;
  uint64_t seed = 0;
};

std::optional<HttpReply> call(uint16_t port, const std::string& method, const std::string& path,
                              const std::string& body = "") {
  HttpConnection conn(port);
  return conn.request(method, path, body, 30s);
}

// The value of the /metrics sample `series` (name and labels), or -1 when it is not there.
double metric(uint16_t port, const std::string& series) {
  auto m = call(port, "GET", "/metrics");
  if (!m || m->status != 200) return -1;
  const size_t at = m->body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(m->body.substr(at + series.size() + 2));
}

struct Wave {
  std::vector<std::future<std::optional<HttpReply>>> replies;
  std::vector<size_t> prompt;     // per request: the prompt index
  std::vector<Sampling> setting;  // and its sampling
};

// Every prompt at once, even ones greedy and odd ones seeded, each on its own connection.
Wave start_wave(uint16_t port, const std::vector<std::vector<uint32_t>>& prompts, const std::vector<Sampling>& settings) {
  Wave w;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Sampling s = settings[i % settings.size()];
    const json body = {{"prompt", prompts[i]}, {"max_tokens", kMaxTokens}, {"temperature", s.temperature},
                       {"seed", s.seed},       {"return_token_ids", true}};
    w.prompt.push_back(i);
    w.setting.push_back(s);
    w.replies.push_back(std::async(std::launch::async, [port, b = body.dump()] {
      HttpConnection conn(port);
      return conn.request("POST", "/v1/completions", b, 240s);
    }));
  }
  return w;
}

// Checks every answer against plain decoding (`want[s]` for setting s); the accepted drafts in all.
uint64_t check_wave(Wave& w, const std::vector<std::vector<std::vector<uint32_t>>>& want,
                    const std::vector<Sampling>& settings, const std::string& what) {
  uint64_t accepted = 0;
  for (size_t i = 0; i < w.replies.size(); ++i) {
    auto reply = w.replies[i].get();
    EXPECT_TRUE(reply) << what << ": request " << i << " got no answer";
    if (!reply) continue;
    EXPECT_EQ(reply->status, 200) << what << ": " << reply->body;
    const json j = json::parse(reply->body, nullptr, false);
    if (!j.is_object() || !j.contains("choices")) continue;
    const size_t s = i % settings.size();
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<uint32_t>>(), want[s][w.prompt[i]])
        << what << ": request " << i << " (temperature " << w.setting[i].temperature << ")";
    accepted += j["usage"]["speculative"]["accepted_tokens"].get<uint64_t>();
  }
  return accepted;
}

void expect_error(uint16_t port, const std::string& path, const std::string& body, int status,
                  const std::string& message) {
  auto r = call(port, "POST", path, body);
  ASSERT_TRUE(r) << path << " " << body;
  EXPECT_EQ(r->status, status) << body << ": " << r->body;
  const json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(message), std::string::npos) << body << ": " << r->body;
  EXPECT_EQ(j["error"]["param"], "rank") << r->body;
}

json rank_entry(uint16_t port, int rank) {
  auto h = call(port, "GET", "/health");
  if (!h) return json();
  const json j = json::parse(h->body, nullptr, false);
  if (!j.is_object()) return json();
  for (const json& r : j["ranks"]) {
    if (r["rank"] == rank) return r;
  }
  return json();
}

TEST(GenDrain, ADrafterDrainedMidLoadLosesNothing) {
  ServiceJob job(deployment());
  const uint16_t port = job.wait_listening().value_or(0);
  ASSERT_NE(port, 0) << job.output();
  const auto prompts = held_out_prompts();
  ASSERT_GE(prompts.size(), 8u);
  const std::vector<Sampling> settings = {{0.0f, 0}, {0.8f, 1234}};
  TempDir dir;
  std::vector<std::vector<std::vector<uint32_t>>> want;
  for (const Sampling& s : settings) {
    want.push_back(plain_decoding(dir, prompts, kMaxTokens, s.temperature, s.seed));
    ASSERT_EQ(want.back().size(), prompts.size());
    // The API's token_ids end before the EOS that `tandem generate` keeps.
    for (auto& ids : want.back()) {
      if (!ids.empty() && ids.size() < kMaxTokens && ids.back() == 0) ids.pop_back();
    }
  }

  // Refusals that need no load.
  expect_error(port, "/admin/drain", R"({"rank": 1})", 400, "rank 1 (target, cpu) is not a drafter rank");
  expect_error(port, "/admin/drain", R"({"rank": 9})", 400, "no rank 9 in this job (ranks 0..3)");
  expect_error(port, "/admin/drain", R"({"rank": "2"})", 400, "rank must be an integer, not a string");
  expect_error(port, "/admin/drain", "{}", 400, "rank is required");
  expect_error(port, "/admin/undrain", R"({"rank": 2})", 409, "rank 2 (drafter, cpu) is in service");
  auto get = call(port, "GET", "/admin/drain");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405) << get->body;
  {
    HttpConnection conn(port);
    ASSERT_TRUE(conn.send_raw("POST /admin/drain HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                              "Content-Length: 11\r\n\r\n{\"rank\": 2}"));
    auto r = conn.read_reply(10s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 415) << r->body;
  }

  // Wave 1; the drain comes once rank 2 holds contexts (it drafted a round).
  Wave first = start_wave(port, prompts, settings);
  const std::string slots2 = "tandem_gen_drafter_slots_used{rank=\"2\",target=\"1\"}";
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (metric(port, slots2) <= 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_GT(metric(port, slots2), 0) << "drafter rank 2 never drafted\n" << job.output();
  auto drained = call(port, "POST", "/admin/drain", R"({"rank": 2})");
  ASSERT_TRUE(drained);
  ASSERT_EQ(drained->status, 200) << drained->body;
  const json d = json::parse(drained->body);
  EXPECT_EQ(d["rank"], 2);
  EXPECT_EQ(d["target"], 1);
  EXPECT_EQ(d["state"], "draining");
  EXPECT_GT(d["moving"].get<int>(), 0) << "rank 2 held no request at the drain: not a drain mid-load";
  EXPECT_EQ(d["to"], json::array({3}));
  expect_error(port, "/admin/drain", R"({"rank": 2})", 409, "rank 2 (drafter, cpu) is draining already");
  expect_error(port, "/admin/drain", R"({"rank": 3})", 409,
               "rank 3 (drafter, cpu) is the last drafter in service of rank 1 (target, cpu)");
  EXPECT_GT(check_wave(first, want, settings, "wave 1 (drained mid-load)"), 0u);

  // The drain is done: everything moved whole, nothing held, /health says so and stays ok.
  // (A request that finished before its target's next round has nothing left to move.)
  const double moves = metric(port, "tandem_gen_drafter_drain_moves_total{rank=\"1\"}");
  EXPECT_GT(moves, 0);
  EXPECT_LE(moves, d["moving"].get<double>());
  EXPECT_EQ(metric(port, "tandem_gen_drafter_handoffs_total{rank=\"1\"}"), moves) << "a context was rebuilt";
  EXPECT_EQ(metric(port, "tandem_gen_drafter_moves_total{rank=\"1\"}"), 0);
  EXPECT_EQ(metric(port, slots2), 0);
  EXPECT_EQ(metric(port, "tandem_gen_drafter_service{rank=\"2\",target=\"1\",state=\"drained\"}"), 1);
  EXPECT_EQ(metric(port, "tandem_gen_kv_slots_used{rank=\"1\"}"), 0);
  EXPECT_EQ(rank_entry(port, 2)["drain"], "drained");
  auto health = call(port, "GET", "/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(json::parse(health->body)["status"], "ok") << health->body;

  // Wave 2 speculates on rank 3 alone.
  Wave second = start_wave(port, prompts, settings);
  EXPECT_GT(check_wave(second, want, settings, "wave 2 (after the drain)"), 0u) << "no speculation after the drain";
  EXPECT_EQ(metric(port, slots2), 0) << "a request drafted on the drained rank";

  auto back = call(port, "POST", "/admin/undrain", R"({"rank": 2})");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, 200) << back->body;
  EXPECT_EQ(json::parse(back->body)["state"], "serving");
  EXPECT_FALSE(rank_entry(port, 2).contains("drain"));
  EXPECT_EQ(metric(port, "tandem_gen_drafter_service{rank=\"2\",target=\"1\",state=\"serving\"}"), 1);

  kill(job.launcher(), SIGINT);
  const auto code = job.wait(60s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 0) << job.output();
}

}  // namespace
}  // namespace tandem::testing

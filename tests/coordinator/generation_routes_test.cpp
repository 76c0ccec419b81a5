// Api (coordinator/routes.h) with the generation routes: before open_generation() a scoring-only
// deployment answers them 404; once opened, Api forwards them to the GenerationApi (Content-Type
// checked first), /v1/models lists the generation model beside the scorer, and /health says
// "degraded" naming a pairing the scheduler reported. Routes a job does not serve are 404 for any method.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/loadgen_http.h"
#include "coordinator/routes.h"
#include "fake_generation_service.h"
#include "worker/topology.h"

namespace tandem::coordinator {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using nlohmann::json;

const char* kYaml =
    "server: {host: 127.0.0.1, port: 0}\nbackend: {name: cpu, threads: 1}\n"
    "models:\n  scorer: {dir: " TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny}\n"
    "ranks:\n  - role: coordinator\n  - role: scorer\n";

TEST(GenerationRoutes, ApiForwardsOnceOpened) {
  auto d = config::parse_deployment(kYaml, "test.yaml", "/");
  ASSERT_TRUE(d.ok()) << d.error().message();
  const config::Deployment deployment = std::move(d).value();
  const auto buckets = config::serving_buckets(deployment).value();
  const auto topology = worker::Topology::make(deployment, 0, 2).value();
  RankTable ranks(topology, 2);
  Metrics metrics;
  worker::BlockingQueue<Dispatch> outbox;
  Batcher batcher(deployment, buckets, ranks, outbox, metrics);
  Api api(deployment, buckets, batcher, ranks, metrics);
  auto s = HttpServer::start(deployment.server, deployment.limits, api);
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto server = std::move(s).value();
  HttpConnection c(server->port());

  auto before = c.request("POST", "/v1/completions", R"({"prompt": "hi"})", 5000ms);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 404) << before->body;

  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/models/pylm";
  auto frontend = GenerationFrontend::load("pylm", dir, dir + "/tokenizer.json").value();
  testing::FakeGenerationService fake(6144, 1024);
  fake.script.tokens = frontend->tokenizer().encode("ok then").value();
  GenerationApi generation(*frontend, &fake, metrics);
  api.open_generation(generation);

  auto r = c.request("POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", 5000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], "ok then");
  ASSERT_TRUE(c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
                         "Content-Length: 2\r\n\r\n{}"));
  auto typed = c.read_reply(5000ms);
  ASSERT_TRUE(typed);
  EXPECT_EQ(typed->status, 415);

  auto scorer = DecisionFrontend::load(*deployment.model(config::Role::kScorer));
  ASSERT_TRUE(scorer.ok()) << scorer.error().message();
  api.open(*scorer.value());
  auto models = c.request("GET", "/v1/models", "", 5000ms);
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  const json data = json::parse(models->body)["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[1]["id"], "pylm");
  EXPECT_EQ(data[1]["role"], "target");
  EXPECT_EQ(data[1]["max_context"], 1024);

  metrics.generation().set_degraded("target 1 + drafter 2", "drafter rank 2 is down: serving without drafts");
  auto health = c.request("GET", "/health", "", 5000ms);
  ASSERT_TRUE(health);
  const json h = json::parse(health->body);
  EXPECT_EQ(h["degraded"], json::array({{{"pairing", "target 1 + drafter 2"},
                                         {"detail", "drafter rank 2 is down: serving without drafts"}}}))
      << health->body;
  EXPECT_NE(metrics.render(0, {}).find("tandem_generation_pairing_degraded{pairing=\"target 1 + drafter 2\"} 1\n"),
            std::string::npos);
  server->stop();
  batcher.stop(unavailable("test over"));
}

// A route the deployment does not serve answers 404 whatever the method, as an unknown path does: the
// generation routes of a scoring job, the scoring routes of a generation job, /admin/drain without
// drafter ranks. (The method used to be checked first on the last two: GET got 405, POST 404.)
TEST(GenerationRoutes, RoutesAJobDoesNotServeAre404WhateverTheMethod) {
  const std::string models = TANDEM_SOURCE_DIR "/models/";
  const std::string generation_yaml = "server: {host: 127.0.0.1, port: 0}\nbackend: {name: cpu, threads: 1}\n"
                                      "models:\n  target: {dir: " + models + "pylm}\n  drafter: {dir: " + models +
                                      "pylm-dflash}\nranks:\n  - role: coordinator\n  - role: generator\n";
  const std::vector<std::pair<std::string, std::vector<std::string>>> jobs = {
      {kYaml, {"/v1/completions", "/v1/chat/completions", "/admin/drain", "/admin/undrain", "/v2/nothing"}},
      {generation_yaml, {"/v1/decide", "/v1/score", "/admin/drain", "/admin/undrain", "/v2/nothing"}}};
  for (const auto& [yaml, paths] : jobs) {
    auto d = config::parse_deployment(yaml, "test.yaml", "/");
    ASSERT_TRUE(d.ok()) << d.error().message();
    const config::Deployment deployment = std::move(d).value();
    const auto buckets = config::serving_buckets(deployment).value();
    const auto topology = worker::Topology::make(deployment, 0, 2).value();
    RankTable ranks(topology, 2);
    Metrics metrics;
    worker::BlockingQueue<Dispatch> outbox;
    Batcher batcher(deployment, buckets, ranks, outbox, metrics);
    Api api(deployment, buckets, batcher, ranks, metrics);
    auto s = HttpServer::start(deployment.server, deployment.limits, api);
    ASSERT_TRUE(s.ok()) << s.error().message();
    auto server = std::move(s).value();
    for (const std::string& path : paths) {
      for (const std::string method : {"GET", "POST", "PUT", "HEAD"}) {
        HttpConnection c(server->port());
        const bool head = method == "HEAD";
        ASSERT_TRUE(c.send_raw(HttpConnection::request_text(method, path, method == "POST" ? "{}" : "")));
        auto r = c.read_reply(5000ms, head);
        ASSERT_TRUE(r) << method << " " << path;
        EXPECT_EQ(r->status, 404) << method << " " << path << ": " << r->body;
        EXPECT_EQ(r->headers.count("allow"), 0u) << method << " " << path;
        if (!head) {
          EXPECT_EQ(json::parse(r->body)["error"]["type"], "not_found") << method << " " << path;
        }
      }
    }
    server->stop();
    batcher.stop(unavailable("test over"));
  }
}

}  // namespace
}  // namespace tandem::coordinator

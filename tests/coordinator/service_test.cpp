// The coordinator with its workers in one process (coordinator/coordinator.h over an in-process
// transport): answers equal the scorer's own outputs bit for bit; an orderly stop returns 0; a worker
// that dies while serving turns /health 503 and ends the job with 3; a worker that fails to load, dies
// while loading or misses the start-up timeout ends it with 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "bench/loadgen_http.h"
#include "coordinator/coordinator.h"

namespace tandem::coordinator {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A transport that can be made to die: then it neither sends nor receives, like a killed rank.
class Killable final : public worker::Transport {
 public:
  explicit Killable(std::unique_ptr<worker::Transport> inner) : inner_(std::move(inner)) {}
  void kill() { dead_ = true; }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status send(int dest, worker::Tag tag, std::vector<uint8_t> bytes) override {
    return dead_ ? ok_status() : inner_->send(dest, tag, std::move(bytes));
  }
  Result<std::optional<worker::Incoming>> poll() override {
    if (dead_) return std::optional<worker::Incoming>();
    return inner_->poll();
  }
  void abandon(int peer) override { inner_->abandon(peer); }
  size_t pending() override { return inner_->pending(); }

 private:
  std::unique_ptr<worker::Transport> inner_;
  std::atomic<bool> dead_{false};
};

std::string deployment_yaml(uint32_t startup_timeout_s, uint32_t max_batch_tokens, uint16_t port) {
  return "server: {host: 127.0.0.1, port: " + std::to_string(port) + "}\nbackend: {name: cpu, threads: 1}\n"
         "batcher: {max_batch_tokens: " + std::to_string(max_batch_tokens) + "}\n"
         "models:\n  scorer: {dir: " TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny}\n"
         "health: {heartbeat_ms: 50, dead_after_ms: 500, exit_grace_ms: 500, startup_timeout_s: " +
         std::to_string(startup_timeout_s) + "}\nranks:\n  - role: coordinator\n  - role: scorer\n  - role: scorer\n";
}

// Three ranks in threads. `factory_for(rank)` may replace a worker's runner.
class InProcessJob {
 public:
  using FactoryFor = std::function<worker::RunnerFactory(int rank, const config::Deployment&)>;

  explicit InProcessJob(FactoryFor factory_for = nullptr, uint32_t startup_timeout_s = 20,
                        uint32_t max_batch_tokens = 2048, uint16_t fixed_port = 0) {
    auto d = config::parse_deployment(deployment_yaml(startup_timeout_s, max_batch_tokens, fixed_port), "test.yaml", "/");
    EXPECT_TRUE(d.ok()) << d.error().message();
    deployment_ = std::move(d).value();
    auto world = worker::make_local_world(3);
    for (auto& t : world) transports_.push_back(std::make_unique<Killable>(std::move(t)));
    const auto buckets = config::serving_buckets(deployment_).value();
    for (int r = 1; r < 3; ++r) {
      worker::RunnerFactory factory = factory_for ? factory_for(r, deployment_) : nullptr;
      if (!factory) {
        // Copies: an aborted worker's compute thread may still be loading after this job is gone.
        factory = [model = *deployment_.model(config::Role::kScorer), backend = deployment_.ranks[1].backend, buckets] {
          return worker::load_scorer(model, backend, buckets);
        };
      }
      workers_.push_back(std::async(std::launch::async, [this, r, factory] {
        const auto topo = worker::Topology::make(deployment_, r, 3).value();
        return worker::run_worker(*transports_[static_cast<size_t>(r)], topo, deployment_.health, factory);
      }));
    }
    coordinator_ = std::async(std::launch::async, [this] {
      const auto topo = worker::Topology::make(deployment_, 0, 3).value();
      return run_coordinator(deployment_, topo, *transports_[0], stop_, [this](uint16_t port) { port_.set_value(port); });
    });
  }
  ~InProcessJob() {
    stop_ = true;
    if (coordinator_.valid()) coordinator_.wait();
    // Workers end on the coordinator's Shutdown or Abort; any left after that end on silence.
    for (auto& w : workers_) {
      if (w.valid()) w.wait_for(5s);
    }
    for (auto& t : transports_) t->kill();
    for (auto& w : workers_) {
      if (w.valid()) w.wait();
    }
  }

  std::optional<uint16_t> port() {
    auto f = port_.get_future();
    if (f.wait_for(60s) != std::future_status::ready) return std::nullopt;
    return f.get();
  }
  std::optional<int> result(std::chrono::milliseconds wait) {
    if (!exit_) {
      if (coordinator_.wait_for(wait) != std::future_status::ready) return std::nullopt;
      exit_ = coordinator_.get();
    }
    return exit_->code;
  }
  bool orderly() const { return exit_ && exit_->orderly; }
  int worker_result(int rank) { return workers_[static_cast<size_t>(rank - 1)].get(); }
  void kill(int rank) { transports_[static_cast<size_t>(rank)]->kill(); }
  void stop() { stop_ = true; }
  const config::Deployment& deployment() const { return deployment_; }

 private:
  config::Deployment deployment_;
  std::vector<std::unique_ptr<Killable>> transports_;
  std::atomic<bool> stop_{false};
  std::promise<uint16_t> port_;
  std::future<CoordinatorExit> coordinator_;
  std::optional<CoordinatorExit> exit_;
  std::vector<std::future<int>> workers_;
};

// The same bits as a float printed shortest ("0.25151247"), read back.
float as_float(const json& j) { return static_cast<float>(j.get<double>()); }

TEST(Service, AnswersAreTheScorersOwnBitsAndAStopIsClean) {
  InProcessJob job;
  auto port = job.port();
  ASSERT_TRUE(port);
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/fixtures/decision/reference.json");
  const json ref = json::parse(in);
  json seqs = json::array();
  for (const json& b : ref.at("batches")) {
    for (const json& s : b.at("sequences")) {
      if (seqs.size() < 40) seqs.push_back({{"ids", s.at("ids")}, {"markers", s.at("markers")}, {"qtype", s.at("qtype")}});
    }
  }
  loadgen::HttpConnection c(*port);
  auto r = c.request("POST", "/v1/score", json{{"sequences", seqs}}.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json got = json::parse(r->body).at("sequences");
  // The reference: the same runner the workers use, one sequence per batch.
  const auto& d = job.deployment();
  auto runner = worker::load_scorer(*d.model(config::Role::kScorer), d.ranks[1].backend, config::serving_buckets(d).value());
  ASSERT_TRUE(runner.ok()) << runner.error().message();
  for (size_t i = 0; i < seqs.size(); ++i) {
    ir::Batch b;
    b.add_sequence(seqs[i]["ids"].get<std::vector<uint32_t>>(), seqs[i]["markers"].get<std::vector<uint32_t>>(),
                   seqs[i]["qtype"].get<uint8_t>());
    auto out = runner.value()->run(b);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(got[i]["logits"].size(), out->logits.size()) << i;
    for (size_t k = 0; k < out->logits.size(); ++k) {
      EXPECT_EQ(as_float(got[i]["logits"][k]), out->logits[k]) << i << "," << k;
    }
    EXPECT_EQ(as_float(got[i]["act"][0]), out->act[0][0]) << i;
    EXPECT_EQ(as_float(got[i]["act"][1]), out->act[0][1]) << i;
  }
  job.stop();
  auto code = job.result(30s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, kExitClean);
  EXPECT_TRUE(job.orderly());
  EXPECT_EQ(job.worker_result(1), 0);  // each said goodbye after the coordinator's Shutdown
  EXPECT_EQ(job.worker_result(2), 0);
}

TEST(Service, DecideQuestionsLongerThanABatchAre422) {
  InProcessJob job(nullptr, 20, 256);
  auto port = job.port();
  ASSERT_TRUE(port);
  std::string state;
  for (int i = 0; i < 400; ++i) state += "word" + std::to_string(i % 10) + " ";
  const json q = {{"qtype", "choice"}, {"question", "which?"}, {"options", {"a", "b"}}};
  loadgen::HttpConnection c(*port);
  auto r = c.request("POST", "/v1/decide", json{{"state", state}, {"questions", {q}}}.dump(), 10s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422) << r->body;
  EXPECT_EQ(json::parse(r->body).at("error").at("param"), "questions[0]") << r->body;
  auto ok = c.request("POST", "/v1/decide", json{{"state", "short"}, {"questions", {q, q}}}.dump(), 10s);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body).at("answers").size(), 2u);
}

// A scoring-only deployment has no generation roles: the generation routes say so (404), with the
// right method rules, and are counted under their own endpoint.
TEST(Service, GenerationRoutesWithoutGenerationRoles) {
  InProcessJob job;
  auto port = job.port();
  ASSERT_TRUE(port);
  loadgen::HttpConnection c(*port);
  auto r = c.request("POST", "/v1/completions", R"({"prompt": "hi"})", 10s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(json::parse(r->body).at("error").at("message"),
            "/v1/completions is not served here: the deployment has no generation roles (target and drafter)");
  auto chat = c.request("POST", "/v1/chat/completions", R"({"messages": []})", 10s);
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 404) << chat->body;
  std::optional<loadgen::HttpReply> m;
  for (int i = 0; i < 50; ++i) {
    m = c.request("GET", "/metrics", "", 10s);
    if (m && m->body.find("tandem_requests_total{endpoint=\"/v1/chat/completions\",status=\"404\"} 1") !=
                 std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tandem_requests_total{endpoint=\"/v1/completions\",status=\"404\"} 1"), std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("# TYPE tandem_generation_tokens_total counter"), std::string::npos);
}

TEST(Service, AWorkerDyingWhileServing) {
  InProcessJob job;
  auto port = job.port();
  ASSERT_TRUE(port);
  job.kill(2);
  const auto killed = std::chrono::steady_clock::now();
  std::optional<loadgen::HttpReply> h;
  while (std::chrono::steady_clock::now() - killed < 3s) {
    loadgen::HttpConnection c(*port);
    h = c.request("GET", "/health", "", 1s);
    if (h && h->status == 503) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 2s);
  EXPECT_NE(h->body.find("rank 2 (scorer, cpu) is dead"), std::string::npos) << h->body;
  // Still answering on rank 1 during the grace.
  loadgen::HttpConnection c(*port);
  auto r = c.request("POST", "/v1/score", R"({"sequences": [{"ids": [1, 4, 9, 2], "markers": [1], "qtype": 0}]})", 5s);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->status == 200 || r->status == 503) << r->body;
  auto code = job.result(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, kExitRankDied);
  EXPECT_FALSE(job.orderly());  // a rank is gone: MPI_Finalize would wait for it
}

// Options cut by the layout's budgets are named in the answer's usage, with their token counts; a
// question that fits reports nothing.
TEST(Service, DecideReportsTruncationPerField) {
  InProcessJob job;
  auto port = job.port();
  ASSERT_TRUE(port);
  std::string shared;
  for (int i = 0; i < 40; ++i) shared += "word" + std::to_string(i % 10) + " ";
  const json long_q = {{"qtype", "choice"}, {"question", "which?"}, {"options", {shared + "alpha", shared + "beta", "no"}}};
  const json short_q = {{"qtype", "choice"}, {"question", "which?"}, {"options", {"a", "b"}}};
  loadgen::HttpConnection c(*port);
  auto r = c.request("POST", "/v1/decide", json{{"state", "a ticket"}, {"questions", {short_q, long_q}}}.dump(), 10s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json answers = json::parse(r->body).at("answers");
  EXPECT_EQ(answers[0].at("usage").at("truncated"), json::array());
  const json& usage = answers[1].at("usage");
  EXPECT_EQ(usage.at("truncated"), json({"questions[1].options[0]", "questions[1].options[1]"})) << usage.dump();
  EXPECT_GT(usage.at("option_tokens")[0].get<int>(), 48) << usage.dump();
  EXPECT_EQ(usage.at("option_tokens_used"), json({48, 48, usage.at("option_tokens")[2]})) << usage.dump();
  EXPECT_EQ(usage.at("question_tokens_used"), usage.at("question_tokens"));
  EXPECT_EQ(usage.at("state_tokens_used"), usage.at("state_tokens"));
}

// The port answers from the moment it is bound: 503 naming what still loads, not a hang.
TEST(Service, ThePortAnswers503WhileTheWorkersLoad) {
  auto slow = [](int rank, const config::Deployment& d) -> worker::RunnerFactory {
    if (rank != 1) return nullptr;
    return [model = *d.model(config::Role::kScorer), backend = d.ranks[1].backend,
            buckets = config::serving_buckets(d).value()]() {
      std::this_thread::sleep_for(1500ms);
      return worker::load_scorer(model, backend, buckets);
    };
  };
  // A port free a moment ago (the kernel's pick), for the job to bind.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  // NOLINTNEXTLINE: the sockets API takes sockaddr*
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // NOLINTNEXTLINE: the sockets API takes sockaddr*
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  const uint16_t fixed = ntohs(addr.sin_port);
  InProcessJob job(slow, 20, 2048, fixed);
  std::optional<loadgen::HttpReply> h;
  for (int i = 0; i < 100 && !h; ++i) {
    std::this_thread::sleep_for(10ms);
    loadgen::HttpConnection probe(fixed);
    if (probe.connected()) h = probe.request("GET", "/health", "", 1s);
  }
  ASSERT_TRUE(h) << "the port was not bound before the workers loaded";
  EXPECT_EQ(h->status, 503) << h->body;
  EXPECT_NE(h->body.find("the server is starting: rank 1 (scorer, cpu) is starting"), std::string::npos) << h->body;
  auto port = job.port();
  ASSERT_TRUE(port);
  loadgen::HttpConnection c(*port);
  auto ready = c.request("GET", "/health", "", 5s);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
}

worker::RunnerFactory failing(const std::string& why) {
  return [why]() -> Result<std::unique_ptr<worker::BatchRunner>> { return Error(ErrorKind::kShape, why); };
}

TEST(Service, AWorkerThatFailsToLoad) {
  InProcessJob job([](int rank, const config::Deployment&) {
    return rank == 2 ? failing("tensor type_emb.weight: shape [2, 128], expected [3, 128]") : worker::RunnerFactory();
  });
  auto code = job.result(30s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, kExitStartup);
  EXPECT_TRUE(job.orderly());          // every rank alive: the job ends with MPI_Finalize, no abort
  EXPECT_EQ(job.worker_result(1), 0);  // told to go, not left waiting: each said goodbye
  EXPECT_EQ(job.worker_result(2), 0);
}

TEST(Service, AWorkerDyingWhileLoading) {
  auto slow = [](int rank, const config::Deployment&) -> worker::RunnerFactory {
    if (rank != 2) return nullptr;
    return []() -> Result<std::unique_ptr<worker::BatchRunner>> {
      std::this_thread::sleep_for(3s);
      return Error(ErrorKind::kInternal, "too late");
    };
  };
  InProcessJob job(slow);
  std::this_thread::sleep_for(300ms);
  job.kill(2);
  const auto start = std::chrono::steady_clock::now();
  auto code = job.result(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, kExitStartup);
  EXPECT_FALSE(job.orderly());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // noticed by heartbeat, not by the slow load
}

TEST(Service, StartUpTimeout) {
  auto slow = [](int rank, const config::Deployment&) -> worker::RunnerFactory {
    if (rank != 1) return nullptr;
    return []() -> Result<std::unique_ptr<worker::BatchRunner>> {
      std::this_thread::sleep_for(2500ms);
      return Error(ErrorKind::kInternal, "too late");
    };
  };
  InProcessJob job(slow, 1);
  auto code = job.result(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, kExitStartup);
}

}  // namespace
}  // namespace tandem::coordinator

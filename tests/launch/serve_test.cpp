// The serving job end to end under mpirun (3 ranks, CPU backend; --oversubscribe added by the launcher
// where cores are fewer), through `tandem launch`: answers equal `tandem score` on the same inputs;
// malformed requests (a number past a double included) each get their 4xx with the field named while
// the job keeps serving, HEAD /health answers, a client that leaves is counted under its endpoint;
// 10,000 requests over 64 connections lose, duplicate or mix up nothing; a full queue answers 429; a
// worker killed under load turns /health 503 within 2 s, fails its requests with 503 (none hangs) and
// the job exits non-zero; start-up failures and a wrong rank count end the job with a message naming
// the rank, and no Open MPI noise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <future>

#include "bench/loadgen_http.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using loadgen::HttpReply;
using nlohmann::json;

std::optional<HttpReply> post(uint16_t port, const std::string& target, const std::string& body) {
  HttpConnection c(port);
  return c.request("POST", target, body, 60s);
}

int health(uint16_t port) {
  HttpConnection c(port);
  auto r = c.request("GET", "/health", "", 5s);
  return r ? r->status : 0;
}

TEST(Serve, AnswersEqualTandemScore) {
  ServiceJob job(cpu_deployment(2));
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  EXPECT_EQ(health(*port), 200);

  // /v1/score, in requests of up to 100 sequences, against `tandem score` on all of them at once.
  const json seqs = fixture_sequences();
  ASSERT_GE(seqs.size(), 100u);
  TempDir dir;
  const json want = tandem_score(dir, {{"sequences", seqs}});
  ASSERT_EQ(want.size(), seqs.size());
  std::vector<std::future<std::optional<HttpReply>>> replies;
  for (size_t at = 0; at < seqs.size(); at += 100) {
    json part = json::array();
    for (size_t i = at; i < std::min(seqs.size(), at + 100); ++i) part.push_back(seqs[i]);
    replies.push_back(std::async(std::launch::async, [&, body = json{{"sequences", part}}.dump()] {
      return post(*port, "/v1/score", body);
    }));
  }
  size_t index = 0;
  for (auto& f : replies) {
    auto r = f.get();
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json got = json::parse(r->body);
    EXPECT_EQ(got.at("model"), "decision-tiny");
    for (const json& s : got.at("sequences")) {
      // Same keys, same numbers, same text: the float bits round-trip in both.
      EXPECT_EQ(s.dump(), want[index].dump()) << "sequence " << index;
      ++index;
    }
  }
  EXPECT_EQ(index, seqs.size());

  // /v1/decide on the sample questions: the laid-out sequences are the fixture's, so the answers are
  // `tandem score`'s on tests/fixtures/decision-tiny/sample.json.
  std::ifstream sample_in(kDecisionTiny + "/sample.json");
  const json sample = json::parse(sample_in);
  const json decide = {{"state",
                        "Customer email: my order 4521 arrived broken and I want a refund, not a replacement. "
                        "This is the second time this month."},
                       {"questions", sample.at("questions")}};
  auto r = post(*port, "/v1/decide", decide.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json answers = json::parse(r->body).at("answers");
  const json sample_want = tandem_score(dir, sample);
  ASSERT_EQ(answers.size(), sample_want.size());
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].at("logits"), sample_want[i].at("logits")) << i;
    EXPECT_EQ(answers[i].at("act"), sample_want[i].at("act")) << i;
    EXPECT_EQ(answers[i].at("probabilities"), sample_want[i].at("probs")) << i;
    EXPECT_EQ(answers[i].at("pick"), sample_want[i].at("pick")) << i;
    EXPECT_EQ(answers[i].at("usage").at("input_tokens"), sample.at("sequences")[i].at("ids").size()) << i;
    const size_t pick = answers[i].at("pick").get<size_t>();
    EXPECT_EQ(answers[i].at("option"), sample.at("questions")[i].at("options")[pick]);
  }
  // The sample's one-option noul question ("The customer is angry.") answers P(true) = sigmoid(z / T),
  // not a softmax over one logit (always 1).
  ASSERT_EQ(sample.at("questions")[2].at("qtype"), "noul");
  ASSERT_EQ(answers[2].at("probabilities").size(), 1u);
  const double z = answers[2].at("logits")[0].get<double>(), t = 1.9834;  // the fixture's noul temperature
  EXPECT_NEAR(answers[2].at("probabilities")[0].get<double>(), 1.0 / (1.0 + std::exp(-z / t)), 1e-6);

  HttpConnection c(*port);
  auto models = c.request("GET", "/v1/models", "", 5s);
  ASSERT_TRUE(models);
  const json m = json::parse(models->body).at("data").at(0);
  EXPECT_EQ(m.at("id"), "decision-tiny");
  EXPECT_EQ(m.at("ranks").size(), 2u);
  auto metrics = c.request("GET", "/metrics", "", 5s);
  ASSERT_TRUE(metrics);
  for (const char* name : {"tandem_requests_total{endpoint=\"/v1/score\",status=\"200\"}", "tandem_queue_depth 0",
                           "tandem_queue_time_seconds_bucket", "tandem_batch_tokens_bucket{bucket=",
                           "tandem_plan_run_seconds_bucket{rank=\"1\"", "tandem_rank_up{rank=\"2\",role=\"scorer\"} 1",
                           "tandem_rank_memory_bytes{rank=\"1\",kind=\"weights\"}"}) {
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name;
  }

  // An orderly stop (Ctrl-C reaches the launcher): exit 0.
  kill(job.launcher(), SIGINT);
  auto code = job.wait(60s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 0) << job.output();
}

struct Bad {
  std::string name;
  std::string raw;  // the whole request
  int status;
  std::string param;  // "" for null
};

std::string post_text(const std::string& target, const std::string& body, const std::string& type = "application/json") {
  return "POST " + target + " HTTP/1.1\r\nHost: t\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(Serve, MalformedRequestsGetTheirStatusAndTheServerKeepsServing) {
  ServiceJob job(cpu_deployment(2, "limits: {max_body_bytes: 65536, read_timeout_ms: 1500, max_questions: 8, "
                                   "max_sequences: 8, max_request_tokens: 4000}\n"
                                   "batcher: {max_batch_tokens: 1024}\n"));
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  const std::string q = R"({"qtype": "choice", "question": "which?", "options": ["a", "b"]})";
  const std::string s = R"({"ids": [1, 5, 4, 2], "markers": [2], "qtype": "choice"})";
  auto ids = [](int n) {
    std::string list;
    for (int i = 0; i < n; ++i) list += (i ? "," : "") + std::to_string(5 + i % 900);
    return "{\"ids\": [" + list + "], \"markers\": [], \"qtype\": 0}";
  };
  const std::string seq_510 = ids(510);
  const std::vector<Bad> cases = {
      {"bad json", post_text("/v1/decide", "{\"state\": "), 400, "state"},
      // A number past a double: out_of_range in the parser, a 400 naming the field, not a hang.
      {"number overflow", post_text("/v1/decide", "[1e999]"), 400, "[0]"},
      {"number overflow in a field", post_text("/v1/score", R"({"sequences": [{"ids": [1e999], "markers": [], "qtype": 0}]})"), 400, "sequences[0].ids[0]"},
      {"not an object", post_text("/v1/score", "[]"), 400, ""},
      {"empty body", post_text("/v1/score", ""), 400, ""},
      {"state missing", post_text("/v1/decide", "{\"questions\": [" + q + "]}"), 400, "state"},
      {"state wrong type", post_text("/v1/decide", "{\"state\": 5, \"questions\": [" + q + "]}"), 400, "state"},
      {"questions wrong type", post_text("/v1/decide", R"({"state": "s", "questions": "all"})"), 400, "questions"},
      {"questions empty", post_text("/v1/decide", R"({"state": "s", "questions": []})"), 400, "questions"},
      {"unknown qtype", post_text("/v1/decide", R"({"state": "s", "questions": [{"qtype": "rank", "question": "q", "options": ["a"]}]})"), 400, "questions[0].qtype"},
      {"no options", post_text("/v1/decide", R"({"state": "s", "questions": [{"qtype": "choice", "question": "q", "options": []}]})"), 400, "questions[0].options"},
      {"options missing", post_text("/v1/decide", R"({"state": "s", "questions": [{"qtype": "noul", "question": "q"}]})"), 400, "questions[0].options"},
      {"option wrong type", post_text("/v1/decide", R"({"state": "s", "questions": [{"qtype": "score", "question": "q", "options": [1]}]})"), 400, "questions[0].options[0]"},
      {"unknown field", post_text("/v1/decide", "{\"state\": \"s\", \"questions\": [" + q + "], \"top_k\": 3}"), 400, "top_k"},
      {"unknown question field", post_text("/v1/decide", R"({"state": "s", "questions": [{"qtype": "choice", "question": "q", "options": ["a"], "weight": 2}]})"), 400, "questions[0].weight"},
      {"too many questions", post_text("/v1/decide", "{\"state\": \"s\", \"questions\": [" + q + "," + q + "," + q + "," + q + "," + q + "," + q + "," + q + "," + q + "," + q + "]}"), 413, "questions"},
      {"unknown model", post_text("/v1/score", "{\"model\": \"gpt-9\", \"sequences\": [" + s + "]}"), 404, "model"},
      {"id outside vocabulary", post_text("/v1/score", R"({"sequences": [{"ids": [1, 1024], "markers": [], "qtype": 0}]})"), 400, "sequences[0].ids[1]"},
      {"negative id", post_text("/v1/score", R"({"sequences": [{"ids": [-1], "markers": [], "qtype": 0}]})"), 400, "sequences[0].ids[0]"},
      {"marker outside", post_text("/v1/score", R"({"sequences": [{"ids": [1, 2], "markers": [5], "qtype": 0}]})"), 400, "sequences[0].markers[0]"},
      {"qtype wrong", post_text("/v1/score", R"({"sequences": [{"ids": [1], "markers": [], "qtype": "pick"}]})"), 400, "sequences[0].qtype"},
      {"unknown sequence field", post_text("/v1/score", R"({"sequences": [{"ids": [1], "markers": [], "qtype": 0, "type": 1}]})"), 400, "sequences[0].type"},
      {"sequence too long", post_text("/v1/score", "{\"sequences\": [" + ids(1100) + "]}"), 422, "sequences[0].ids"},
      // Within a batch (1024) but past the checkpoint's max_len 512.
      {"longer than the model takes", post_text("/v1/score", "{\"sequences\": [" + ids(513) + "]}"), 422, "sequences[0].ids"},
      {"too many tokens", post_text("/v1/score", "{\"sequences\": [" + seq_510 + "," + seq_510 + "," + seq_510 + "," +
                                                   seq_510 + "," + seq_510 + "," + seq_510 + "," + seq_510 + "," +
                                                   seq_510 + "]}"), 413, "sequences"},
      {"huge body", post_text("/v1/score", "{\"sequences\": [" + std::string(70000, ' ') + "]}"), 413, "body"},
      {"wrong content type", post_text("/v1/score", "{}", "text/plain"), 415, "Content-Type"},
      {"wrong method", "GET /v1/score HTTP/1.1\r\nHost: t\r\n\r\n", 405, ""},
      {"unknown route", "GET /v2/everything HTTP/1.1\r\nHost: t\r\n\r\n", 404, ""},
      {"headers too large", "GET /health HTTP/1.1\r\nHost: t\r\nX-Pad: " + std::string(20000, 'p') + "\r\n\r\n", 431, "headers"},
      {"not http", "EHLO tandem\r\n\r\n", 400, ""},
  };
  ASSERT_GE(cases.size(), 25u);
  for (const Bad& b : cases) {
    HttpConnection c(*port);
    ASSERT_TRUE(c.send_raw(b.raw)) << b.name;
    auto r = c.read_reply(10s);
    ASSERT_TRUE(r) << b.name;
    EXPECT_EQ(r->status, b.status) << b.name << ": " << r->body;
    json body;
    ASSERT_NO_THROW(body = json::parse(r->body)) << b.name;
    const json& param = body.at("error").at("param");
    EXPECT_EQ(param.is_null() ? std::string() : param.get<std::string>(), b.param) << b.name << ": " << r->body;
    EXPECT_FALSE(body.at("error").at("message").get<std::string>().empty()) << b.name;
  }
  // A slow-loris body: 408 naming the body, within the read timeout.
  {
    HttpConnection c(*port);
    ASSERT_TRUE(c.send_raw("POST /v1/score HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                           "Content-Length: 500\r\n\r\n{\"seq"));
    std::optional<HttpReply> r;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 40 && !r; ++i) {
      c.send_raw(" ");
      r = c.read_reply(100ms);
    }
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_EQ(json::parse(r->body).at("error").at("param"), "body");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  }
  // Pipelined behind a body the parser refuses, a request is still answered.
  {
    HttpConnection c(*port);
    ASSERT_TRUE(c.send_raw(post_text("/v1/decide", "[1e999]") + post_text("/v1/score", "{\"sequences\": [" + s + "]}")));
    auto first = c.read_reply(5s);
    auto second = c.read_reply(5s);
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->status, 400);
    EXPECT_EQ(second->status, 200) << second->body;
  }
  // HEAD /health, as load balancers probe: GET's status and headers, no body.
  {
    HttpConnection c(*port);
    ASSERT_TRUE(c.send_raw("HEAD /health HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto r = c.read_reply(5s, /*head_request=*/true);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->headers["content-length"], "0");
    EXPECT_FALSE(c.has_unread(std::chrono::milliseconds(200)));
  }
  // A client that leaves before its answer is counted under its endpoint, as status 499.
  {
    HttpConnection c(*port);
    ASSERT_TRUE(c.send_raw(post_text("/v1/score", "{\"sequences\": [" + seq_510 + "," + seq_510 + "," + seq_510 +
                                                      "," + seq_510 + "," + seq_510 + "," + seq_510 + "," + seq_510 + "]}")));
  }
  bool counted = false;
  for (int i = 0; i < 50 && !counted; ++i) {
    HttpConnection c(*port);
    auto m = c.request("GET", "/metrics", "", 5s);
    ASSERT_TRUE(m);
    counted = m->body.find("tandem_requests_total{endpoint=\"/v1/score\",status=\"499\"} 1") != std::string::npos;
    EXPECT_EQ(m->body.find("endpoint=\"other\",status=\"499\""), std::string::npos) << m->body;
    if (!counted) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(counted);
  // Still serving, and still healthy.
  EXPECT_EQ(health(*port), 200);
  auto ok = post(*port, "/v1/score", "{\"sequences\": [" + s + "]}");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto decided = post(*port, "/v1/decide", "{\"state\": \"all good\", \"questions\": [" + q + "]}");
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->status, 200) << decided->body;
}

// Runs tandem-loadgen; its JSON summary and exit code.
std::pair<int, json> loadgen(const TempDir& dir, uint16_t port, std::vector<std::string> args) {
  std::vector<std::string> argv = {TANDEM_LOADGEN, "--url", "http://127.0.0.1:" + std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  static int n = 0;
  auto r = run_command(argv, dir.path() / ("loadgen-" + std::to_string(n++) + ".log"));
  return {r.code, json_from_first_brace(r.output)};
}

TEST(Serve, TenThousandRequestsOverSixtyFourConnections) {
  ServiceJob job(cpu_deployment(2, "limits: {max_queue_sequences: 100000}\n"));
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  TempDir dir;
  const auto [input, expect] = score_pool_files(dir);
  auto [code, summary] = loadgen(dir, *port, {"--input", input, "--expect", expect, "--requests", "10000",
                                              "--connections", "64", "--per-request", "2"});
  EXPECT_EQ(code, 0) << summary.dump(2);
  EXPECT_EQ(summary.at("lost"), 0);
  EXPECT_EQ(summary.at("timed_out"), 0);
  EXPECT_EQ(summary.at("mismatched"), 0);
  EXPECT_EQ(summary.at("duplicated"), 0);
  EXPECT_EQ(summary.at("statuses").at("200"), 10000);
}

TEST(Serve, AFullQueueAnswers429NotHangs) {
  ServiceJob job(cpu_deployment(2, "limits: {max_queue_sequences: 6, max_sequences: 4, max_questions: 4}\n"
                                   "batcher: {max_batch_tokens: 128}\n"));
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  TempDir dir;
  const auto [input, expect] = score_pool_files(dir);
  auto [code, summary] = loadgen(dir, *port, {"--input", input, "--expect", expect, "--requests", "1500",
                                              "--connections", "64", "--per-request", "4", "--allow", "429",
                                              "--timeout-ms", "20000"});
  EXPECT_EQ(code, 0) << summary.dump(2);
  EXPECT_EQ(summary.at("lost"), 0);
  EXPECT_EQ(summary.at("timed_out"), 0);
  EXPECT_EQ(summary.at("mismatched"), 0);
  EXPECT_GT(summary.at("statuses").value("429", 0), 0) << summary.dump(2);
  EXPECT_GT(summary.at("statuses").value("200", 0), 0) << summary.dump(2);
  EXPECT_EQ(health(*port), 200);
}

TEST(Serve, AWorkerKilledUnderLoad) {
  ServiceJob job(cpu_deployment(2, "limits: {request_timeout_ms: 5000}\n"
                                   "health: {heartbeat_ms: 100, dead_after_ms: 1000, exit_grace_ms: 4000}\n"));
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  TempDir dir;
  const auto [input, expect] = score_pool_files(dir);
  auto load = std::async(std::launch::async, [&, in = input, ex = expect] {
    return loadgen(dir, *port, {"--input", in, "--expect", ex, "--requests", "100000", "--connections", "64",
                                "--allow", "503", "--timeout-ms", "7000"});
  });
  std::this_thread::sleep_for(1500ms);
  ASSERT_TRUE(job.kill_rank(2));
  const auto killed = std::chrono::steady_clock::now();
  std::optional<HttpReply> h;
  while (std::chrono::steady_clock::now() - killed < 3s) {
    HttpConnection c(*port);
    h = c.request("GET", "/health", "", 1s);
    if (h && h->status == 503) break;
    std::this_thread::sleep_for(50ms);
  }
  const auto noticed = std::chrono::steady_clock::now() - killed;
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_LE(noticed, 2s);
  EXPECT_NE(h->body.find("rank 2 (scorer, cpu) is dead"), std::string::npos) << h->body;
  // The job ends non-zero after the grace. Until it is gone every request gets an answer (200, or 503
  // from the dead rank or the stopping job) and none hangs past its timeout; after, connections are
  // refused.
  auto code = job.wait(30s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 3) << job.output();
  auto [lg_code, summary] = load.get();
  EXPECT_EQ(summary.at("mismatched"), 0) << summary.dump(2);
  EXPECT_EQ(summary.at("duplicated"), 0) << summary.dump(2);
  EXPECT_GT(summary.at("statuses").value("503", 0), 0) << summary.dump(2);
  EXPECT_GT(summary.at("statuses").value("200", 0), 0) << summary.dump(2);
  EXPECT_EQ(summary.at("timed_out"), 0) << summary.dump(2);
  EXPECT_LE(summary.at("latency_ms").at("max").get<double>(), 7000.0) << summary.dump(2);
  EXPECT_NE(job.output().find("rank 2 (scorer, cpu) is dead"), std::string::npos);
  EXPECT_EQ(mpi_noise(job.output()), "") << job.output();
}

TEST(Serve, AWorkerThatCannotLoadEndsTheJobAtStart) {
  ServiceJob job("server: {host: 127.0.0.1, port: 0}\nbackend: {name: cpu, threads: 1}\n"
                 "models:\n  scorer: {dir: " TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny}\n"
                 "ranks:\n  - role: coordinator\n  - role: scorer\n  - {role: scorer, backend: cuda, device: 63}\n");
  auto code = job.wait(120s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 2) << job.output();
  EXPECT_NE(job.output().find("rank 2 (scorer, cuda:63) failed to load"), std::string::npos) << job.output();
  EXPECT_EQ(job.output().find("tandem: serving"), std::string::npos);
  // Every rank was alive: an orderly end, told by rank 0 alone, without Open MPI's abort noise.
  EXPECT_EQ(mpi_noise(job.output()), "") << job.output();
  EXPECT_EQ(job.output().find("the coordinator ended the job"), std::string::npos) << job.output();
}

// Rank 0's own load (the tokenizer) failing ends the start-up with its reason; the workers, which read only
// the weights, are told to go.
TEST(Serve, ACoordinatorThatCannotReadTheTokenizerEndsTheJobAtStart) {
  TempDir dir;
  const auto model = dir.path() / "model";
  std::filesystem::copy(TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny", model, std::filesystem::copy_options::recursive);
  std::ofstream(model / "tokenizer" / "tokenizer.json", std::ios::trunc) << "{\"model\": {\"type\": \"BPE\"";
  ServiceJob job("server: {host: 127.0.0.1, port: 0}\nbackend: {name: cpu, threads: 1}\n"
                 "models:\n  scorer: {dir: " + model.string() + "}\n"
                 "ranks:\n  - role: coordinator\n  - role: scorer\n");
  auto code = job.wait(120s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 2) << job.output();
  EXPECT_NE(job.output().find("rank 0 cannot open the scorer model"), std::string::npos) << job.output();
  EXPECT_NE(job.output().find("tokenizer.json"), std::string::npos) << job.output();
  EXPECT_EQ(job.output().find("tandem: serving"), std::string::npos);
  EXPECT_EQ(mpi_noise(job.output()), "") << job.output();
}

TEST(Serve, RankCountMustMatchTheDeployment) {
  TempDir dir;
  const auto config = dir.path() / "deploy.yaml";
  std::ofstream(config) << cpu_deployment(2);
  auto direct = run_command({"mpirun", "-np", "2", "--oversubscribe", TANDEM_BINARY, "serve", "--config", config.string()},
                            dir.path() / "mpirun.log", 120s);
  EXPECT_NE(direct.code, 0);
  EXPECT_NE(direct.output.find("'ranks' lists 3 ranks (coordinator, scorer, scorer) but the job has 2"),
            std::string::npos)
      << direct.output;
  auto launch = run_command({TANDEM_BINARY, "launch", "--config", config.string(), "--np", "4"}, dir.path() / "l.log");
  EXPECT_EQ(launch.code, 1);
  EXPECT_NE(launch.output.find("lists 3 ranks under 'ranks' but --np is 4"), std::string::npos) << launch.output;
  std::ofstream(dir.path() / "hosts") << "# two slots\nnode0 slots=2\n";
  auto hosts = run_command({TANDEM_BINARY, "launch", "--config", config.string(), "--hostfile",
                            (dir.path() / "hosts").string()},
                           dir.path() / "h.log");
  EXPECT_EQ(hosts.code, 1);
  EXPECT_NE(hosts.output.find("has 2 slots for the 3 ranks"), std::string::npos) << hosts.output;
  std::ofstream(dir.path() / "bad.yaml") << "ranks:\n  - role: coordinator\n  - role: scorre\n";
  auto bad = run_command({TANDEM_BINARY, "launch", "--config", (dir.path() / "bad.yaml").string()}, dir.path() / "b.log");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("ranks[1].role: 'scorre' is not allowed"), std::string::npos) << bad.output;
}

TEST(Serve, LaunchShowsRanksDevicesAndTheNcclEnvironment) {
  TempDir dir;
  const auto config = dir.path() / "deploy.yaml";
  std::ofstream(config) << "server: {host: 0.0.0.0, port: 9123}\nbackend: {name: cuda, precision: f16}\n"
                           "models:\n  scorer: {dir: " TANDEM_SOURCE_DIR "/tests/fixtures/decision-tiny}\n"
                           "ranks:\n  - role: coordinator\n  - role: scorer\n  - {role: scorer, device: 3}\n";
  auto r = run_command({TANDEM_BINARY, "launch", "--config", config.string(), "--dry-run", "--", "--mca", "btl", "tcp,self"},
                       dir.path() / "dry.log");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* part : {"rank 1: scorer on GPU 0 of its node (f16)", "rank 2: scorer on GPU 3 of its node (f16)",
                           "will listen on http://0.0.0.0:9123", "mpirun -np 3 --enable-recovery",
                           "-x NCCL_NVLS_ENABLE", "--mca btl tcp,self", " serve --config "}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }
}

}  // namespace
}  // namespace tandem::testing

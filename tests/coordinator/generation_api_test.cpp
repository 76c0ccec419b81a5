// The generation routes (coordinator/generation_api.h) over real HTTP against a FakeGenerationService:
// whole and streamed (SSE) answers as OpenAI shapes them, usage with the speculative figures, stop
// strings across rounds and stop ids, UTF-8 split across tokens, the chat template, cancellation when
// the client leaves or the deadline passes (counted in /metrics), failures, refusals and the context
// limit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/loadgen_http.h"
#include "coordinator/generation_api.h"
#include "fake_generation_service.h"

namespace tandem::coordinator {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using nlohmann::json;
using testing::FakeGenerationService;

const GenerationFrontend& pylm() {
  static const std::unique_ptr<GenerationFrontend> f = [] {
    const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/models/pylm";
    auto r = GenerationFrontend::load("pylm", dir, dir + "/tokenizer.json");
    EXPECT_TRUE(r.ok()) << r.error().message();
    return std::move(r).value();
  }();
  return *f;
}

std::vector<uint32_t> encode(const std::string& text) { return pylm().tokenizer().encode(text).value(); }

// The events of an SSE body: the JSON of each `data:` line, and whether it ended with [DONE].
struct Events {
  std::vector<json> chunks;
  bool done = false;
};
Events events_of(const std::string& body) {
  Events out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an unterminated event: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string line = body.substr(at, end - at);
    at = end + 2;
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    EXPECT_FALSE(out.done) << "an event after [DONE]";
    if (line == "data: [DONE]") {
      out.done = true;
      continue;
    }
    out.chunks.push_back(json::parse(line.substr(6)));  // throws on invalid UTF-8: a split character
  }
  return out;
}

class GenerationApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::Listener listener;
    listener.host = "127.0.0.1";
    listener.port = 0;
    listener.io_threads = 2;
    limits_.request_timeout_ms = 1500;
    limits_.read_timeout_ms = 1000;
    auto s = HttpServer::start(listener, limits_, api_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    server_ = std::move(s).value();
  }
  void TearDown() override { server_->stop(); }

  loadgen::HttpReply post(const std::string& path, const std::string& body) {
    HttpConnection c(server_->port());
    auto r = c.request("POST", path, body, 5000ms);
    EXPECT_TRUE(r.has_value()) << path << " " << body;
    return r.value_or(loadgen::HttpReply{});
  }
  std::string metrics() const { return metrics_.render(0, {}); }
  bool has_metric(const std::string& line) const { return metrics().find(line + "\n") != std::string::npos; }

  config::Limits limits_;
  Metrics metrics_;
  FakeGenerationService fake_{6144, 1024};
  GenerationApi api_{pylm(), &fake_, metrics_};
  std::unique_ptr<HttpServer> server_;
};

const std::string kFox = "The quick brown fox jumps over the lazy dog";

TEST_F(GenerationApiTest, WholeCompletion) {
  fake_.script.tokens = encode(kFox);
  const auto n = static_cast<uint32_t>(fake_.script.tokens.size());
  auto r = post("/v1/completions", fmt::format(R"({{"model": "pylm", "prompt": "Once upon a time", "max_tokens": {},
                                                   "temperature": 0, "seed": 7}})",
                                               n));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(fake_.requests().size(), 1u);
  const GenerationRequest g = fake_.requests()[0];
  EXPECT_EQ(g.prompt, encode("Once upon a time"));
  EXPECT_EQ(g.max_tokens, n);
  EXPECT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.sampling.seed, 7u);
  EXPECT_EQ(g.stop_ids, (std::vector<uint32_t>{0}));  // <|endoftext|>, generation_config's eos_token_id
  EXPECT_TRUE(g.speculative);
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "pylm");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_TRUE(j["created"].is_number_integer());
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], kFox);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0].contains("token_ids"));
  const uint32_t rounds = (n + 2) / 3;
  const uint32_t accepted = n - rounds;
  EXPECT_EQ(j["usage"]["prompt_tokens"], g.prompt.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], n);
  EXPECT_EQ(j["usage"]["total_tokens"], g.prompt.size() + n);
  EXPECT_EQ(j["usage"]["speculative"]["rounds"], rounds);
  EXPECT_EQ(j["usage"]["speculative"]["drafted_tokens"], 2 * rounds);
  EXPECT_EQ(j["usage"]["speculative"]["accepted_tokens"], accepted);
  EXPECT_DOUBLE_EQ(j["usage"]["speculative"]["mean_acceptance_length"].get<double>(),
                   1.0 + static_cast<double>(accepted) / rounds);
  // /metrics saw the request.
  EXPECT_TRUE(has_metric(fmt::format("tandem_generation_tokens_total{{endpoint=\"/v1/completions\"}} {}", n)));
  EXPECT_TRUE(has_metric("tandem_generation_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(has_metric(fmt::format("tandem_generation_inter_token_seconds_count {}", n - 1)));
  EXPECT_TRUE(has_metric(fmt::format("tandem_generation_drafted_tokens_total {}", 2 * rounds)));
  EXPECT_TRUE(has_metric(fmt::format("tandem_generation_accepted_tokens_total {}", accepted)));
  EXPECT_TRUE(has_metric(fmt::format("tandem_generation_acceptance_length_count {}", rounds)));
  EXPECT_TRUE(
      has_metric(fmt::format("tandem_generation_accepted_tokens_per_position_total{{position=\"1\"}} {}", rounds)));
  EXPECT_TRUE(has_metric("tandem_generation_finished_total{endpoint=\"/v1/completions\",reason=\"length\"} 1"));
  for (int i = 0; i < 50 && !has_metric("tandem_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1"); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(has_metric("tandem_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1")) << metrics();
}

TEST_F(GenerationApiTest, TokenIdPromptAndReturnTokenIds) {
  fake_.script.tokens = {100, 200, 300, 400, 500};
  auto r = post("/v1/completions", R"({"prompt": [[5, 6, 7]], "max_tokens": 4, "return_token_ids": true,
                                       "speculative": false})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(fake_.requests()[0].prompt, (std::vector<uint32_t>{5, 6, 7}));
  EXPECT_FALSE(fake_.requests()[0].speculative);
  const json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["token_ids"], json::array({100, 200, 300, 400}));
  EXPECT_EQ(j["prompt_token_ids"], json::array({5, 6, 7}));
  EXPECT_EQ(j["choices"][0]["text"], pylm().tokenizer().decode({100, 200, 300, 400}).value());
  EXPECT_EQ(j["usage"]["speculative"]["drafted_tokens"], 0);
}

TEST_F(GenerationApiTest, StreamedCompletionInWholeCharacters) {
  const std::string text = "Grüße aus Köln — 日本語 🙂 done";
  fake_.script.tokens = encode(text);
  fake_.script.block = 2;
  const auto n = fake_.script.tokens.size();
  HttpConnection c(server_->port());
  auto r = c.request("POST", "/v1/completions",
                     fmt::format(R"({{"prompt": "x", "max_tokens": {}, "stream": true,
                                     "stream_options": {{"include_usage": true}}}})",
                                 n),
                     5000ms);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->headers["content-type"], "text/event-stream");
  EXPECT_EQ(r->headers["transfer-encoding"], "chunked");
  const Events ev = events_of(r->body);
  EXPECT_TRUE(ev.done);
  ASSERT_GE(ev.chunks.size(), 4u);
  std::string joined;
  for (size_t i = 0; i + 1 < ev.chunks.size(); ++i) {
    const json& chunk = ev.chunks[i];
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["id"], ev.chunks[0]["id"]);
    joined += chunk["choices"][0]["text"].get<std::string>();
    const bool last = i + 2 == ev.chunks.size();
    EXPECT_EQ(chunk["choices"][0]["finish_reason"], last ? json("length") : json(nullptr)) << i;
  }
  EXPECT_EQ(joined, text);
  const json& usage = ev.chunks.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], n);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 1);
  // The connection is kept for the next request.
  fake_.script.block = 3;
  auto next = c.request("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})", 5000ms);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
}

TEST_F(GenerationApiTest, StopStringAcrossRoundsIsCutAndCancels) {
  fake_.script.tokens = encode(kFox);
  fake_.script.block = 2;
  auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 100, "stop": ["zz", "n fox j"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["text"], "The quick brow");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(fake_.cancelled(1));
  EXPECT_TRUE(has_metric("tandem_generation_cancelled_total{reason=\"stop_string\"} 1"));
  // Streamed: the same text over the chunks.
  auto s = post("/v1/completions", R"({"prompt": "x", "max_tokens": 100, "stop": "n fox j", "stream": true})");
  const Events ev = events_of(s.body);
  ASSERT_TRUE(ev.done);
  std::string joined;
  for (const json& chunk : ev.chunks) joined += chunk["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(joined, "The quick brow");
  EXPECT_EQ(ev.chunks.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(fake_.cancelled(2));
}

TEST_F(GenerationApiTest, StopIdsEndWithoutText) {
  std::vector<uint32_t> tokens = encode("hello there");
  const size_t n = tokens.size();
  tokens.push_back(0);  // <|endoftext|>
  for (uint32_t id : encode(" more")) tokens.push_back(id);
  fake_.script.tokens = tokens;
  auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 50, "return_token_ids": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["text"], "hello there");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], n + 1);
  EXPECT_EQ(j["choices"][0]["token_ids"].back(), 0);
  // stop_token_ids join the EOS ids; <|im_end|> (2) then ends the request the same way.
  tokens[n] = 2;
  fake_.script.tokens = tokens;
  r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 50, "stop_token_ids": [2]})");
  j = json::parse(r.body);
  EXPECT_EQ(fake_.requests()[1].stop_ids, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(j["choices"][0]["text"], "hello there");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

// vLLM's ignore_eos (benchmarks ask for fixed output lengths): the EOS ids leave the request's stop ids, so
// generation goes on past an EOS (kept out of the text, as every special token) to max_tokens;
// stop_token_ids still end it.
TEST_F(GenerationApiTest, IgnoreEosRunsToMaxTokens) {
  std::vector<uint32_t> tokens = encode("hello there");
  tokens.push_back(0);  // <|endoftext|>
  for (uint32_t id : encode(" more")) tokens.push_back(id);
  fake_.script.tokens = tokens;
  auto r = post("/v1/completions", fmt::format(R"({{"prompt": "x", "max_tokens": {}, "ignore_eos": true,
                                                   "return_token_ids": true}})",
                                               tokens.size()));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_TRUE(fake_.requests()[0].stop_ids.empty());
  EXPECT_EQ(j["choices"][0]["text"], "hello there more");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], tokens.size());
  EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<uint32_t>>(), tokens);
  // Chat too, and stop_token_ids still stop it.
  r = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50,
                                       "ignore_eos": true, "stop_token_ids": [0]})");
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(fake_.requests()[1].stop_ids, (std::vector<uint32_t>{0}));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hello there");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(GenerationApiTest, ClientLeavingMidStreamCancels) {
  fake_.script.tokens = encode(kFox);
  fake_.script.forever = true;
  fake_.script.delay = 20ms;
  {
    HttpConnection c(server_->port());
    ASSERT_TRUE(
        c.send_raw(HttpConnection::request_text("POST", "/v1/completions", R"({"prompt": "x", "stream": true})")));
    ASSERT_TRUE(c.wait_for("data: {", 3000ms));
  }
  EXPECT_TRUE(fake_.cancelled(1));
  for (int i = 0; i < 100 && !has_metric("tandem_generation_cancelled_total{reason=\"client_gone\"} 1"); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(has_metric("tandem_generation_cancelled_total{reason=\"client_gone\"} 1")) << metrics();
  EXPECT_TRUE(has_metric("tandem_requests_total{endpoint=\"/v1/completions\",status=\"499\"} 1")) << metrics();
  EXPECT_TRUE(has_metric("tandem_generation_finished_total{endpoint=\"/v1/completions\",reason=\"cancelled\"} 1"));
}

TEST_F(GenerationApiTest, ClientLeavingBeforeAWholeAnswerCancels) {
  fake_.script.tokens = encode(kFox);
  fake_.script.forever = true;
  {
    HttpConnection c(server_->port());
    ASSERT_TRUE(c.send_raw(HttpConnection::request_text("POST", "/v1/chat/completions",
                                                        R"({"messages": [{"role": "user", "content": "hi"}]})")));
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(fake_.cancelled(1));
}

TEST_F(GenerationApiTest, StreamPastTheDeadlineEndsWithAnErrorEvent) {
  fake_.script.tokens = encode(kFox);
  fake_.script.forever = true;
  fake_.script.delay = 50ms;
  auto r = post("/v1/completions", R"({"prompt": "x", "stream": true})");
  const Events ev = events_of(r.body);
  EXPECT_TRUE(ev.done);
  ASSERT_FALSE(ev.chunks.empty());
  EXPECT_EQ(ev.chunks.back()["error"]["code"], 504);
  EXPECT_EQ(ev.chunks.back()["error"]["message"], "the request's deadline passed (limits.request_timeout_ms)");
  EXPECT_TRUE(fake_.cancelled(1));
  EXPECT_TRUE(has_metric("tandem_generation_cancelled_total{reason=\"timeout\"} 1"));
}

TEST_F(GenerationApiTest, FailuresAndRefusals) {
  fake_.script.tokens = encode(kFox);
  fake_.script.fail_after_rounds = 1;
  auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 20})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "rank 2 (target) stopped answering");
  auto s = post("/v1/completions", R"({"prompt": "x", "max_tokens": 20, "stream": true})");
  EXPECT_EQ(s.status, 200);
  const Events ev = events_of(s.body);
  EXPECT_TRUE(ev.done);
  EXPECT_EQ(ev.chunks.back()["error"]["message"], "rank 2 (target) stopped answering");
  fake_.refuse = ApiError{429, "the generation queue is full (64 requests)", "queue_full", std::nullopt};
  auto q = post("/v1/completions", R"({"prompt": "x", "stream": true})");
  EXPECT_EQ(q.status, 429);
  EXPECT_EQ(json::parse(q.body)["error"]["type"], "queue_full");
}

TEST_F(GenerationApiTest, PromptsPastTheContextAre422) {
  std::string ids = "1";
  for (int i = 1; i < 1000; ++i) ids += ",1";
  auto r = post("/v1/completions", R"({"prompt": [)" + ids + R"(], "max_tokens": 100})");
  EXPECT_EQ(r.status, 422);
  json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "max_tokens");
  EXPECT_EQ(e["message"], "the prompt (1000 tokens) and max_tokens (100) exceed the model's context of 1024 tokens "
                          "(max_context)");
  for (int i = 1000; i < 1024; ++i) ids += ",1";
  r = post("/v1/completions", R"({"prompt": [)" + ids + "]}");
  EXPECT_EQ(r.status, 422);
  e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_EQ(e["message"],
            "the prompt has 1024 tokens; the model's context holds 1024 (max_context), with at least one to generate");
  // Without max_tokens a completion takes 16, or what is left of the context.
  fake_.script.tokens = {100};
  r = post("/v1/completions", R"({"prompt": [)" + ids.substr(0, 2 * 1010 - 1) + "]}");
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(fake_.requests().size(), 1u);
  EXPECT_EQ(fake_.requests()[0].prompt.size(), 1010u);
  EXPECT_EQ(fake_.requests()[0].max_tokens, 14u);
  r = post("/v1/completions", R"({"prompt": [1, 2]})");
  EXPECT_EQ(fake_.requests()[1].max_tokens, 16u);
}

TEST_F(GenerationApiTest, ErrorsNameTheirField) {
  auto r = post("/v1/completions", R"({"prompt": "x", "n": 3})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "n");
  r = post("/v1/completions", R"({"prompt": "x", "model": "gpt-4"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "model 'gpt-4' is not served here; available: pylm");
  HttpConnection c(server_->port());
  auto g = c.request("GET", "/v1/completions");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 405);
  EXPECT_TRUE(fake_.requests().empty());
}

TEST_F(GenerationApiTest, ChatThroughTheTemplate) {
  fake_.script.tokens = encode("Hi there!");
  fake_.script.tokens.push_back(2);  // <|im_end|>: a stop id only when asked for
  auto r = post("/v1/chat/completions", R"({"messages": [{"role": "system", "content": "Be brief."},
                                                         {"role": "user", "content": "Hello"}],
                                            "stop_token_ids": [2], "seed": 1})");
  ASSERT_EQ(r.status, 200) << r.body;
  // pylm's ChatML template, by hand from its text (tokenizer_config.json).
  const std::string rendered =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
  const GenerationRequest g = fake_.requests()[0];
  EXPECT_EQ(g.prompt, encode(rendered));
  EXPECT_EQ(g.prompt[0], 1u);  // <|im_start|> as its special token
  EXPECT_EQ(g.max_tokens, 1024 - g.prompt.size());  // chat: the rest of the context
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Hi there!"}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // Streamed: the role first, then content deltas, then an empty delta with the finish reason.
  auto s = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hello"}], "stream": true,
                                            "stop_token_ids": [2]})");
  const Events ev = events_of(s.body);
  ASSERT_TRUE(ev.done);
  ASSERT_GE(ev.chunks.size(), 3u);
  EXPECT_EQ(ev.chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(ev.chunks[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string joined;
  for (size_t i = 1; i + 1 < ev.chunks.size(); ++i) {
    joined += ev.chunks[i]["choices"][0]["delta"]["content"].get<std::string>();
    EXPECT_TRUE(ev.chunks[i]["choices"][0]["finish_reason"].is_null());
  }
  EXPECT_EQ(joined, "Hi there!");
  EXPECT_EQ(ev.chunks.back()["choices"][0]["delta"], json::object());
  EXPECT_EQ(ev.chunks.back()["choices"][0]["finish_reason"], "stop");
}

// Without a service (no generation roles) both routes say so.
TEST(GenerationApiWithoutService, AnswersNotServed) {
  Metrics metrics;
  GenerationApi api(pylm(), nullptr, metrics);
  struct Capture final : Exchange {
    void reply(std::function<HttpResponse()> make) override { answer = make(); }
    void on_abandon(std::function<void()>) override {}
    bool timed_out() const override { return false; }
    bool start_stream(HttpResponse) override { return false; }
    void send(std::string) override {}
    void end() override {}
    HttpResponse answer;
  };
  auto ex = std::make_shared<Capture>();
  api.handle(HttpRequest{"POST", "/v1/chat/completions", "application/json", "{}"}, ex);
  EXPECT_EQ(ex->answer.status, 404);
  EXPECT_EQ(json::parse(ex->answer.body)["error"]["message"],
            "/v1/chat/completions is not served here: the deployment has no generation roles (target and drafter)");
}

}  // namespace
}  // namespace tandem::coordinator

// tandem-gen-loadgen: closed-loop HTTP load on a generation job's POST /v1/completions (issue 11): N
// requests over C keep-alive connections, each a token-id prompt with its own temperature and seed, some
// streamed, all with return_token_ids; every answer is checked against `tandem generate` output for the
// same prompts, temperature and seed. Prints counts (ok, mismatched, lost, timed out, duplicated answer
// ids, statuses), throughput and latency percentiles as JSON, and for the streamed requests the time to
// first token, time per output token and inter-token gaps as a client sees them (chunk arrival times);
// exits non-zero unless every request is ok.
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "bench/loadgen_session.h"

namespace tandem::loadgen {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string url = "http://127.0.0.1:8080";
  std::string prompt_file;
  std::vector<std::string> expect;  // TEMPERATURE:SEED:FILE, FILE being `tandem generate` output
  size_t requests = 1000;
  size_t connections = 8;
  uint32_t max_tokens = 8;
  size_t stream_every = 3;  // every k-th request is streamed; 0: none
  int timeout_ms = 120000;
  bool speculative = true;  // false: every request asks "speculative": false (plain decoding)
};

// One distinct request: a prompt at a temperature and seed, and the token ids the API must answer.
struct Case {
  std::vector<uint32_t> prompt;
  double temperature = 0;
  uint64_t seed = 0;
  std::vector<uint32_t> want;
};

struct Outcome : Tally {
  size_t ok = 0, mismatched = 0, tokens = 0;
  // Streamed requests, in ms: to the first chunk with a token; (last - first token) / (tokens - 1); each
  // token's share of the gap since the chunk before it (a chunk of n tokens counts n gaps of 1/n).
  std::vector<double> ttft_ms, tpot_ms, itl_ms;
  size_t streamed_owing_tokens = 0;  // streamed requests whose expected answer has a token (timed ones)
  void add_timing(const Outcome& x) {
    ttft_ms.insert(ttft_ms.end(), x.ttft_ms.begin(), x.ttft_ms.end());
    tpot_ms.insert(tpot_ms.end(), x.tpot_ms.begin(), x.tpot_ms.end());
    streamed_owing_tokens += x.streamed_owing_tokens;
    itl_ms.insert(itl_ms.end(), x.itl_ms.begin(), x.itl_ms.end());
  }
};

// Answer ids seen across every connection: one seen twice is a duplicated answer.
struct SeenIds {
  std::set<std::string> ids;
  std::mutex mutex;
  bool first_time(const std::string& id) {
    std::lock_guard lock(mutex);
    return ids.insert(id).second;
  }
};

std::vector<std::vector<uint32_t>> read_prompt_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open --prompt-file " + path);
  std::vector<std::vector<uint32_t>> prompts;
  std::string line;
  while (std::getline(in, line)) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream words(line);
    std::vector<uint32_t> ids;
    for (uint64_t id; words >> id;) ids.push_back(static_cast<uint32_t>(id));
    if (!ids.empty()) prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) throw std::runtime_error("--prompt-file " + path + " holds no prompt");
  return prompts;
}

// The cases of one --expect TEMPERATURE:SEED:FILE. `tandem generate` keeps the stop id that ended a
// request (finish "stop"); the API lists the tokens before it.
void add_cases(const std::string& spec, const std::vector<std::vector<uint32_t>>& prompts, std::vector<Case>& cases) {
  const size_t a = spec.find(':'), b = a == std::string::npos ? a : spec.find(':', a + 1);
  if (b == std::string::npos) throw std::runtime_error("--expect '" + spec + "' is not TEMPERATURE:SEED:FILE");
  const double temperature = std::stod(spec.substr(0, a));
  const uint64_t seed = std::stoull(spec.substr(a + 1, b - a - 1));
  const std::string path = spec.substr(b + 1);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open --expect file " + path);
  const json out = json::parse(in);
  const json& requests = out.at("requests");
  if (requests.size() != prompts.size()) {
    throw std::runtime_error("--expect file " + path + " answers " + std::to_string(requests.size()) +
                             " prompts; --prompt-file has " + std::to_string(prompts.size()));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Case c{prompts[i], temperature, seed, requests[i].at("tokens").get<std::vector<uint32_t>>()};
    if (requests[i].at("finish") == "stop" && !c.want.empty()) c.want.pop_back();
    cases.push_back(std::move(c));
  }
}

std::string body_of(const Options& o, const Case& c, bool stream) {
  json body = {{"prompt", c.prompt}, {"max_tokens", o.max_tokens}, {"temperature", c.temperature},
               {"seed", c.seed},     {"return_token_ids", true},   {"stream", stream}};
  if (!o.speculative) body["speculative"] = false;
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

// What an answer says: its id, the prompt it answers (whole answers) and its token ids; an error text
// when it is not a well-formed answer (a stream without [DONE], chunks of two ids, ...).
struct Answer {
  std::string id, error;
  std::vector<uint32_t> tokens;
  std::optional<std::vector<uint32_t>> prompt;
};

Answer read_answer(const std::string& body, bool stream) {
  Answer a;
  try {
    if (!stream) {
      const json j = json::parse(body);
      a.id = j.at("id").get<std::string>();
      a.tokens = j.at("choices").at(0).at("token_ids").get<std::vector<uint32_t>>();
      a.prompt = j.at("prompt_token_ids").get<std::vector<uint32_t>>();
      return a;
    }
    std::istringstream in(body);
    bool done = false, finished = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("data: ", 0) != 0) continue;
      if (line == "data: [DONE]") {
        done = true;
        continue;
      }
      const json chunk = json::parse(line.substr(6));
      const std::string id = chunk.at("id").get<std::string>();
      if (a.id.empty()) a.id = id;
      if (id != a.id) a.error = "a stream's chunks carry ids " + a.id + " and " + id;
      for (const json& c : chunk.at("choices")) {
        if (c.contains("token_ids")) {
          for (const json& t : c["token_ids"]) a.tokens.push_back(t.get<uint32_t>());
        }
        if (!c.at("finish_reason").is_null()) finished = true;
      }
    }
    if (!done || !finished) a.error = std::string("a stream without ") + (done ? "a finish reason" : "[DONE]");
  } catch (const std::exception& e) {
    a.error = std::string("unreadable answer: ") + e.what();
  }
  return a;
}

// The token ids in one chunk of a streamed answer (its complete `data:` events).
size_t tokens_in(std::string_view chunk) {
  size_t n = 0;
  for (size_t at = 0; (at = chunk.find("data: {", at)) != std::string_view::npos;) {
    const size_t end = chunk.find('\n', at);
    const json event = json::parse(chunk.substr(at + 6, end == std::string_view::npos ? end : end - at - 6), nullptr,
                                   false);
    at = end;
    if (event.is_discarded() || !event.contains("choices")) continue;
    for (const json& c : event["choices"]) {
      if (c.contains("token_ids")) n += c["token_ids"].size();
    }
  }
  return n;
}

// A streamed answer's client-side timing, from its chunks' arrival times.
void time_stream(const HttpReply& reply, Clock::time_point sent, Outcome& out) {
  using ms = std::chrono::duration<double, std::milli>;
  std::optional<Clock::time_point> first, last;
  size_t tokens = 0, begin = 0;
  for (const auto& [at, end] : reply.chunks) {
    const size_t n = tokens_in(std::string_view(reply.body).substr(begin, end - begin));
    begin = end;
    if (n == 0) continue;
    if (!first) {
      first = at;
      out.ttft_ms.push_back(ms(at - sent).count());
      if (n > 1) out.itl_ms.insert(out.itl_ms.end(), n - 1, 0.0);  // the rest of the first chunk came with it
    } else {
      out.itl_ms.insert(out.itl_ms.end(), n, ms(at - *last).count() / static_cast<double>(n));
    }
    last = at;
    tokens += n;
  }
  if (first && tokens > 1) out.tpot_ms.push_back(ms(*last - *first).count() / static_cast<double>(tokens - 1));
}

std::string ids_text(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return "[" + s + "]";
}

void check(const Case& c, size_t i, const Answer& a, SeenIds& seen, Outcome& out) {
  const std::string who = "request " + std::to_string(i) + ": ";
  if (!a.error.empty()) {
    ++out.mismatched;
    out.note(who + a.error);
    return;
  }
  if (!seen.first_time(a.id)) {
    ++out.duplicated;
    out.note(who + "answer id " + a.id + " seen before");
    return;
  }
  if (a.prompt && *a.prompt != c.prompt) {
    ++out.mismatched;
    out.note(who + "answers prompt " + ids_text(*a.prompt) + ", sent " + ids_text(c.prompt));
    return;
  }
  if (a.tokens != c.want) {
    ++out.mismatched;
    out.note(who + "temperature " + std::to_string(c.temperature) + " seed " + std::to_string(c.seed) + ": got " +
             ids_text(a.tokens) + ", want " + ids_text(c.want));
    return;
  }
  ++out.ok;
  out.tokens += a.tokens.size();
}

// One connection's loop: takes the next request number until all are taken.
void connection_main(const Options& o, const Endpoint& at, const std::vector<Case>& cases, std::atomic<size_t>& next,
                     SeenIds& seen, Outcome& out) {
  std::unique_ptr<HttpConnection> conn;
  for (size_t i; (i = next.fetch_add(1)) < o.requests;) {
    const Case& c = cases[i % cases.size()];
    const bool stream = o.stream_every > 0 && i % o.stream_every == 0;
    const std::string request = HttpConnection::request_text("POST", "/v1/completions", body_of(o, c, stream));
    const Clock::time_point sent = Clock::now();
    std::optional<HttpReply> reply = exchange(conn, at, request, i, std::chrono::milliseconds(o.timeout_ms), sent, out);
    if (!reply) continue;
    if (reply->status == 200) {
      if (stream) {
        time_stream(*reply, sent, out);
        out.streamed_owing_tokens += c.want.empty() ? 0 : 1;
      }
      check(c, i, read_answer(reply->body, stream), seen, out);
    } else {
      out.note("request " + std::to_string(i) + ": status " + std::to_string(reply->status) + " " + reply->body);
    }
    settle_connection(conn, *reply, i, out);
  }
}

int run(const Options& o) {
  const std::optional<Endpoint> at = parse_url(o.url);
  if (!at) {
    std::fprintf(stderr, "tandem-gen-loadgen: --url must look like http://127.0.0.1:8080\n");
    return 2;
  }
  const auto prompts = read_prompt_file(o.prompt_file);
  std::vector<Case> cases;
  for (const std::string& spec : o.expect) add_cases(spec, prompts, cases);
  // Request i asks case i mod cases: neighbours differ in prompt, and every case is asked again later
  // on other connections.
  std::vector<Outcome> outcomes(o.connections);
  std::vector<std::thread> threads;
  std::atomic<size_t> next{0};
  SeenIds seen;
  const auto start = Clock::now();
  for (size_t t = 0; t < o.connections; ++t) {
    threads.emplace_back([&, t] { connection_main(o, *at, cases, next, seen, outcomes[t]); });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  Outcome all;
  for (Outcome& x : outcomes) {
    all.add(x);
    all.ok += x.ok;
    all.mismatched += x.mismatched;
    all.tokens += x.tokens;
    all.add_timing(x);
  }
  const json summary = {
      {"requests", o.requests},
      {"connections", o.connections},
      {"distinct_cases", cases.size()},
      {"max_tokens", o.max_tokens},
      {"ok", all.ok},
      {"mismatched", all.mismatched},
      {"lost", all.lost},
      {"timed_out", all.timed_out},
      {"refused", all.refused},
      {"duplicated", all.duplicated},
      {"statuses", statuses_json(all.statuses)},
      {"seconds", seconds},
      {"requests_per_s", double(o.requests) / seconds},
      {"tokens_per_s", double(all.tokens) / seconds},
      {"speculative", o.speculative},
      {"latency_ms", latency_summary(all.latency_ms)},
      {"streamed_owing_tokens", all.streamed_owing_tokens},
      {"streamed_with_tokens", all.ttft_ms.size()},
      {"ttft_ms", latency_summary(all.ttft_ms)},
      {"tpot_ms", latency_summary(all.tpot_ms)},
      {"itl_ms", latency_summary(all.itl_ms)},
      {"errors", all.errors}};
  std::printf("%s\n", summary.dump(2).c_str());
  return all.ok == o.requests && all.duplicated == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tandem::loadgen

int main(int argc, char** argv) {
  tandem::loadgen::Options o;
  CLI::App app{"tandem-gen-loadgen: load /v1/completions over HTTP and check every answer against tandem generate"};
  app.add_option("--url", o.url, "the coordinator, http://HOST:PORT");
  app.add_option("--prompt-file", o.prompt_file, "one prompt of token ids per line (as tandem generate takes)")
      ->required();
  app.add_option("--expect", o.expect,
                 "TEMPERATURE:SEED:FILE, FILE being `tandem generate --prompt-file` output at that temperature "
                 "and seed (repeatable)")
      ->required();
  app.add_option("--requests", o.requests, "requests to send");
  app.add_option("--connections", o.connections, "keep-alive connections")->check(CLI::PositiveNumber);
  app.add_option("--max-tokens", o.max_tokens, "max_tokens of every request (as given to tandem generate)")
      ->check(CLI::PositiveNumber);
  app.add_option("--stream-every", o.stream_every, "every k-th request is streamed (0: none)");
  app.add_option("--timeout-ms", o.timeout_ms, "a request with no answer after this has timed out");
  app.add_flag("!--no-speculation", o.speculative, "every request asks \"speculative\": false (plain decoding)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return tandem::loadgen::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-gen-loadgen: %s\n", e.what());
    return 2;
  }
}

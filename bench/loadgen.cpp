// tandem-loadgen: an HTTP load generator for a serving job (serving.md). Closed loop (each connection
// sends its next request when the last is answered) or open loop at a target rate (requests are due
// on a schedule, and latency counts from when each was due, so a slow server cannot hide its queue).
// Every answer is checked: against `tandem score` output for the same sequences (--expect), else
// against the first answer seen for the same sequence; a request with no answer is refused (no
// connection: nothing was sent), lost (sent, and the connection closed before an answer) or timed out
// (a hang), an answer beyond the requests sent is a duplicate. Prints a JSON summary (p50/p99 latency, questions/s) and
// exits non-zero on any refused, lost, mismatched or duplicated answer or a status not allowed with --allow.
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bench/loadgen_session.h"
#include "worker/queue.h"

namespace tandem::loadgen {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string url = "http://127.0.0.1:8080";
  std::string endpoint = "score";  // score | decide
  std::string input;
  std::string expect;
  size_t requests = 1000;
  size_t connections = 8;
  double rate = 0;  // requests per second; 0 = closed loop
  size_t per_request = 4;
  int timeout_ms = 30000;
  bool until_refused = false;  // end when the server stops listening (an orderly-stop test)
  std::vector<int> allow;  // non-200 statuses that are not errors (429, 503 under fault tests)
};

// The request pool: each item is one sequence (score) or one question (decide), kept as JSON text.
struct Pool {
  std::vector<std::string> items;
  std::string state;                  // decide: the state every request carries
  std::vector<json> expected;         // per item, from --expect; empty: check consistency instead
  std::map<size_t, json> first_seen;  // per item, the first answer (consistency mode)
  std::mutex mutex;
};

struct Outcome : Tally {
  size_t mismatched = 0, questions = 0;
};

// Which pool items request `i` carries: a run of 1..per_request items starting at a spread offset,
// so neighbouring requests differ and a mixed-up answer cannot pass for the right one.
std::vector<size_t> items_of(size_t i, size_t pool, size_t per_request) {
  const size_t k = 1 + (i * 7919) % per_request;
  std::vector<size_t> out;
  for (size_t j = 0; j < k; ++j) out.push_back((i * 31 + j) % pool);
  return out;
}

std::string body_of(const Options& o, const Pool& pool, const std::vector<size_t>& items) {
  std::string list;
  for (size_t id : items) list += (list.empty() ? "" : ",") + pool.items[id];
  if (o.endpoint == "decide") return "{\"state\":" + pool.state + ",\"questions\":[" + list + "]}";
  return "{\"sequences\":[" + list + "]}";
}

// The part of an answer that must be the same whenever the item is asked.
json comparable(const Options& o, const json& answer) {
  if (o.endpoint == "decide") {
    return {answer.at("logits"), answer.at("act"), answer.at("probabilities"), answer.at("pick")};
  }
  return {answer.at("logits"), answer.at("act"), answer.at("probs"), answer.at("pick")};
}

void check(const Options& o, Pool& pool, const std::vector<size_t>& items, const std::string& body, Outcome& out) {
  json reply;
  try {
    reply = json::parse(body);
    const json& list = reply.at(o.endpoint == "decide" ? "answers" : "sequences");
    if (list.size() != items.size()) {
      ++out.mismatched;
      out.note("an answer has " + std::to_string(list.size()) + " entries for " + std::to_string(items.size()));
      return;
    }
    for (size_t j = 0; j < items.size(); ++j) {
      const json got = comparable(o, list[j]);
      const size_t id = items[j];
      std::lock_guard lock(pool.mutex);
      const json& want = pool.expected.empty() ? pool.first_seen.try_emplace(id, got).first->second : pool.expected[id];
      if (got != want) {
        ++out.mismatched;
        out.note("item " + std::to_string(id) + ": got " + got.dump() + ", want " + want.dump());
      }
    }
    out.questions += items.size();
  } catch (const std::exception& e) {
    ++out.mismatched;
    out.note(std::string("unreadable answer: ") + e.what());
  }
}

void load_pool(const Options& o, Pool& pool) {
  std::ifstream in(o.input);
  if (!in) throw std::runtime_error("cannot open --input " + o.input);
  const json j = json::parse(in);
  if (o.endpoint == "decide") {
    pool.state = j.at("state").dump();
    for (const json& q : j.at("questions")) pool.items.push_back(q.dump());
  } else {
    for (const json& s : j.at("sequences")) {
      pool.items.push_back(json{{"ids", s.at("ids")}, {"markers", s.at("markers")}, {"qtype", s.at("qtype")}}.dump());
    }
  }
  if (pool.items.empty()) throw std::runtime_error("--input has no items");
  if (!o.expect.empty()) {
    std::ifstream e(o.expect);
    if (!e) throw std::runtime_error("cannot open --expect " + o.expect);
    const json x = json::parse(e);
    for (const json& s : x.at("sequences")) pool.expected.push_back(comparable(o, s));
    if (pool.expected.size() != pool.items.size()) throw std::runtime_error("--expect and --input differ in length");
  }
}

// One connection's loop: takes request numbers (and when each was due) until there are none.
void connection_main(const Options& o, const Endpoint& at, Pool& pool,
                     worker::BlockingQueue<std::pair<size_t, Clock::time_point>>& due, Outcome& out,
                     std::atomic<bool>& gone) {
  std::unique_ptr<HttpConnection> c;
  while (auto work = due.pop()) {
    if (o.until_refused && gone.load()) break;
    const size_t i = work->first;
    // Open loop: latency from when the request was due. Closed loop: from when it is sent.
    const Clock::time_point scheduled = work->second == Clock::time_point{} ? Clock::now() : work->second;
    const auto items = items_of(i, pool.items.size(), o.per_request);
    if (o.until_refused && (!c || !c->connected())) {
      c = std::make_unique<HttpConnection>(at.host, at.port);
      if (!c->connected()) {  // the server stopped: the end of an orderly-stop run, not an error
        gone.store(true);
        break;
      }
    }
    const std::string request = HttpConnection::request_text("POST", "/v1/" + o.endpoint, body_of(o, pool, items));
    std::optional<HttpReply> reply =
        exchange(c, at, request, i, std::chrono::milliseconds(o.timeout_ms), scheduled, out);
    if (!reply) continue;
    if (reply->status == 200) {
      check(o, pool, items, reply->body, out);
    } else if (std::find(o.allow.begin(), o.allow.end(), reply->status) == o.allow.end()) {
      out.note("request " + std::to_string(i) + ": status " + std::to_string(reply->status) + " " + reply->body);
    }
    settle_connection(c, *reply, i, out);
  }
}

int run(const Options& o) {
  const std::optional<Endpoint> at = parse_url(o.url);
  if (!at) {
    std::fprintf(stderr, "tandem-loadgen: --url must look like http://127.0.0.1:8080\n");
    return 2;
  }
  Pool pool;
  load_pool(o, pool);

  worker::BlockingQueue<std::pair<size_t, Clock::time_point>> due;
  std::vector<Outcome> outcomes(o.connections);
  std::vector<std::thread> threads;
  std::atomic<bool> gone{false};
  const auto start = Clock::now();
  for (size_t t = 0; t < o.connections; ++t) {
    threads.emplace_back([&, t] { connection_main(o, *at, pool, due, outcomes[t], gone); });
  }
  if (o.rate <= 0) {
    for (size_t i = 0; i < o.requests; ++i) due.push({i, Clock::time_point{}});  // closed loop: due when taken
  } else {
    for (size_t i = 0; i < o.requests; ++i) {
      const auto when = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(double(i) / o.rate));
      std::this_thread::sleep_until(when);
      if (o.until_refused && gone.load()) break;
      due.push({i, when});
    }
  }
  due.close();
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  Outcome all;
  for (Outcome& x : outcomes) {
    all.add(x);
    all.mismatched += x.mismatched;
    all.questions += x.questions;
  }
  size_t disallowed = 0;
  for (auto [s, n] : all.statuses) {
    if (s != 200 && std::find(o.allow.begin(), o.allow.end(), s) == o.allow.end()) disallowed += n;
  }
  // With --until-refused, the requests that were sent: answered, lost or timed out.
  const size_t sent = all.latency_ms.size() + all.lost + all.timed_out;
  const double requests = o.until_refused ? double(sent) : double(o.requests);
  const json summary = {
      {"requests", o.until_refused ? sent : o.requests},
      {"connections", o.connections},
      {"mode", o.rate > 0 ? "open" : "closed"},
      {"rate", o.rate},
      {"statuses", statuses_json(all.statuses)},
      {"refused", all.refused},
      {"lost", all.lost},
      {"timed_out", all.timed_out},
      {"mismatched", all.mismatched},
      {"duplicated", all.duplicated},
      {"disallowed", disallowed},
      {"seconds", seconds},
      {"requests_per_s", requests / seconds},
      {"questions_per_s", double(all.questions) / seconds},
      {"latency_ms", latency_summary(all.latency_ms)},
      {"errors", all.errors}};
  std::printf("%s\n", summary.dump(2).c_str());
  return all.refused + all.lost + all.timed_out + all.mismatched + all.duplicated + disallowed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tandem::loadgen

int main(int argc, char** argv) {
  tandem::loadgen::Options o;
  CLI::App app{"tandem-loadgen: load a tandem serving job over HTTP and check every answer"};
  app.add_option("--url", o.url, "the coordinator, http://HOST:PORT");
  app.add_option("--endpoint", o.endpoint, "score or decide")->check(CLI::IsMember({"score", "decide"}));
  app.add_option("--input", o.input, "score: {\"sequences\": [...]}; decide: {\"state\", \"questions\"}")->required();
  app.add_option("--expect", o.expect, "score: `tandem score` output for --input, the answers to expect");
  app.add_option("--requests", o.requests, "requests to send");
  app.add_option("--connections", o.connections, "keep-alive connections")->check(CLI::PositiveNumber);
  app.add_option("--rate", o.rate, "open loop: requests per second (0: closed loop)");
  app.add_option("--per-request", o.per_request, "at most this many items per request")->check(CLI::PositiveNumber);
  app.add_option("--timeout-ms", o.timeout_ms, "a request with no answer after this is lost");
  app.add_option("--allow", o.allow, "statuses besides 200 that are not errors (e.g. --allow 429 503)");
  app.add_flag("--until-refused", o.until_refused,
               "stop when a connection is refused (the server stopped); requests not sent then are not counted");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return tandem::loadgen::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-loadgen: %s\n", e.what());
    return 2;
  }
}

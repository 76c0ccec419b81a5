// What both load generators (tandem-loadgen, tandem-gen-loadgen) share: the --url they take, the
// tally every connection keeps (latencies, statuses, lost / timed-out / refused / duplicated answers),
// one request exchanged on a keep-alive connection with each failure classified, and the latency summary
// they print. Header-only, as loadgen_http.h beside it.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/loadgen_http.h"

namespace tandem::loadgen {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

// http://HOST:PORT, HOST an IPv4 literal; nullopt for anything else.
inline std::optional<Endpoint> parse_url(const std::string& url) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return std::nullopt;
  const size_t colon = url.find(':', prefix.size());
  if (colon == std::string::npos || colon + 1 >= url.size()) return std::nullopt;
  const std::string port = url.substr(colon + 1);
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int p = std::stoi(port);
  if (p <= 0 || p > 65535) return std::nullopt;
  return Endpoint{url.substr(prefix.size(), colon - prefix.size()), static_cast<uint16_t>(p)};
}

// One connection's counts; tallies of every connection add up into the run's.
struct Tally {
  std::vector<double> latency_ms;  // of answered requests
  std::map<int, size_t> statuses;
  size_t refused = 0;     // never sent: no connection could be made (the server is not listening)
  size_t lost = 0;        // sent, no answer: the connection closed first
  size_t timed_out = 0;   // no answer within the timeout on an open connection: a hang
  size_t duplicated = 0;  // more bytes than one answer on the connection
  std::vector<std::string> errors;  // the first few, for whoever reads the summary

  void note(std::string e) {
    if (errors.size() < 10) errors.push_back(std::move(e));
  }
  void add(const Tally& x) {
    latency_ms.insert(latency_ms.end(), x.latency_ms.begin(), x.latency_ms.end());
    for (auto [s, n] : x.statuses) statuses[s] += n;
    refused += x.refused;
    lost += x.lost;
    timed_out += x.timed_out;
    duplicated += x.duplicated;
    for (const std::string& e : x.errors) note(e);
  }
};

// Sends request `i` (its HTTP text) on `conn`, connecting first when needed, and waits for its answer.
// Latency counts from `since` (when the request was due). Returns the reply, or nullopt with the reason
// tallied (refused, lost, timed out) and the connection dropped.
inline std::optional<HttpReply> exchange(std::unique_ptr<HttpConnection>& conn, const Endpoint& at,
                                         const std::string& request, size_t i, std::chrono::milliseconds timeout,
                                         std::chrono::steady_clock::time_point since, Tally& tally) {
  const std::string who = "request " + std::to_string(i);
  if (!conn || !conn->connected()) conn = std::make_unique<HttpConnection>(at.host, at.port);
  if (!conn->connected()) {
    ++tally.refused;
    tally.note(who + ": connection refused");
    conn.reset();
    return std::nullopt;
  }
  std::optional<HttpReply> reply;
  const bool sent = conn->send_raw(request);
  if (sent) reply = conn->read_reply(timeout);
  if (!reply) {
    const bool hung = sent && !conn->closed();
    ++(hung ? tally.timed_out : tally.lost);
    tally.note(who + (hung ? ": no answer within --timeout-ms" : ": connection closed before an answer"));
    conn.reset();
    return std::nullopt;
  }
  tally.latency_ms.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count());
  ++tally.statuses[reply->status];
  return reply;
}

// After an answer was read and checked: a second answer's bytes on the connection are a duplicate; a
// server that said `Connection: close` gets a new connection next time.
inline void settle_connection(std::unique_ptr<HttpConnection>& conn, HttpReply& reply, size_t i, Tally& tally) {
  if (conn->has_unread(std::chrono::milliseconds(0))) {
    ++tally.duplicated;
    tally.note("request " + std::to_string(i) + ": more bytes than one answer");
    conn.reset();
  } else if (reply.headers["connection"] == "close") {
    conn.reset();
  }
}

inline double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// {"p50", "p90", "p99", "max"} of the answered requests' latencies, in ms.
inline nlohmann::json latency_summary(std::vector<double>& ms) {
  return {{"p50", percentile(ms, 0.50)},
          {"p90", percentile(ms, 0.90)},
          {"p99", percentile(ms, 0.99)},
          {"max", ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end())}};
}

inline nlohmann::json statuses_json(const std::map<int, size_t>& statuses) {
  nlohmann::json j = nlohmann::json::object();
  for (auto [s, n] : statuses) j[std::to_string(s)] = n;
  return j;
}

}  // namespace tandem::loadgen

// HttpServer: HTTP/1.1 with keep-alive on Boost.Beast over Boost.Asio, with the limits of serving.md:
// a body limit (413) and header limit (431), a whole-request read deadline against slow clients
// (408), an idle timeout, a connection limit (503), a per-request deadline (504), and cancellation when
// the client disconnects while its answer is pending or streaming. Answers are whole or streamed
// (chunked). Routing is the handler's (HEAD requests reach it as "HEAD" and are answered with headers
// only); what a handler throws is answered 500. Each connection runs on its own strand of `io_threads`
// threads named "http-io". A pimpl: no Asio in this header.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "coordinator/api_types.h"
#include "engine/core/result.h"

namespace tandem::coordinator {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent
  std::string content_type;
  std::string body;
  bool loopback = false;  // the client connected from a loopback address (admin routes: server.admin)
};

struct HttpResponse {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};
HttpResponse error_response(const ApiError& error);
HttpResponse internal_error(const std::string& what);  // 500, for what a handler did not expect

// One request awaiting its answer, shared by the connection and whoever answers it.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // Answers once, from any thread; later calls do nothing, and so does every call once the connection
  // is closed or the server has stopped (an exchange may outlive both). `make` runs on the
  // connection's strand.
  virtual void reply(std::function<HttpResponse()> make) = 0;
  void reply(HttpResponse response) {
    reply([r = std::move(response)] { return r; });
  }
  // What to do if the client leaves, or the request deadline passes, before an answer (or, for a
  // stream, before its end). Set it inside HttpHandler::handle (it runs on the strand, where the
  // callback will).
  virtual void on_abandon(std::function<void()> callback) = 0;
  // In the abandon callback: true when the request deadline passed (limits.request_timeout_ms), false
  // when the client left.
  virtual bool timed_out() const = 0;

  // A streamed answer instead of reply(): `head`'s status and headers at once, the body with chunked
  // transfer encoding (HTTP/1.0: unframed, then the connection closes), one chunk per send(), and
  // end() to finish it. From any thread; calls made in order are written in order, without blocking an
  // I/O thread. Claims the answer like reply(): false if one is already on its way. When the client
  // leaves mid-stream (or a write stalls past read_timeout_ms) the rest is dropped and the abandon
  // callback runs; past the request deadline the abandon callback runs and the handler ends the stream.
  virtual bool start_stream(HttpResponse head) = 0;
  virtual void send(std::string chunk) = 0;
  virtual void end() = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void handle(HttpRequest request, std::shared_ptr<Exchange> exchange) = 0;
  // Every response written, also those the server made itself (408, 413, 431, 503, 504, bad HTTP).
  virtual void record(const std::string& target, unsigned status, double seconds) = 0;
};

class HttpServer {
 public:
  // Binds, listens and starts the I/O threads; the handler must outlive the server.
  static Result<std::unique_ptr<HttpServer>> start(const config::Listener& listener, const config::Limits& limits,
                                                   HttpHandler& handler);
  ~HttpServer();  // stop()
  uint16_t port() const;
  // The start of an orderly stop: new SYNs are dropped at once and the listener closes once the
  // handshakes under way are accepted (~100 ms: handshake_gate.h); then new connections are refused and
  // the port is free. Connections already accepted keep being served, and every answer from now on carries "Connection:
  // close", so no client sends a request into a connection that stop() is about to close.
  void stop_accepting();
  // Connections open now. After stop_accepting() it falls as clients read their answers (which say close)
  // and leave; stopping once it is 0 answers a client that sent a request on its connection just before
  // the stop, where stop() would close the connection under it.
  size_t open_connections() const;
  // Stops accepting, closes every connection and joins the I/O threads.
  void stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::coordinator

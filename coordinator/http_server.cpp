// HttpServer (http_server.h). A connection's life: wait for a first byte (idle timeout), read header
// and body under one deadline (answering "Expect: 100-continue"), hand the request to the handler and
// watch the socket until the answer comes (EOF means the client left), write, repeat. Every handler of
// a connection runs on its strand, so a Session needs no locks; Exchange crosses threads by posting.
#include "coordinator/http_server.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "coordinator/handshake_gate.h"
#include "engine/core/log.h"
#include "worker/queue.h"

namespace tandem::coordinator {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// How long a stopping listener keeps accepting the handshakes already under way once new SYNs are
// dropped (handshake_gate.h): a round trip on any network a serving job spans.
constexpr auto kHandshakeSettle = std::chrono::milliseconds(100);

}  // namespace

HttpResponse internal_error(const std::string& what) {
  return error_response(ApiError{500, fmt::format("internal error: {}", what), "internal_error", std::nullopt});
}

HttpResponse error_response(const ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.body = error_json(error);
  if (error.status == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

namespace {

// What lets a thread outside the I/O threads reach a connection. Such a thread holds the connection
// (a Session) only while posting to its strand, under the gate's lock; the server closes the gate
// when it stops, before its io_context goes, so no Session can be destroyed after the context that owns its
// socket and timers (a thread that held the last reference would otherwise destroy it there).
struct Gate {
  std::mutex mutex;
  bool open = true;  // under mutex
};

// What every connection shares; HttpServer::Impl is this plus the accept loop.
struct ServerCore {
  ServerCore(const config::Listener& l, const config::Limits& lim, HttpHandler& h)
      : listener(l), limits(lim), handler(h) {}
  config::Listener listener;
  config::Limits limits;
  HttpHandler& handler;
  std::atomic<size_t> sessions{0};  // declared before the io_context: sessions it destroys count down here
  std::atomic<bool> draining{false};  // stop_accepting(): every answer from now on closes its connection
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();  // outlives the server: exchanges hold it
  net::io_context ioc;
};

}  // namespace

struct HttpServer::Impl : ServerCore {
  using ServerCore::ServerCore;
  void accept();

  // The listener's orderly close, on its strand: new SYNs are dropped at once, the handshakes under way
  // get kHandshakeSettle to complete and be accepted, then close_listener() runs.
  void begin_closing_listener();
  // Takes the connections the kernel has completed but not handed over yet, then closes the listener:
  // on its strand, so no accept handler runs meanwhile.
  void close_listener();

  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{net::make_strand(ioc)};  // its handlers run on this strand
  net::steady_timer settle{acceptor.get_executor()};  // begin_closing_listener's wait, on the same strand
  uint16_t port = 0;
  std::vector<std::thread> threads;
  std::atomic<bool> stopped{false};
  std::atomic<bool> accepting{true};
};

namespace {

class Session;

class ExchangeImpl final : public Exchange {
 public:
  ExchangeImpl(std::weak_ptr<Session> session, std::shared_ptr<Gate> gate)
      : session_(std::move(session)), gate_(std::move(gate)) {}
  using Exchange::reply;
  void reply(std::function<HttpResponse()> make) override;
  void on_abandon(std::function<void()> callback) override { abandon_ = std::move(callback); }
  bool timed_out() const override { return timed_out_.load(); }
  void set_timed_out() { timed_out_.store(true); }
  bool start_stream(HttpResponse head) override;
  void send(std::string chunk) override;
  void end() override;
  // Claims the right to answer; false if an answer is already on its way.
  bool claim() { return !answered_.exchange(true); }
  void abandon() {
    if (abandon_) abandon_();
  }

 private:
  // Posts `fn` to the connection's strand if the connection and the server are still there.
  template <typename Fn>
  void post(Fn&& fn);

  // Not the strand itself: an exchange may outlive the io_context (held by a job), and a strand
  // executor must not (its destructor touches the context's strand service).
  std::weak_ptr<Session> session_;
  std::shared_ptr<Gate> gate_;
  std::atomic<bool> answered_{false};
  std::atomic<bool> timed_out_{false};
  std::function<void()> abandon_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerCore& server)
      : stream_(std::move(socket)),
        read_timer_(stream_.get_executor()),
        request_timer_(stream_.get_executor()),
        server_(server) {
    server_.sessions.fetch_add(1);
  }
  ~Session() { server_.sessions.fetch_sub(1); }

  void start(bool over_limit) {
    if (over_limit) {
      started_ = SteadyClock::now();
      target_ = "(connection limit)";
      write(error_response(unavailable(fmt::format("too many connections (limits.max_connections = {})",
                                                   server_.limits.max_connections))),
            true);
      return;
    }
    wait_for_request();
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  // The answer to the pending request, on the strand.
  void deliver(HttpResponse response) {
    if (!waiting_ || streaming_) return;
    waiting_ = false;
    request_timer_.cancel();
    stop_watching();
    write(std::move(response), false);
  }

 private:
  void wait_for_request() {
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    stream_.expires_after(std::chrono::milliseconds(server_.limits.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(8192), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (ec) return self->close();
      self->stream_.expires_never();
      self->read_request();
    });
  }

  void read_request() {
    parser_.emplace();
    parser_->body_limit(server_.limits.max_body_bytes);
    parser_->header_limit(server_.limits.max_header_bytes);
    read_timed_out_ = false;
    const uint64_t generation = ++read_generation_;
    read_timer_.expires_after(std::chrono::milliseconds(server_.limits.read_timeout_ms));
    read_timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->read_generation_) return;
      self->read_timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      const auto expect = self->parser_->get()[http::field::expect];
      if (beast::iequals(expect, "100-continue")) {
        net::async_write(self->stream_, net::buffer(kContinue.data(), kContinue.size()),
                         [self](beast::error_code wec, size_t) {
                           if (wec) return self->on_read_error(wec);
                           self->read_body();
                         });
        return;
      }
      self->read_body();
    });
  }

  void read_body() {
    if (parser_->is_done()) return on_request();
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->on_request();
    });
  }

  void on_read_error(beast::error_code ec) {
    ++read_generation_;
    read_timer_.cancel();
    started_ = SteadyClock::now();
    target_ = parser_ && parser_->is_header_done() ? std::string(parser_->get().target()) : "(unparsed)";
    const config::Limits& lim = server_.limits;
    if (read_timed_out_) {
      const bool header_done = parser_ && parser_->is_header_done();
      return write(error_response(ApiError{408,
                                           fmt::format("the request did not arrive within {} ms "
                                                       "(limits.read_timeout_ms)",
                                                       lim.read_timeout_ms),
                                           "request_timeout", header_done ? "body" : "headers"}),
                   true);
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) return close();
    if (ec == http::error::body_limit) {
      return write(error_response(too_large(
                       fmt::format("the body exceeds {} bytes (limits.max_body_bytes)", lim.max_body_bytes), "body")),
                   true);
    }
    if (ec == http::error::header_limit) {
      return write(error_response(ApiError{431,
                                           fmt::format("the headers exceed {} bytes (limits.max_header_bytes)",
                                                       lim.max_header_bytes),
                                           "headers_too_large", "headers"}),
                   true);
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return write(error_response(bad_request(fmt::format("malformed HTTP request: {}", ec.message()))), true);
    }
    close();
  }

  void on_request() {
    ++read_generation_;
    read_timer_.cancel();
    auto req = parser_->release();
    started_ = SteadyClock::now();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    head_ = req.method() == http::verb::head;
    target_ = std::string(req.target());
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = target_;
    request.content_type = std::string(req[http::field::content_type]);
    request.body = std::move(req.body());
    beast::error_code peer_ec;
    const auto peer = stream_.socket().remote_endpoint(peer_ec);
    request.loopback = !peer_ec && peer.address().is_loopback();
    exchange_ = std::make_shared<ExchangeImpl>(weak_from_this(), server_.gate);
    waiting_ = true;
    request_timer_.expires_after(std::chrono::milliseconds(server_.limits.request_timeout_ms));
    request_timer_.async_wait([self = shared_from_this(), ex = exchange_](beast::error_code ec) {
      if (ec || !self->waiting_ || ex != self->exchange_) return;
      if (self->streaming_) {
        ex->set_timed_out();
        return ex->abandon();  // the handler ends the stream with its own last words
      }
      if (!ex->claim()) return;
      ex->set_timed_out();
      ex->abandon();
      self->deliver(error_response(ApiError{504,
                                            fmt::format("no answer within {} ms (limits.request_timeout_ms)",
                                                        self->server_.limits.request_timeout_ms),
                                            "timeout", std::nullopt}));
    });
    watch_client();
    // No handler error may leave the connection waiting: what escapes the handler is answered here.
    try {
      server_.handler.handle(std::move(request), exchange_);
    } catch (const std::exception& e) {
      log::error("http: the handler of {} threw: {}", target_, e.what());
      exchange_->reply(internal_error(e.what()));
    }
  }

  // While an answer is pending, a socket that reads end-of-file means the client hung up. Readiness
  // alone proves nothing (the reactor may report data already consumed), so peek before believing it.
  void watch_client() {
    const uint64_t generation = ++watch_generation_;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->watch_generation_ || !self->waiting_) return;
      char byte = 0;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // a pipelined request: the client is still there
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watch_client();
      if (!self->streaming_ && !self->exchange_->claim()) return;
      self->exchange_->abandon();
      self->waiting_ = false;
      self->streaming_ = false;
      self->request_timer_.cancel();
      self->server_.handler.record(self->target_, 499, self->seconds());  // 499: the client left
      self->close();
    });
  }

  // Streamed answers (Exchange::start_stream): the head, then chunks in order, one write at a time.
 public:
  void begin_stream(HttpResponse head) {
    if (!waiting_ || streaming_) return;
    streaming_ = true;
    stream_status_ = head.status;
    chunked_ = version_ >= 11;
    stream_head_.emplace();
    auto& h = *stream_head_;
    h.result(head.status);
    h.version(version_);
    h.set(http::field::server, "tandem");
    h.set(http::field::content_type, head.content_type);
    for (const auto& [k, v] : head.headers) h.set(k, v);
    h.keep_alive(chunked_ && keep_alive_ && !server_.draining.load());
    if (chunked_) h.chunked(true);
    stream_serializer_.emplace(h);
    stream_writing_ = true;
    stream_.expires_after(std::chrono::milliseconds(server_.limits.read_timeout_ms));
    http::async_write_header(stream_, *stream_serializer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      self->stream_writing_ = false;
      if (ec) return self->stream_failed();
      self->pump();
    });
  }
  void stream_chunk(std::string chunk) {
    if (!streaming_ || stream_ended_ || chunk.empty()) return;
    pending_chunks_.push_back(std::move(chunk));
    pump();
  }
  void stream_end() {
    if (!streaming_ || stream_ended_) return;
    stream_ended_ = true;
    pump();
  }

 private:
  void pump() {
    if (stream_writing_ || !streaming_) return;
    stream_.expires_after(std::chrono::milliseconds(server_.limits.read_timeout_ms));
    auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      self->stream_writing_ = false;
      if (ec) return self->stream_failed();
      if (!self->pending_chunks_.empty()) self->pending_chunks_.pop_front();
      self->pump();
    };
    if (!pending_chunks_.empty()) {
      stream_writing_ = true;
      const std::string& c = pending_chunks_.front();
      if (chunked_) return net::async_write(stream_, http::make_chunk(net::buffer(c)), std::move(done));
      return net::async_write(stream_, net::buffer(c), std::move(done));
    }
    stream_.expires_never();
    if (!stream_ended_) return;
    stream_writing_ = true;
    auto finished = [self = shared_from_this()](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      self->stream_writing_ = false;
      if (ec) return self->stream_failed();
      self->finish_stream();
    };
    if (chunked_) return net::async_write(stream_, http::make_chunk_last(), std::move(finished));
    net::post(stream_.get_executor(), [finished = std::move(finished)]() mutable { finished({}, 0); });
  }
  void finish_stream() {
    const bool keep = stream_head_->keep_alive();
    streaming_ = false;
    waiting_ = false;
    stream_ended_ = false;
    stream_serializer_.reset();
    stream_head_.reset();
    request_timer_.cancel();
    stop_watching();
    server_.handler.record(target_, stream_status_, seconds());
    if (!keep) return linger();
    wait_for_request();
  }
  // A write failed or stalled: the client is gone or not reading.
  void stream_failed() {
    if (streaming_) {
      streaming_ = false;
      waiting_ = false;
      exchange_->abandon();
      server_.handler.record(target_, 499, seconds());
    }
    close();
  }

  void stop_watching() {
    ++watch_generation_;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }

  void write(HttpResponse r, bool close_after) {
    response_ = {};
    response_.result(r.status);
    response_.version(11);
    response_.set(http::field::server, "tandem");
    response_.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) response_.set(k, v);
    response_.keep_alive(keep_alive_ && !close_after && !server_.draining.load());
    response_.body() = std::move(r.body);
    response_.prepare_payload();
    if (head_) response_.body().clear();  // HEAD: GET's headers, Content-Length included, and no body
    stream_.expires_after(std::chrono::milliseconds(server_.limits.read_timeout_ms));
    http::async_write(stream_, response_, [self = shared_from_this(), close_after](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      self->server_.handler.record(self->target_, self->response_.result_int(), self->seconds());
      if (ec) return self->close();
      if (close_after || !self->response_.keep_alive()) return self->linger();
      self->wait_for_request();
    });
  }

  // After an error answer: stop sending, then read and drop what the client still sends (for a short
  // while), so closing with unread bytes does not reset the connection before the client reads.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    drain();
  }
  void drain() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(8192), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    ++read_generation_;
    read_timer_.cancel();
    request_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  double seconds() const { return std::chrono::duration<double>(SteadyClock::now() - started_).count(); }

  beast::tcp_stream stream_;  // its executor is the connection's strand (accepted on one)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer read_timer_;
  net::steady_timer request_timer_;
  ServerCore& server_;
  http::response<http::string_body> response_;
  std::shared_ptr<ExchangeImpl> exchange_;
  std::string target_;
  SteadyClock::time_point started_ = SteadyClock::now();
  uint64_t read_generation_ = 0;
  uint64_t watch_generation_ = 0;
  bool read_timed_out_ = false;
  bool waiting_ = false;
  bool keep_alive_ = true;
  bool head_ = false;  // the pending request is a HEAD
  unsigned version_ = 11;
  // A streamed answer in progress: its head, what is queued, whether a write is outstanding.
  bool streaming_ = false;
  bool stream_ended_ = false;
  bool stream_writing_ = false;
  bool chunked_ = true;
  unsigned stream_status_ = 200;
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
  std::deque<std::string> pending_chunks_;
};

template <typename Fn>
void ExchangeImpl::post(Fn&& fn) {
  std::lock_guard lock(gate_->mutex);
  if (!gate_->open) return;  // the server has stopped
  auto session = session_.lock();
  if (!session) return;  // the connection is gone: nobody to answer
  net::post(session->executor(), std::forward<Fn>(fn));
}  // `session` is released here, under the lock: never the last owner after the server's end

void ExchangeImpl::reply(std::function<HttpResponse()> make) {
  if (!claim()) return;
  post([weak = session_, make = std::move(make)] {
    auto s = weak.lock();
    if (!s) return;
    try {
      s->deliver(make());
    } catch (const std::exception& e) {
      log::error("http: making an answer threw: {}", e.what());
      s->deliver(internal_error(e.what()));
    }
  });
}

bool ExchangeImpl::start_stream(HttpResponse head) {
  if (!claim()) return false;  // when the connection is gone, the sends that follow go nowhere
  post([weak = session_, head = std::move(head)]() mutable {
    if (auto s = weak.lock()) s->begin_stream(std::move(head));
  });
  return true;
}

void ExchangeImpl::send(std::string chunk) {
  post([weak = session_, chunk = std::move(chunk)]() mutable {
    if (auto s = weak.lock()) s->stream_chunk(std::move(chunk));
  });
}

void ExchangeImpl::end() {
  post([weak = session_] {
    if (auto s = weak.lock()) s->stream_end();
  });
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopped.load() || !acceptor.is_open()) return;  // closed: the close aborted this accept
    if (!ec) {
      const bool over = sessions.load() >= limits.max_connections;
      std::make_shared<Session>(std::move(socket), *this)->start(over);
    } else {
      log::warn("http: accept: {}", ec.message());
    }
    accept();
  });
}

void HttpServer::Impl::begin_closing_listener() {
  if (!acceptor.is_open()) return;
  if (!drop_new_handshakes(acceptor.native_handle())) {
    log::warn("http: cannot filter the listener's new handshakes; closing it may reset a connection just made");
    return close_listener();
  }
  settle.expires_after(kHandshakeSettle);
  settle.async_wait([this](beast::error_code ec) {
    if (!ec) close_listener();
  });
}

void HttpServer::Impl::close_listener() {
  beast::error_code ec;
  if (!acceptor.is_open()) return;
  acceptor.non_blocking(true, ec);
  while (!ec) {
    tcp::socket socket(net::make_strand(ioc));
    acceptor.accept(socket, ec);
    if (!ec) std::make_shared<Session>(std::move(socket), *this)->start(sessions.load() >= limits.max_connections);
  }
  acceptor.close(ec);
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpServer>> HttpServer::start(const config::Listener& listener, const config::Limits& limits,
                                                      HttpHandler& handler) {
  auto impl = std::make_unique<Impl>(listener, limits, handler);
  beast::error_code ec;
  const auto address = net::ip::make_address(listener.host, ec);
  if (ec) return Error::make(ErrorKind::kInvalidArgument, "server.host '{}': {}", listener.host, ec.message());
  const tcp::endpoint endpoint(address, listener.port);
  auto fail = [&](const char* what) {
    return Error::make(ErrorKind::kIo, "cannot listen on {}:{} ({}): {}", listener.host, listener.port, what,
                       ec.message());
  };
  impl->acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return fail("reuse_address");
  impl->acceptor.bind(endpoint, ec);
  if (ec == net::error::address_in_use) {
    return Error::make(ErrorKind::kIo,
                       "cannot listen on {}:{}: the port is in use by another process; stop it or set server.port to "
                       "another port (0 picks a free one)",
                       listener.host, listener.port);
  }
  if (ec) return fail("bind");
  impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  impl->port = impl->acceptor.local_endpoint(ec).port();
  impl->work.emplace(impl->ioc.get_executor());
  impl->accept();
  Impl* raw = impl.get();
  for (uint32_t i = 0; i < listener.io_threads; ++i) {
    impl->threads.emplace_back([raw] {
      worker::name_this_thread("http-io");
      for (;;) {
        try {
          raw->ioc.run();
          return;
        } catch (const std::exception& e) {
          log::error("http: a handler threw: {}", e.what());  // keep serving the other connections
        }
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::stop_accepting() {
  impl_->draining.store(true);
  if (!impl_->accepting.exchange(false)) return;
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] { impl->begin_closing_listener(); });
}

size_t HttpServer::open_connections() const { return impl_->sessions.load(); }

void HttpServer::stop() {
  if (impl_->stopped.exchange(true)) return;
  {
    std::lock_guard lock(impl_->gate->mutex);  // waits out a thread that is posting to a connection
    impl_->gate->open = false;  // answers from now on go nowhere: every connection is about to close
  }
  impl_->accepting.store(false);
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    impl->settle.cancel();
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace tandem::coordinator

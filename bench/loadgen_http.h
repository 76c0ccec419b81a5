// A small blocking HTTP/1.1 client over POSIX sockets, for the load generator and the service tests: raw
// bytes in (so tests can send malformed and slow requests), parsed responses out, with timeouts so no
// caller can hang. Header-only: bench/ and tests/ both use it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::loadgen {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  // A chunked body: when each chunk was read and where it ends in `body` (a streamed answer's timing).
  std::vector<std::pair<std::chrono::steady_clock::time_point, size_t>> chunks;
};

class HttpConnection {
 public:
  explicit HttpConnection(uint16_t port) : HttpConnection("127.0.0.1", port) {}
  // An IPv4 address literal and a port.
  HttpConnection(const std::string& host, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return;
    // NOLINTNEXTLINE: the sockets API takes sockaddr*
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~HttpConnection() { close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const { return connected_; }
  // The server closed the connection (as opposed to a read that timed out).
  bool closed() const { return eof_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send_raw(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  static std::string request_text(const std::string& method, const std::string& target, const std::string& body,
                                  const std::string& extra_headers = "") {
    std::string r = method + " " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers;
    if (method == "POST") r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    return r + "\r\n" + body;
  }
  std::optional<HttpReply> request(const std::string& method, const std::string& target, const std::string& body = "",
                                   std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
    if (!send_raw(request_text(method, target, body))) return std::nullopt;
    return read_reply(timeout);
  }

  // The next response (a chunked body joined); nullopt on timeout or a connection closed before a whole
  // response. The answer to a HEAD request (`head_request`) has no body whatever its Content-Length says.
  std::optional<HttpReply> read_reply(std::chrono::milliseconds timeout = std::chrono::milliseconds(30000),
                                      bool head_request = false) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) return std::nullopt;
    }
    HttpReply reply;
    const std::string head = buffer_.substr(0, header_end);
    buffer_.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    reply.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      reply.headers[name] = line.substr(v);
    }
    if (reply.status == 100) return read_reply(timeout, head_request);  // an interim answer: the final one follows
    if (head_request) return reply;
    if (reply.headers["transfer-encoding"] == "chunked") {
      if (!read_chunked(reply, deadline)) return std::nullopt;
      return reply;
    }
    const size_t length = reply.headers.count("content-length") ? std::stoul(reply.headers["content-length"]) : 0;
    while (buffer_.size() < length) {
      if (!fill(deadline)) return std::nullopt;
    }
    reply.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return reply;
  }

  // Whether the server closes the connection (EOF or reset) within `timeout`.
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!fill(deadline)) return eof_;
    }
    return eof_;
  }
  // Bytes beyond the responses read so far (an answer nobody asked for), waiting up to `wait`.
  bool has_unread(std::chrono::milliseconds wait) {
    if (!buffer_.empty()) return true;
    fill(std::chrono::steady_clock::now() + wait);
    return !buffer_.empty();
  }
  // Raw bytes received and not yet parsed (e.g. an interim "100 Continue").
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buffer_.find(text) == std::string::npos) {
      if (!fill(deadline)) return false;
    }
    return true;
  }

 private:
  // A chunked body (chunk extensions and trailers skipped) up to its last chunk.
  bool read_chunked(HttpReply& reply, std::chrono::steady_clock::time_point deadline) {
    std::string& body = reply.body;
    for (;;) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n")) == std::string::npos) {
        if (!fill(deadline)) return false;
      }
      const size_t size = std::stoul(buffer_.substr(0, line_end), nullptr, 16);
      buffer_.erase(0, line_end + 2);
      if (size == 0) {
        size_t end;
        while ((end = buffer_.find("\r\n")) == std::string::npos) {
          if (!fill(deadline)) return false;
        }
        while (end != 0) {  // trailer lines, then the empty one
          buffer_.erase(0, end + 2);
          while ((end = buffer_.find("\r\n")) == std::string::npos) {
            if (!fill(deadline)) return false;
          }
        }
        buffer_.erase(0, 2);
        return true;
      }
      while (buffer_.size() < size + 2) {
        if (!fill(deadline)) return false;
      }
      body.append(buffer_, 0, size);
      buffer_.erase(0, size + 2);
      reply.chunks.emplace_back(std::chrono::steady_clock::now(), body.size());
    }
  }
  // Reads what is there before the deadline; false on timeout, EOF or error.
  bool fill(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (fd_ < 0 || ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
};

}  // namespace tandem::loadgen

// Error: what went wrong, as a kind plus the facts (tensor, shape, YAML path, HTTP field, rank).
// Every room returns Result<T> (result.h) carrying one of these; no exception crosses a room boundary.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace tandem {

enum class ErrorKind {
  kInvalidArgument,  // a caller's input is malformed (batch, request, CLI flag)
  kNotFound,         // a file, tensor, key or model is missing
  kIo,               // the OS refused a read, write, map or socket operation
  kFormat,           // a file's bytes do not follow its format (safetensors, JSON, YAML)
  kShape,            // a tensor's shape or dtype differs from what the model needs
  kUnsupported,      // valid, but not something tandem implements
  kDevice,           // CUDA, cuBLASLt, NVRTC or NCCL reported a failure
  kCapacity,         // a bucket, cache or queue cannot hold the work
  kTimeout,
  kCancelled,
  kUnavailable,      // a rank is down or not ready
  kInternal,         // a broken invariant: a bug in tandem
};

std::string_view to_string(ErrorKind kind);

class Error {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  template <typename... Args>
  static Error make(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
    return Error(kind, fmt::format(format, std::forward<Args>(args)...));
  }

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with where it happened: "loading model.safetensors: tensor x: ...".
  Error&& context(std::string_view where) && {
    message_ = fmt::format("{}: {}", where, message_);
    return std::move(*this);
  }
  Error context(std::string_view where) const& {
    Error copy = *this;
    return std::move(copy).context(where);
  }

 private:
  ErrorKind kind_;
  std::string message_;
};

}  // namespace tandem

template <>
struct fmt::formatter<tandem::Error> : fmt::formatter<std::string_view> {
  auto format(const tandem::Error& e, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(e.message(), ctx);
  }
};

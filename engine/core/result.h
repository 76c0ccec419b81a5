// Result<T>: a value or an Error, in the spirit of C++23 std::expected (not available in C++20).
// TANDEM_TRY / TANDEM_ASSIGN propagate errors; `.context()` adds where.
#pragma once

#include <cassert>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "engine/core/error.h"

namespace tandem {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { assert(!ok()); return std::get<1>(v_); }
  Error&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

  Result context(std::string_view where) && {
    if (ok()) return std::move(*this);
    return std::move(std::get<1>(v_)).context(where);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const& { assert(!ok()); return *error_; }
  Error&& error() && { assert(!ok()); return std::move(*error_); }

  Result context(std::string_view where) && {
    if (ok()) return std::move(*this);
    return std::move(*error_).context(where);
  }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace tandem

#define TANDEM_CONCAT_INNER(a, b) a##b
#define TANDEM_CONCAT(a, b) TANDEM_CONCAT_INNER(a, b)

// Returns the error of `expr` (a Result) from the enclosing function.
#define TANDEM_TRY(expr)                                        \
  do {                                                          \
    auto&& tandem_try_result_ = (expr);                         \
    if (!tandem_try_result_.ok()) return std::move(tandem_try_result_).error(); \
  } while (false)

// `TANDEM_ASSIGN(auto x, f());` declares x from f()'s value or returns its error.
#define TANDEM_ASSIGN(decl, expr) TANDEM_ASSIGN_IMPL(TANDEM_CONCAT(tandem_assign_, __COUNTER__), decl, expr)
#define TANDEM_ASSIGN_IMPL(tmp, decl, expr)              \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return std::move(tmp).error();          \
  decl = std::move(tmp).value()

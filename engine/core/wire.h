// Byte writer and bounds-checked reader for the binary frames ranks exchange (worker/protocol.h, the
// data plane's headers in engine/comm). Little-endian on the wire whatever the host; every read checks
// the bytes left first, and list lengths are checked against the bytes left before anything is allocated.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace tandem {

class WireWriter {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void f32(float v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    u32(bits);
  }
  void f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void string(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void u32s(std::span<const uint32_t> v) {
    u32(static_cast<uint32_t>(v.size()));
    for (uint32_t x : v) u32(x);
  }
  void u8s(std::span<const uint8_t> v) {
    u32(static_cast<uint32_t>(v.size()));
    out_.insert(out_.end(), v.begin(), v.end());
  }
  void f32s(std::span<const float> v) {
    u32(static_cast<uint32_t>(v.size()));
    for (float x : v) f32(x);
  }
  void f64s(std::span<const double> v) {
    u32(static_cast<uint32_t>(v.size()));
    for (double x : v) f64(x);
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Reads fields in order; the first short read or bad length sets an error that names the field, and
// every later read then returns zeros, so callers check `error()` once at the end.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> in) : in_(in) {}

  uint8_t u8(const char* field) { return static_cast<uint8_t>(get(1, field)); }
  uint16_t u16(const char* field) { return static_cast<uint16_t>(get(2, field)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(get(4, field)); }
  uint64_t u64(const char* field) { return get(8, field); }
  float f32(const char* field) {
    const uint32_t bits = u32(field);
    float v = 0;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  double f64(const char* field) {
    const uint64_t bits = u64(field);
    double v = 0;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }
  std::string string(const char* field) {
    const uint32_t n = count(field, 1);
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);  // INVARIANT: count() checked n bytes remain
    pos_ += n;
    return s;
  }
  std::vector<uint32_t> u32s(const char* field) {
    std::vector<uint32_t> v(count(field, 4));
    for (auto& x : v) x = u32(field);
    return v;
  }
  std::vector<uint8_t> u8s(const char* field) {
    const uint32_t n = count(field, 1);
    std::vector<uint8_t> v(in_.begin() + static_cast<std::ptrdiff_t>(pos_),
                           in_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return v;
  }
  std::vector<float> f32s(const char* field) {
    std::vector<float> v(count(field, 4));
    for (auto& x : v) x = f32(field);
    return v;
  }
  std::vector<double> f64s(const char* field) {
    std::vector<double> v(count(field, 8));
    for (auto& x : v) x = f64(field);
    return v;
  }

  size_t left() const { return in_.size() - pos_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  uint64_t get(size_t n, const char* field) {
    if (failed() || left() < n) {
      fail(std::string("truncated at ") + field);
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{in_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  // A list length that the remaining bytes can hold at `unit` bytes per element, else 0 and an error.
  uint32_t count(const char* field, size_t unit) {
    const uint32_t n = u32(field);
    if (failed()) return 0;
    if (uint64_t{n} * unit > left()) {
      fail(std::string(field) + ": length " + std::to_string(n) + " exceeds the " + std::to_string(left()) +
           " bytes left");
      return 0;
    }
    return n;
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  std::string error_;
};

// The error of a frame from a peer rank that does not decode: what it was meant to be, who sent it, its
// size and the first thing wrong with it (every decoder of the rank protocols words it so).
inline Error malformed_frame(std::string_view what, int peer, size_t bytes, const std::string& why) {
  return Error::make(ErrorKind::kFormat, "malformed {} from rank {} ({} bytes): {}", what, peer, bytes, why);
}

}  // namespace tandem

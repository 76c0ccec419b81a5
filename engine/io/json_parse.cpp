// Strict JSON parsing and file reading for engine/io (duplicate keys, depth cap, bounded reads).
#include "engine/io/json_parse_impl.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "engine/io/hf_config.h"
#include "engine/io/regular_file_impl.h"

namespace tandem::io {
namespace {

using nlohmann::json;

// Thrown from the parser callback to stop parsing at once; caught in parse_json_strict.
struct StrictJsonViolation {
  std::string message;
};

// nlohmann's messages start with "[json.exception.parse_error.101] "; the file name says enough.
std::string strip_exception_id(const char* what) {
  std::string_view text(what);
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("] ");
    if (close != std::string_view::npos) text.remove_prefix(close + 2);
  }
  return std::string(text);
}

constexpr size_t kMaxConfigBytes = size_t{64} << 20;
constexpr size_t kMaxConfigDepth = 64;

}  // namespace

Result<json> parse_json_strict(std::string_view text, std::string_view origin, size_t max_depth) {
  // One key set per open object; the callback sees every key before its value.
  std::vector<std::set<std::string, std::less<>>> open_objects;
  std::vector<std::string> object_names;  // the key each open object sits under, for messages
  std::string last_key;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (static_cast<size_t>(depth) >= max_depth) {
          throw StrictJsonViolation{fmt::format("nesting deeper than {} levels", max_depth)};
        }
        if (event == json::parse_event_t::object_start) {
          open_objects.emplace_back();
          object_names.push_back(depth == 0 ? std::string() : last_key);
        }
        return true;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) {
          open_objects.pop_back();
          object_names.pop_back();
        }
        return true;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open_objects.empty() && !open_objects.back().insert(key).second) {
          const std::string& parent = object_names.back();
          throw StrictJsonViolation{
              parent.empty() ? fmt::format("duplicate key \"{}\"", key)
                             : fmt::format("duplicate key \"{}\" in object \"{}\"", key, parent)};
        }
        last_key = key;
        return true;
      }
      case json::parse_event_t::array_end:
      case json::parse_event_t::value:
        return true;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const StrictJsonViolation& v) {
    return Error::make(ErrorKind::kFormat, "{}: {}", origin, v.message);
  } catch (const json::exception& e) {
    return Error::make(ErrorKind::kFormat, "{}: invalid JSON: {}", origin, strip_exception_id(e.what()));
  } catch (const std::bad_alloc&) {
    return Error::make(ErrorKind::kCapacity, "{}: out of memory while parsing JSON", origin);
  }
}

Result<std::string> read_file_capped(const std::string& path, size_t max_bytes) {
  TANDEM_ASSIGN(const RegularFile file, RegularFile::open(path));
  if (file.size() > max_bytes) {
    return Error::make(ErrorKind::kFormat, "{}: file is {} bytes, more than the {} allowed", path, file.size(),
                       max_bytes);
  }
  std::string text(static_cast<size_t>(file.size()), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      return Error::make(ErrorKind::kIo, "{}: read failed after {} bytes: {}", path, done,
                         n == 0 ? "unexpected end of file" : std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  return text;
}

std::string describe_json(const json& value) {
  constexpr size_t kMaxString = 64;
  switch (value.type()) {
    case json::value_t::object:
      return fmt::format("an object with {} keys", value.size());
    case json::value_t::array:
      return fmt::format("an array of {} elements", value.size());
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (s.size() <= kMaxString) return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
      const std::string cut = json(s.substr(0, kMaxString)).dump(-1, ' ', false, json::error_handler_t::replace);
      return fmt::format("{}... ({} bytes)", cut, s.size());
    }
    case json::value_t::null:
    case json::value_t::boolean:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return value.dump();
    case json::value_t::binary:
    case json::value_t::discarded:
      return "a non-JSON value";
  }
  return "a value";
}

Result<json> read_json_file(const std::string& path) {
  TANDEM_ASSIGN(std::string text, read_file_capped(path, kMaxConfigBytes));
  return parse_json_strict(text, path, kMaxConfigDepth);
}

}  // namespace tandem::io

// The JSON body helpers of the request parsers (json_body_impl.h).
#include "coordinator/json_body_impl.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace tandem::coordinator {
namespace {

using nlohmann::json;

// Nesting depth, scanned before parsing so a pathological body costs nothing but this loop.
int json_depth(std::string_view body) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// SAX events to nlohmann's own DOM builder, keeping the path of the value being read, so that whatever
// the parser refuses (bad syntax, invalid UTF-8, a number past a double such as 1e999) is named by the
// field it happened in. No exception leaves: the builder runs with exceptions off and parse_error keeps
// the parser's message.
class PathTrackingSax {
 public:
  explicit PathTrackingSax(json& root) : dom_(root, false) {}

  bool null() { return enter(), dom_.null(); }
  bool boolean(bool v) { return enter(), dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return enter(), dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return enter(), dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& text) { return enter(), dom_.number_float(v, text); }
  bool string(json::string_t& v) { return enter(), dom_.string(v); }
  bool binary(json::binary_t& v) { return enter(), dom_.binary(v); }
  bool start_object(std::size_t n) {
    frames_.push_back(Frame{enter(), false, 0, {}, false});
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    frames_.back().key = k;
    frames_.back().key_pending = true;
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    frames_.push_back(Frame{enter(), true, 0, {}, false});
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    const auto cut = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && cut != std::string::npos) what = what.substr(cut + 2);
    error_ = std::move(what);
    where_ = next_path();
    return false;
  }

  const std::string& error() const { return error_; }
  const std::string& where() const { return where_; }

 private:
  struct Frame {
    std::string path;  // of the array or object itself
    bool array;
    size_t count;      // elements begun (arrays)
    std::string key;   // the last key read (objects)
    bool key_pending;  // read, its value not begun yet
  };
  static std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : at(path, key); }
  // The path of a value that begins now; advances the container's position.
  std::string enter() {
    if (frames_.empty()) return {};
    Frame& f = frames_.back();
    if (f.array) return at(f.path, f.count++);
    f.key_pending = false;
    return join(f.path, f.key);
  }
  // Where a failure falls: the element or the key's value being read, else the container itself.
  std::string next_path() const {
    if (frames_.empty()) return {};
    const Frame& f = frames_.back();
    if (f.array) return at(f.path, f.count);
    return f.key_pending ? join(f.path, f.key) : f.path;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Frame> frames_;
  std::string error_;
  std::string where_;
};

}  // namespace

bool is_json_content_type(std::string_view type) {
  if (type.empty()) return true;  // curl -d without -H: accept
  std::string lower(type.substr(0, type.find(';')));
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  while (!lower.empty() && lower.back() == ' ') lower.pop_back();
  return lower == "application/json";
}

std::string at(const std::string& path, std::string_view key) { return fmt::format("{}.{}", path, key); }
std::string at(const std::string& path, size_t index) { return fmt::format("{}[{}]", path, index); }

const char* json_kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    case json::value_t::binary:
    case json::value_t::discarded: return "not JSON";
  }
  return "not JSON";
}

// A value as it appears in a message: its JSON text, shortened.
std::string json_shown(const json& j) {
  std::string text = j.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

ApiError wrong_type(const std::string& path, const json& j, std::string_view expected) {
  return bad_request(fmt::format("{} must be {}, not {}", path, expected, json_kind(j)), path);
}

ApiResult<json> parse_json_object(std::string_view body) {
  if (json_depth(body) > kMaxJsonDepth) {
    return bad_request(fmt::format("the body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  }
  json j;
  PathTrackingSax sax(j);
  bool parsed = false;
  try {
    parsed = json::sax_parse(body.begin(), body.end(), &sax);
  } catch (const std::exception& e) {  // allocation failures: the parser's own errors come to parse_error
    return bad_request(fmt::format("the body could not be parsed: {}", e.what()));
  }
  if (!parsed) {
    if (sax.where().empty()) return bad_request(fmt::format("the body is not valid JSON: {}", sax.error()));
    return bad_request(fmt::format("the body is not valid JSON at {}: {}", sax.where(), sax.error()), sax.where());
  }
  if (!j.is_object()) return bad_request(fmt::format("the body must be a JSON object, not {}", json_kind(j)));
  return j;
}

std::optional<ApiError> check_keys(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* k : keys) known = known || it.key() == k;
    if (!known) {
      std::string allowed;
      for (const char* k : keys) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
      const std::string field = path.empty() ? it.key() : at(path, it.key());
      return bad_request(fmt::format("unknown field '{}'; allowed: {}", field, allowed), field);
    }
  }
  return std::nullopt;
}


}  // namespace tandem::coordinator

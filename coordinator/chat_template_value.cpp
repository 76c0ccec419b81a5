// Values of the chat template renderer (chat_template_impl.h) with Python's behaviour: truth, equality,
// str() as Jinja2 prints it, HF's tojson, and the str and dict methods templates call. Anything whose
// Python result this file does not reproduce exactly (a list's repr, lower() of non-ASCII text) is an
// error, never an approximation.
#include <algorithm>
#include <cmath>

#include "coordinator/chat_template_impl.h"

namespace tandem::coordinator::jinja {
namespace {

Error bad(std::string_view what) { return Error(ErrorKind::kInvalidArgument, std::string(what)); }

// Python's repr(float), which Jinja2 prints and json.dumps writes: the shortest round-trip digits,
// ".0" on integral values, exponents past 1e16 and below 1e-4.
std::string float_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == std::floor(d) && std::fabs(d) < 1e16) return fmt::format("{:.1f}", d);
  // fmt's shortest round-trip form is Python's repr, exponents with at least two digits (1e-05) included.
  return fmt::format("{}", d);
}

// The set of code points of `chars` (strip's argument), or Python whitespace when null.
bool in_chars(char32_t c, const std::vector<char32_t>* chars) {
  if (chars == nullptr) return is_python_space(c);
  return std::find(chars->begin(), chars->end(), c) != chars->end();
}

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t p = 0; p < s.size();) {
    size_t n = 1;
    out.push_back(decode_utf8(s, p, &n));
    p += n;
  }
  return out;
}

std::string strip(const std::string& s, const std::vector<char32_t>* chars, bool left, bool right) {
  const auto offs = code_point_offsets(s);
  size_t b = 0;
  size_t e = offs.size();
  if (left) {
    while (b < e && in_chars(decode_utf8(s, offs[b], nullptr), chars)) ++b;
  }
  if (right) {
    while (e > b && in_chars(decode_utf8(s, offs[e - 1], nullptr), chars)) --e;
  }
  const size_t from = b < offs.size() ? offs[b] : s.size();
  const size_t to = e < offs.size() ? offs[e] : s.size();
  return s.substr(from, to - from);
}

Result<Value> split(const std::string& s, const std::vector<Value>& args) {
  int64_t max = -1;
  if (args.size() > 1) {
    if (!args[1].is_int()) return bad("split(): maxsplit must be an integer");
    max = args[1].as_int();
  }
  List out;
  if (args.empty() || args[0].is_none()) {  // runs of whitespace, none empty
    const auto offs = code_point_offsets(s);
    size_t i = 0;
    while (i < offs.size()) {
      while (i < offs.size() && is_python_space(decode_utf8(s, offs[i], nullptr))) ++i;
      if (i == offs.size()) break;
      if (max >= 0 && static_cast<int64_t>(out.size()) == max) {
        out.emplace_back(strip(s.substr(offs[i]), nullptr, false, true));
        break;
      }
      size_t j = i;
      while (j < offs.size() && !is_python_space(decode_utf8(s, offs[j], nullptr))) ++j;
      const size_t to = j < offs.size() ? offs[j] : s.size();
      out.emplace_back(s.substr(offs[i], to - offs[i]));
      i = j;
    }
    return make_list(std::move(out));
  }
  if (!args[0].is_string()) return bad("split(): the separator must be a string");
  const std::string& sep = args[0].str();
  if (sep.empty()) return bad("split(): empty separator");
  size_t pos = 0;
  for (;;) {
    const size_t at = s.find(sep, pos);
    if (at == std::string::npos || (max >= 0 && static_cast<int64_t>(out.size()) == max)) {
      out.emplace_back(s.substr(pos));
      break;
    }
    out.emplace_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
  return make_list(std::move(out));
}

Result<std::string> ascii_case(const std::string& s, bool upper, std::string_view method) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return bad(fmt::format("{}() of non-ASCII text is not supported", method));
    }
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

Status json_value(std::string& out, const Value& v, int indent, int depth) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.v.index()) {
    case 0: return bad("tojson of an undefined value");
    case 1: out += "null"; return ok_status();
    case 2: out += std::get<2>(v.v) ? "true" : "false"; return ok_status();
    case 3: out += fmt::format("{}", std::get<3>(v.v)); return ok_status();
    case 4: {
      const double d = std::get<4>(v.v);
      out += std::isnan(d) ? "NaN" : (std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_text(d));
      return ok_status();
    }
    case 5: json_string(out, v.str()); return ok_status();
    case 6: {
      const List& l = v.list();
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent >= 0) newline(depth + 1);
        TANDEM_TRY(json_value(out, l[i], indent, depth + 1));
      }
      if (indent >= 0 && !l.empty()) newline(depth);
      out += ']';
      return ok_status();
    }
    case 7: {
      const Dict& d = v.dict();
      out += '{';
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent >= 0) newline(depth + 1);
        json_string(out, d.items[i].first);
        out += ": ";
        TANDEM_TRY(json_value(out, d.items[i].second, indent, depth + 1));
      }
      if (indent >= 0 && !d.items.empty()) newline(depth);
      out += '}';
      return ok_status();
    }
    default: return bad("tojson of a namespace");
  }
}

}  // namespace

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Namespace::find(std::string_view key) {
  for (auto& [k, v] : attrs) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value make_list(List items) { return Value(std::make_shared<const List>(std::move(items))); }
Value make_dict(Dict dict) { return Value(std::make_shared<const Dict>(std::move(dict))); }

const char* type_name(const Value& v) {
  switch (v.v.index()) {
    case 0: return "undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return "list";
    case 7: return "dict";
    default: return "Namespace";
  }
}

char32_t decode_utf8(std::string_view s, size_t pos, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t n = 1;
  char32_t c = 0xFFFD;
  if (b0 < 0x80) {
    c = b0;
  } else {
    const size_t want = b0 >= 0xF0 ? 4 : (b0 >= 0xE0 ? 3 : (b0 >= 0xC0 ? 2 : 0));
    bool ok = want > 0 && pos + want <= s.size();
    for (size_t i = 1; ok && i < want; ++i) ok = (static_cast<unsigned char>(s[pos + i]) & 0xC0) == 0x80;
    if (ok) {
      c = want == 2 ? (b0 & 0x1Fu) : (want == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u));
      for (size_t i = 1; i < want; ++i) c = (c << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3Fu);
      n = want;
    }
  }
  if (len != nullptr) *len = n;
  return c;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> out;
  for (size_t p = 0; p < s.size();) {
    out.push_back(p);
    size_t n = 1;
    decode_utf8(s, p, &n);
    p += n;
  }
  return out;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool truthy(const Value& v) {
  switch (v.v.index()) {
    case 0:
    case 1: return false;
    case 2: return std::get<2>(v.v);
    case 3: return std::get<3>(v.v) != 0;
    case 4: return std::get<4>(v.v) != 0.0;
    case 5: return !v.str().empty();
    case 6: return !v.list().empty();
    case 7: return !v.dict().items.empty();
    default: return true;
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
    case 0:
    case 1: return true;
    case 5: return a.str() == b.str();
    case 6: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case 7: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.find(k);
        if (o == nullptr || !equal(v, *o)) return false;
      }
      return true;
    }
    default: return std::get<8>(a.v) == std::get<8>(b.v);
  }
}

Result<std::string> to_text(const Value& v) {
  switch (v.v.index()) {
    case 0: return std::string();
    case 1: return std::string("None");
    case 2: return std::string(std::get<2>(v.v) ? "True" : "False");
    case 3: return fmt::format("{}", std::get<3>(v.v));
    case 4: return float_text(std::get<4>(v.v));
    case 5: return v.str();
    default:
      return bad(fmt::format("printing a {} is not supported (Python's repr); use |tojson", type_name(v)));
  }
}

Result<std::string> to_json(const Value& v, int indent) {
  std::string out;
  TANDEM_TRY(json_value(out, v, indent, 0));
  return out;
}

Result<Value> call_method(const Value& self, std::string_view name, const std::vector<Value>& args) {
  auto arity = [&](size_t lo, size_t hi) -> Status {
    if (args.size() < lo || args.size() > hi) {
      return bad(fmt::format("{}.{}() takes {} to {} arguments, not {}", type_name(self), name, lo, hi, args.size()));
    }
    return ok_status();
  };
  if (self.is_string()) {
    const std::string& s = self.str();
    if (name == "startswith" || name == "endswith") {
      TANDEM_TRY(arity(1, 1));
      std::vector<std::string> options;
      if (args[0].is_string()) options.push_back(args[0].str());
      if (args[0].is_list()) {
        for (const Value& o : args[0].list()) {
          if (!o.is_string()) return bad(fmt::format("str.{}() takes strings", name));
          options.push_back(o.str());
        }
      }
      if (options.empty() && !args[0].is_list()) return bad(fmt::format("str.{}() takes a string", name));
      for (const std::string& o : options) {
        const bool hit = name == "startswith" ? s.rfind(o, 0) == 0
                                              : (s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0);
        if (hit) return Value(true);
      }
      return Value(false);
    }
    if (name == "split") {
      TANDEM_TRY(arity(0, 2));
      return split(s, args);
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      TANDEM_TRY(arity(0, 1));
      std::vector<char32_t> chars;
      const bool given = !args.empty() && !args[0].is_none();
      if (given) {
        if (!args[0].is_string()) return bad(fmt::format("str.{}() takes a string", name));
        chars = code_points(args[0].str());
      }
      return Value(strip(s, given ? &chars : nullptr, name != "rstrip", name != "lstrip"));
    }
    if (name == "lower" || name == "upper") {
      TANDEM_TRY(arity(0, 0));
      TANDEM_ASSIGN(std::string out, ascii_case(s, name == "upper", name));
      return Value(std::move(out));
    }
    if (name == "replace") {
      TANDEM_TRY(arity(2, 3));
      if (!args[0].is_string() || !args[1].is_string()) return bad("str.replace() takes strings");
      int64_t count = args.size() > 2 && args[2].is_int() ? args[2].as_int() : -1;
      const std::string& from = args[0].str();
      const std::string& to = args[1].str();
      if (from.empty()) return bad("str.replace() of an empty string is not supported");
      std::string out;
      size_t pos = 0;
      for (;;) {
        const size_t at = s.find(from, pos);
        if (at == std::string::npos || count == 0) break;
        out.append(s, pos, at - pos);
        out += to;
        pos = at + from.size();
        if (count > 0) --count;
      }
      out.append(s, pos, std::string::npos);
      return Value(std::move(out));
    }
  }
  if (self.is_dict()) {
    const Dict& d = self.dict();
    if (name == "get") {
      TANDEM_TRY(arity(1, 2));
      if (!args[0].is_string()) return Value(args.size() > 1 ? args[1] : Value(None{}));
      const Value* v = d.find(args[0].str());
      if (v != nullptr) return *v;
      return args.size() > 1 ? args[1] : Value(None{});
    }
    if (name == "items" || name == "keys" || name == "values") {
      TANDEM_TRY(arity(0, 0));
      List out;
      for (const auto& [k, v] : d.items) {
        if (name == "items") out.push_back(make_list(List{Value(k), v}));
        if (name == "keys") out.emplace_back(k);
        if (name == "values") out.push_back(v);
      }
      return make_list(std::move(out));
    }
  }
  if (self.is_undefined()) {
    return bad(fmt::format("'{}' is undefined, so it has no method {}()", self.is_undefined() ? std::get<0>(self.v).name : "",
                           name));
  }
  return bad(fmt::format("'{}' object has no method {}()", type_name(self), name));
}

}  // namespace tandem::coordinator::jinja

// The chat template lexer (chat_template_impl.h): Jinja2's lexer with HF's settings (trim_blocks and
// lstrip_blocks on, keep_trailing_newline off), so text around tags keeps exactly the whitespace Jinja2
// keeps; tags become tokens.
#include <optional>

#include "coordinator/chat_template_impl.h"

namespace tandem::coordinator::jinja {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python's str.rstrip() without arguments on UTF-8 text.
std::string rstrip_space(std::string s) {
  const auto offs = code_point_offsets(s);
  size_t end = s.size();
  for (size_t i = offs.size(); i-- > 0;) {
    if (!is_python_space(decode_utf8(s, offs[i], nullptr))) break;
    end = offs[i];
  }
  s.resize(end);
  return s;
}

// Length of the Python whitespace run at the start of `s`.
size_t space_prefix(std::string_view s) {
  size_t p = 0;
  while (p < s.size()) {
    size_t n = 1;
    if (!is_python_space(decode_utf8(s, p, &n))) break;
    p += n;
  }
  return p;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::optional<uint32_t> hex_value(std::string_view s) {
  uint32_t v = 0;
  for (char c : s) {
    v <<= 4;
    if (is_digit(c)) v |= static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
    else return std::nullopt;
  }
  return v;
}

// A string literal's body as Python's unicode-escape reads it (Jinja2 decodes literals so).
Result<std::string> unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        auto v = i + n < body.size() + 1 ? hex_value(body.substr(i + 1, n)) : std::nullopt;
        if (!v || i + n >= body.size() + 1 || *v > 0x10FFFF || (*v >= 0xD800 && *v < 0xE000)) {
          return Error::make(ErrorKind::kUnsupported, "line {}: the escape \\{} in a string literal is malformed", line,
                             e);
        }
        append_utf8(out, *v);
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = 0;
          size_t n = 0;
          while (n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') v = v * 8 + static_cast<uint32_t>(body[i++] - '0'), ++n;
          --i;
          append_utf8(out, v);
        } else if (e == 'N') {
          return Error::make(ErrorKind::kUnsupported, "line {}: the escape \\N{{...}} in a string literal is not supported",
                             line);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

constexpr std::string_view kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
constexpr std::string_view kOps1 = "+-*/%~()[]{},.:|=<>";

// Reads the tokens of one tag from `pos` to its closing delimiter; `pos` ends after it. Sets `strip_after`
// for a "-" close and `keep_newline` for a "+" close.
Result<std::vector<Token>> tag_tokens(std::string_view src, size_t& pos, int& line, bool block, bool& strip_after,
                                      bool& keep_newline) {
  std::vector<Token> out;
  const std::string_view close = block ? "%}" : "}}";
  const int start_line = line;
  std::string open_brackets;  // as Jinja2's balancing stack: no tag ends inside ( [ {
  for (;;) {
    while (pos < src.size() && (src[pos] == ' ' || src[pos] == '\t' || src[pos] == '\n' || src[pos] == '\r')) {
      if (src[pos] == '\n') ++line;
      ++pos;
    }
    if (pos >= src.size()) {
      return Error::make(ErrorKind::kUnsupported, "line {}: a tag opened here is never closed with {}", start_line,
                         close);
    }
    const std::string_view rest = src.substr(pos);
    if (!open_brackets.empty()) {
      // fall through to the tokens
    } else if (rest.substr(0, 1) == "-" && rest.substr(1, 2) == close) {
      strip_after = true;
      pos += 3;
      return out;
    } else if (block && rest.substr(0, 3) == "+%}") {
      keep_newline = true;
      pos += 3;
      return out;
    } else if (rest.substr(0, 2) == close) {
      pos += 2;
      return out;
    }
    const char c = src[pos];
    Token t;
    t.line = line;
    if (is_name_start(c)) {
      size_t e = pos;
      while (e < src.size() && (is_name_start(src[e]) || is_digit(src[e]))) ++e;
      t.kind = Tok::kName;
      t.text = std::string(src.substr(pos, e - pos));
      pos = e;
    } else if (is_digit(c)) {
      size_t e = pos;
      bool fraction = false;
      while (e < src.size() && (is_digit(src[e]) || src[e] == '_')) ++e;
      if (e + 1 < src.size() && src[e] == '.' && is_digit(src[e + 1])) {
        fraction = true;
        ++e;
        while (e < src.size() && (is_digit(src[e]) || src[e] == '_')) ++e;
      }
      if (e < src.size() && (src[e] == 'e' || src[e] == 'E')) {
        size_t x = e + 1;
        if (x < src.size() && (src[x] == '+' || src[x] == '-')) ++x;
        if (x < src.size() && is_digit(src[x])) {
          fraction = true;
          e = x;
          while (e < src.size() && is_digit(src[e])) ++e;
        }
      }
      t.kind = fraction ? Tok::kFloat : Tok::kInt;
      for (char d : src.substr(pos, e - pos)) {
        if (d != '_') t.text += d;
      }
      pos = e;
    } else if (c == '\'' || c == '"') {
      size_t e = pos + 1;
      while (e < src.size() && src[e] != c) {
        if (src[e] == '\\') ++e;
        if (e < src.size() && src[e] == '\n') ++line;
        ++e;
      }
      if (e >= src.size()) return Error::make(ErrorKind::kUnsupported, "line {}: a string literal is never closed", t.line);
      auto s = unescape(src.substr(pos + 1, e - pos - 1), t.line);
      if (!s.ok()) return std::move(s).error();
      t.kind = Tok::kString;
      t.text = std::move(s.value());
      pos = e + 1;
    } else {
      t.kind = Tok::kOp;
      for (std::string_view op : kOps2) {
        if (rest.substr(0, 2) == op) t.text = std::string(op);
      }
      if (t.text.empty() && kOps1.find(c) != std::string_view::npos) t.text = std::string(1, c);
      if (t.text.empty()) {
        return Error::make(ErrorKind::kUnsupported, "line {}: unexpected character '{}' in a tag", line, c);
      }
      pos += t.text.size();
      const char k = t.text[0];
      if (t.text.size() == 1 && (k == '(' || k == '[' || k == '{')) open_brackets += k;
      if (t.text.size() == 1 && (k == ')' || k == ']' || k == '}')) {
        const char want = k == ')' ? '(' : (k == ']' ? '[' : '{');
        if (open_brackets.empty() || open_brackets.back() != want) {
          return Error::make(ErrorKind::kUnsupported, "line {}: unexpected '{}' in a tag", t.line, k);
        }
        open_brackets.pop_back();
      }
    }
    out.push_back(std::move(t));
  }
}

}  // namespace

Result<std::vector<Piece>> lex(std::string_view source) {
  // Jinja2 reads every \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Piece> pieces;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;  // the text so far ends a line (Jinja2's lstrip_blocks rule)
  while (pos <= src.size()) {
    size_t open = pos;
    for (;;) {
      open = src.find('{', open);
      if (open == std::string::npos || open + 1 >= src.size()) {
        open = std::string::npos;
        break;
      }
      const char k = src[open + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++open;
    }
    std::string text = src.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (open == std::string::npos) {
      if (!text.empty()) pieces.push_back(Piece{PieceKind::kText, text, {}, line});
      break;
    }
    const char kind = src[open + 1];
    const char marker = open + 2 < src.size() ? src[open + 2] : '\0';
    int text_lines = 0;
    for (char ch : text) text_lines += ch == '\n';
    if (marker == '-') {
      text = rstrip_space(std::move(text));
    } else if (marker != '+' && kind != '{') {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        if (text.find_first_not_of(" \t", l_pos) == std::string::npos) text.resize(l_pos);
      }
    }
    if (!text.empty()) pieces.push_back(Piece{PieceKind::kText, text, {}, line});
    line += text_lines;
    pos = open + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
    bool strip_after = false;
    bool keep_newline = false;
    if (kind == '#') {
      const size_t end = src.find("#}", pos);
      if (end == std::string::npos) {
        return Error::make(ErrorKind::kUnsupported, "line {}: a comment opened here is never closed with #}}", line);
      }
      for (size_t i = pos; i < end; ++i) line += src[i] == '\n';
      strip_after = end > pos && src[end - 1] == '-';
      keep_newline = end > pos && src[end - 1] == '+';
      pos = end + 2;
    } else {
      const int tag_line = line;
      auto tokens = tag_tokens(src, pos, line, kind == '%', strip_after, keep_newline);
      if (!tokens.ok()) return std::move(tokens).error();
      if (kind == '%' && !tokens.value().empty() && tokens.value()[0].kind == Tok::kName &&
          tokens.value()[0].text == "raw") {
        return Error::make(ErrorKind::kUnsupported, "line {}: {{% raw %}} is not supported", tag_line);
      }
      pieces.push_back(Piece{kind == '%' ? PieceKind::kStatement : PieceKind::kOutput, {}, std::move(tokens.value()),
                             tag_line});
    }
    // trim_blocks: the first newline after a block or comment tag goes, unless it closed with "+".
    line_starting = false;
    if (!strip_after && kind != '{' && !keep_newline && pos < src.size() && src[pos] == '\n') {
      ++pos;
      ++line;
      line_starting = true;
    }
    if (strip_after) {
      // The whitespace the "-" takes is consumed now, so line_starting follows its last character.
      const size_t n = space_prefix(std::string_view(src).substr(pos));
      for (size_t i = 0; i < n; ++i) line += src[pos + i] == '\n';
      if (n > 0) line_starting = src[pos + n - 1] == '\n';
      pos += n;
    }
  }
  return pieces;
}

}  // namespace tandem::coordinator::jinja

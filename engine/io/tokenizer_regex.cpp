// PCRE2 regexes with Oniguruma's semantics for the tokenizer (tokenizer_regex_impl.h).
#include "engine/io/tokenizer_regex_impl.h"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "engine/io/tokenizer_utf8_impl.h"

namespace tandem::io::tok {
namespace {

// Oniguruma's `\s` is Unicode White_Space; spelled out so any PCRE2 version reads it the same way.
constexpr std::string_view kWhiteSpaceBody =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// INVARIANT: PCRE2's 8-bit code unit is unsigned char, so any char buffer can be passed as its subject.
PCRE2_SPTR as_subject(std::string_view s) { return reinterpret_cast<PCRE2_SPTR>(s.data()); }

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  const int n = pcre2_get_error_message(code, buffer.data(), buffer.size());
  if (n < 0) return fmt::format("PCRE2 error {}", code);
  return std::string(buffer.begin(), buffer.begin() + n);
}

struct MatchData {
  explicit MatchData(uint32_t pairs) : data(pcre2_match_data_create(pairs, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* data;
};

// PCRE2's default match limit (10M backtracking steps) stops `\s*[\r\n]+` on a run of a few million
// spaces, which Oniguruma tokenizes. The limit grows with the subject, so matching stays bounded by a
// linear budget and only a pattern that backtracks worse than that fails, with an error.
struct MatchContext {
  explicit MatchContext(size_t subject_bytes) : context(pcre2_match_context_create(nullptr)) {
    constexpr uint64_t kFloor = 10'000'000;
    constexpr uint64_t kPerByte = 64;
    const uint64_t limit = std::max<uint64_t>(kFloor, kPerByte * subject_bytes);
    if (context) pcre2_set_match_limit(context, static_cast<uint32_t>(std::min<uint64_t>(limit, UINT32_MAX)));
  }
  ~MatchContext() { pcre2_match_context_free(context); }
  MatchContext(const MatchContext&) = delete;
  MatchContext& operator=(const MatchContext&) = delete;
  pcre2_match_context* context;
};

// pcre2_match, retried without JIT when the JIT's fixed stack is too small for this subject (the
// interpreter keeps its backtracking frames on the heap).
int match_at(const pcre2_code* code, std::string_view text, size_t start, uint32_t options,
             pcre2_match_data* md, pcre2_match_context* context) {
  int rc = pcre2_match(code, as_subject(text), text.size(), start, options | PCRE2_NO_UTF_CHECK, md, context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, as_subject(text), text.size(), start, options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                     md, context);
  }
  return rc;
}

// The word-character class of Rust's regex crate. PCRE2 before 10.40 has no binary properties; the
// fallback misses only the few non-letter, non-mark Alphabetic characters (circled letters).
pcre2_code* word_class() {
  static pcre2_code* const code = [] {
    int err = 0;
    PCRE2_SIZE offset = 0;
    for (const std::string_view p : {"[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]",
                                     "[\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]"}) {
      pcre2_code* c = pcre2_compile(as_subject(p), p.size(), PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
      if (c) return c;
    }
    return static_cast<pcre2_code*>(nullptr);
  }();
  return code;
}

}  // namespace

struct Regex::Compiled {
  explicit Compiled(pcre2_code* c) : code(c) {}
  ~Compiled() { pcre2_code_free(code); }
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  pcre2_code* code;
};

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char d = p[i + 1];
      if (d == 'Q') {  // \Q...\E is literal text, copied untouched
        const size_t e = p.find("\\E", i + 2);
        const size_t stop = e == std::string_view::npos ? p.size() : e + 2;
        out.append(p.substr(i, stop - i));
        i = stop;
      } else if (d == 's') {
        out += in_class ? std::string(kWhiteSpaceBody) : fmt::format("[{}]", kWhiteSpaceBody);
        i += 2;
      } else if (d == 'S' && !in_class) {
        // Inside a class PCRE2's \S stays: it differs from Oniguruma's only at U+180E.
        out += fmt::format("[^{}]", kWhiteSpaceBody);
        i += 2;
      } else {
        out.append(p.substr(i, 2));
        i += 2;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];  // a leading ] is literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:name:]
      const size_t e = p.find(":]", i + 2);
      const size_t stop = e == std::string_view::npos ? p.size() : e + 2;
      out.append(p.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
    ++i;
  }
  return out;
}

Result<Regex> Regex::build(std::string_view pattern, std::string_view shown, bool literal) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // Ruby syntax (Oniguruma's default) makes ^ and $ line anchors.
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  pcre2_code* code = pcre2_compile(as_subject(pattern), pattern.size(), options, &err, &offset, nullptr);
  if (!code) {
    return Error::make(ErrorKind::kFormat, "cannot compile regex \"{}\": {}", shown, pcre2_message(err));
  }
  // JIT is an optimisation: without it (or when it fails) pcre2_match interprets.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  Regex r;
  r.compiled_ = std::make_shared<const Compiled>(code);
  return r;
}

Result<Regex> Regex::compile(std::string_view pattern) {
  return build(onig_to_pcre2(pattern), pattern, /*literal=*/false);
}

Result<Regex> Regex::literal(std::string_view text) { return build(text, text, /*literal=*/true); }

Status Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (!compiled_) return Error(ErrorKind::kInternal, "find_all on a regex that was never compiled");
  const MatchData md(1);
  const MatchContext limits(text.size());
  if (!md.data || !limits.context) return Error(ErrorKind::kCapacity, "out of memory for regex match data");
  const pcre2_code* code = compiled_->code;
  // The onig crate's FindMatches: after a non-empty match, the next empty match is skipped (wherever
  // it is), and an empty match moves the search on by one character.
  size_t last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= text.size()) {
    const int rc = match_at(code, text, last_end, 0, md.data, limits.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc == 0 means the ovector had no room for groups; group 0 is still set.
    if (rc < 0) {
      return Error::make(ErrorKind::kInvalidArgument, "regex match failed on {} bytes of text: {}", text.size(),
                         pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (begin > end) {  // only \K inside a lookaround can do this
      return Error(ErrorKind::kUnsupported, "regex reported a match that ends before it starts (\\K)");
    }
    last_end = end;
    if (begin == end) {
      last_end += end < text.size() ? utf8_char_len(static_cast<unsigned char>(text[end])) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    out.push_back({begin, end});
  }
  return ok_status();
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  }
  const pcre2_code* code = word_class();
  if (!code) return false;
  std::string ch;
  utf8_append(ch, c);
  const MatchData md(1);
  if (!md.data) return false;
  return match_at(code, ch, 0, PCRE2_ANCHORED, md.data, nullptr) >= 0;
}

}  // namespace tandem::io::tok

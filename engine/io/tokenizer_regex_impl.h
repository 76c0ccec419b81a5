// The tokenizer's regular expressions on PCRE2 (UTF, Unicode properties, JIT), made to behave like the
// Oniguruma regexes HF `tokenizers` uses: `\s` means White_Space, `^`/`$` are line anchors (Ruby
// syntax), and find_all steps over empty matches exactly as the onig crate's find_iter does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace tandem::io::tok {

struct Span {
  size_t begin = 0;
  size_t end = 0;
};

// Compiled once at load and shared read-only by concurrent encodes (each find_all has its own match
// data), so it is cheap to copy.
class Regex {
 public:
  // A pattern in HF's (Oniguruma) dialect; the error names the pattern and PCRE2's reason.
  static Result<Regex> compile(std::string_view pattern);
  // Matches `text` literally (HF's Split with a String pattern).
  static Result<Regex> literal(std::string_view text);

  // The non-overlapping matches in `text` (valid UTF-8), leftmost first. A match error (PCRE2's match
  // or heap limit on a pathological input) is returned, never thrown.
  Status find_all(std::string_view text, std::vector<Span>& out) const;

 private:
  struct Compiled;
  static Result<Regex> build(std::string_view pattern, std::string_view shown, bool literal);
  std::shared_ptr<const Compiled> compiled_;
};

// Rust regex's `\s` (White_Space) and `\w` (Alphabetic, Mark, Nd, Pc, Join_Control): what HF's added
// vocabulary tests for lstrip, rstrip and single_word.
bool is_white_space(char32_t c);
bool is_word_char(char32_t c);

// `pattern` with Oniguruma's `\s` / `\S` spelled as explicit White_Space classes (PCRE2's `\s` also
// takes U+180E). Exposed for tests.
std::string onig_to_pcre2(std::string_view pattern);

}  // namespace tandem::io::tok

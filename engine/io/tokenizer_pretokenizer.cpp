// Split and ByteLevel pre-tokenizer steps with HF's delimiter behaviors (tokenizer_pretokenizer_impl.h).
#include "engine/io/tokenizer_pretokenizer_impl.h"

#include <algorithm>
#include <utility>

#include "engine/io/tokenizer_byte_level_impl.h"

namespace tandem::io::tok {
namespace {

// The regex HF's ByteLevel pre-tokenizer hard-codes (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Flagged {
  Span span;
  bool is_match;
};

}  // namespace

Result<std::vector<Span>> split_spans(const Regex& regex, std::string_view text, SplitBehavior behavior,
                                      bool invert) {
  // HF's Pattern::find_matches: the whole text as alternating non-matches and matches.
  std::vector<Flagged> flagged;
  if (text.empty()) {
    flagged.push_back({{0, 0}, false});
  } else {
    std::vector<Span> matches;
    TANDEM_TRY(regex.find_all(text, matches));
    flagged.reserve(2 * matches.size() + 1);
    size_t prev = 0;
    for (const Span& m : matches) {
      if (prev != m.begin) flagged.push_back({{prev, m.begin}, false});
      flagged.push_back({m, true});
      prev = m.end;
    }
    if (prev != text.size()) flagged.push_back({{prev, text.size()}, false});
  }
  if (invert) {
    for (Flagged& f : flagged) f.is_match = !f.is_match;
  }

  std::vector<Span> out;
  out.reserve(flagged.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Flagged& f : flagged) out.push_back(f.span);
      break;
    case SplitBehavior::kRemoved:
      for (const Flagged& f : flagged) {
        if (!f.is_match) out.push_back(f.span);
      }
      break;
    case SplitBehavior::kContiguous:
      for (const Flagged& f : flagged) {
        if (f.is_match == previous_match && !out.empty()) {
          out.back().end = f.span.end;
        } else {
          out.push_back(f.span);
        }
        previous_match = f.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Flagged& f : flagged) {
        if (f.is_match && !previous_match && !out.empty()) {
          out.back().end = f.span.end;
        } else {
          out.push_back(f.span);
        }
        previous_match = f.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      // Walks backwards: a match joins the non-match that follows it.
      for (auto it = flagged.rbegin(); it != flagged.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->span.begin;
        } else {
          out.push_back(it->span);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

void PreTokenizer::add_split(Regex regex, SplitBehavior behavior, bool invert) {
  Step step;
  step.regex = std::move(regex);
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
}

Status PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  Step step;
  step.byte_level = true;
  step.add_prefix_space = add_prefix_space;
  step.use_regex = use_regex;
  if (use_regex) {
    TANDEM_ASSIGN(step.regex, Regex::compile(kGpt2Pattern));
  }
  steps_.push_back(std::move(step));
  return ok_status();
}

Status PreTokenizer::run(std::vector<std::string>& pieces) const {
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    next.reserve(pieces.size());
    TANDEM_TRY(run_step(step, pieces, next));
    pieces.swap(next);
  }
  return ok_status();
}

Status PreTokenizer::run_step(const Step& step, const std::vector<std::string>& in,
                              std::vector<std::string>& out) const {
  std::string prefixed;
  for (const std::string& piece : in) {
    std::string_view text = piece;
    if (step.byte_level && step.add_prefix_space && (text.empty() || text.front() != ' ')) {
      prefixed = " " + piece;
      text = prefixed;
    }
    if (step.byte_level && !step.use_regex) {
      if (!text.empty()) out.push_back(byte_level_map(text));
      continue;
    }
    const SplitBehavior behavior = step.byte_level ? SplitBehavior::kIsolated : step.behavior;
    TANDEM_ASSIGN(const std::vector<Span> spans, split_spans(step.regex, text, behavior, step.invert));
    out.reserve(out.size() + spans.size());
    for (const Span& s : spans) {
      if (s.end == s.begin) continue;
      const std::string_view word = text.substr(s.begin, s.end - s.begin);
      out.push_back(step.byte_level ? byte_level_map(word) : std::string(word));
    }
  }
  return ok_status();
}

}  // namespace tandem::io::tok

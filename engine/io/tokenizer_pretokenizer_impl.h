// The pre-tokenizer: a sequence of Split (regex or literal pattern, five delimiter behaviors, invert)
// and ByteLevel (optional prefix space, GPT-2 regex, byte-to-character mapping) steps, each applied to
// every piece the previous steps produced, with empty pieces dropped, as HF's PreTokenizedString does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"
#include "engine/io/tokenizer_regex_impl.h"

namespace tandem::io::tok {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// HF's NormalizedString::split over `text`: the spans of the pieces that remain, in order, empty ones
// included (the caller drops them).
Result<std::vector<Span>> split_spans(const Regex& regex, std::string_view text, SplitBehavior behavior,
                                      bool invert);

class PreTokenizer {
 public:
  void add_split(Regex regex, SplitBehavior behavior, bool invert);
  // The GPT-2 regex is compiled here, once per tokenizer.
  Status add_byte_level(bool add_prefix_space, bool use_regex);

  // Replaces `pieces` by their pre-tokenized words.
  Status run(std::vector<std::string>& pieces) const;

 private:
  struct Step {
    bool byte_level = false;
    Regex regex;  // the split pattern, or GPT-2's for a ByteLevel step with use_regex
    bool use_regex = true;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  Status run_step(const Step& step, const std::vector<std::string>& in, std::vector<std::string>& out) const;
  std::vector<Step> steps_;
};

}  // namespace tandem::io::tok

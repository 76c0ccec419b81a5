// The compat input layout of scorer.md §1, one sequence per question:
//   [CLS] tok("<type> question: <question>")[:budget] [SEP] [MASK] tok(" "+opt0)[:48] ... [SEP]
//   tok(state)[:room] [SEP]
// with Laya's budgets as kime reproduces them: each option keeps 48 tokens; when the options (masks
// included) leave fewer than 16 of head_max_len, each is cut to max(4, (head_max_len - 16) / k) (mask
// included); the question keeps max(8, head_max_len - option tokens); room = max(0, max_len - len - 1);
// the result is cut to max_len and a question that loses a marker to that cut is an error. User text
// (state, question, options) is encoded with special-token matching off, so "[CLS]" typed by a user is
// text; the structural tokens are only the layout's own. What each cut removed is reported per field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"
#include "engine/io/tokenizer.h"

namespace tandem::coordinator {

inline constexpr uint32_t kOptionTokens = 48;

struct CompatBudget {
  uint32_t max_len = 512;
  uint32_t head_max_len = 192;
};

struct CompatSpecials {
  uint32_t cls = 0;
  uint32_t sep = 0;
  uint32_t mask = 0;
};

// Token counts of each piece of user text: as encoded, and what the budgets kept of it.
struct LaidOut {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> markers;  // one per option, positions within ids
  uint32_t state_tokens = 0;       // of the whole state
  uint32_t state_tokens_used = 0;  // that fit
  uint32_t question_tokens = 0;    // of "<qtype> question: <question>"
  uint32_t question_tokens_used = 0;
  std::vector<uint32_t> option_tokens;       // per option, of " <option>" (its mask not counted)
  std::vector<uint32_t> option_tokens_used;
};

class BuildLayout {
 public:
  BuildLayout(const io::Tokenizer& tokenizer, CompatSpecials specials, CompatBudget budget);

  // Text as the model reads it: the mask token's literal replaced by a space, so user text cannot forge
  // a marker (Laya does the same).
  std::string clean(std::string_view text) const;
  // The state's ids, encoded once per request and shared by its questions.
  Result<std::vector<uint32_t>> encode_state(std::string_view state) const;
  // One question; a kCapacity error when its options do not fit (the HTTP layer answers 422).
  Result<LaidOut> operator()(std::string_view qtype_name, std::string_view question,
                             std::span<const std::string> options, std::span<const uint32_t> state_ids) const;

 private:
  const io::Tokenizer& tokenizer_;
  CompatSpecials specials_;
  CompatBudget budget_;
  std::string mask_text_;
};

}  // namespace tandem::coordinator

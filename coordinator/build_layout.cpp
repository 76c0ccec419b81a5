// The compat layout builder (build_layout.h).
#include "coordinator/build_layout.h"

#include <algorithm>

#include <fmt/format.h>

namespace tandem::coordinator {

BuildLayout::BuildLayout(const io::Tokenizer& tokenizer, CompatSpecials specials, CompatBudget budget)
    : tokenizer_(tokenizer), specials_(specials), budget_(budget) {
  auto text = tokenizer_.decode({specials_.mask});
  if (text.ok()) mask_text_ = std::move(text).value();
}

std::string BuildLayout::clean(std::string_view text) const {
  if (mask_text_.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t from = 0;
  for (size_t at = text.find(mask_text_); at != std::string_view::npos; at = text.find(mask_text_, from)) {
    out.append(text.substr(from, at - from));
    out.push_back(' ');
    from = at + mask_text_.size();
  }
  out.append(text.substr(from));
  return out;
}

Result<std::vector<uint32_t>> BuildLayout::encode_state(std::string_view state) const {
  return tokenizer_.encode(clean(state), io::SpecialTokens::kSplit).context("state");
}

Result<LaidOut> BuildLayout::operator()(std::string_view qtype_name, std::string_view question,
                                        std::span<const std::string> options,
                                        std::span<const uint32_t> state_ids) const {
  const std::string head_text = clean(fmt::format("{} question: {}", qtype_name, question));
  TANDEM_ASSIGN(std::vector<uint32_t> head,
                tokenizer_.encode(head_text, io::SpecialTokens::kSplit).context("question"));
  LaidOut out;
  out.question_tokens = static_cast<uint32_t>(head.size());
  std::vector<std::vector<uint32_t>> opts;
  size_t total = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    TANDEM_ASSIGN(std::vector<uint32_t> ids, tokenizer_.encode(clean(" " + options[i]), io::SpecialTokens::kSplit)
                                                 .context(fmt::format("options[{}]", i)));
    out.option_tokens.push_back(static_cast<uint32_t>(ids.size()));
    std::vector<uint32_t> o;
    o.reserve(kOptionTokens + 1);
    o.push_back(specials_.mask);
    o.insert(o.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(ids.size(), kOptionTokens)));
    total += o.size();
    opts.push_back(std::move(o));
  }
  // Crowded options: each is cut, its mask included, to an equal share of what the head allows.
  const auto head_max = static_cast<int64_t>(budget_.head_max_len);
  int64_t left = head_max - static_cast<int64_t>(total);
  if (left < 16 && !opts.empty()) {
    const size_t share = std::max<size_t>(4, static_cast<size_t>(std::max<int64_t>(0, head_max - 16)) / opts.size());
    total = 0;
    for (auto& o : opts) {
      o.resize(std::min(o.size(), share));
      total += o.size();
    }
    left = head_max - static_cast<int64_t>(total);
  }
  head.resize(std::min(head.size(), static_cast<size_t>(std::max<int64_t>(8, left))));

  out.ids.reserve(budget_.max_len);
  out.ids.push_back(specials_.cls);
  out.ids.insert(out.ids.end(), head.begin(), head.end());
  out.ids.push_back(specials_.sep);
  for (const auto& o : opts) {
    out.markers.push_back(static_cast<uint32_t>(out.ids.size()));
    out.ids.insert(out.ids.end(), o.begin(), o.end());
  }
  out.ids.push_back(specials_.sep);
  const size_t prefix = out.ids.size();
  const size_t room = budget_.max_len > prefix + 1 ? budget_.max_len - (prefix + 1) : 0;
  const size_t used = std::min(room, state_ids.size());
  out.ids.insert(out.ids.end(), state_ids.begin(), state_ids.begin() + static_cast<std::ptrdiff_t>(used));
  out.ids.push_back(specials_.sep);
  if (out.ids.size() > budget_.max_len) out.ids.resize(budget_.max_len);
  const size_t options_total = opts.size();
  std::erase_if(out.markers, [&](uint32_t m) { return m >= budget_.max_len; });
  if (out.markers.size() < options_total) {
    return Error::make(ErrorKind::kCapacity, "the question's options exceed head_max_len={}", budget_.head_max_len);
  }
  out.state_tokens = static_cast<uint32_t>(state_ids.size());
  out.state_tokens_used = static_cast<uint32_t>(std::min(used, out.ids.size() > prefix ? out.ids.size() - prefix : 0));
  // What survived the cut to max_len: the question sits at [1, 1 + head), option j at [marker, marker +
  // its ids) with its mask first; every marker is below max_len (checked above).
  const size_t len = out.ids.size();
  out.question_tokens_used = static_cast<uint32_t>(std::min(head.size(), len > 1 ? len - 1 : 0));
  for (size_t j = 0; j < opts.size(); ++j) {
    const size_t kept = std::min(opts[j].size(), len - out.markers[j]);
    out.option_tokens_used.push_back(static_cast<uint32_t>(kept - 1));
  }
  return out;
}

}  // namespace tandem::coordinator

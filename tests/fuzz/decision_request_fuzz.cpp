// libFuzzer target: a /v1/decide or /v1/score body from the network, through both parsers with the limits
// of a served checkpoint, and every /v1/decide body they accept laid out (scorer.md §1) with the shipped
// decision-tickets tokenizer, as rank 0 does before batching. Nothing may crash, hang or trip ASan/UBSan;
// a body either parses or is an ApiError, a question either lays out or is an error, and a laid-out
// question holds the layout's invariants (CLS first, within max_len, one marker per option on a mask).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "coordinator/build_layout.h"
#include "coordinator/parse_request.h"
#include "engine/io/laya_config.h"

namespace {

using tandem::coordinator::BuildLayout;

constexpr uint32_t kCls = 1, kSep = 2, kMask = 4;  // decision-tickets' special ids (its encoder config)
constexpr tandem::coordinator::CompatBudget kBudget{512, 192};

const BuildLayout& layout() {
  static const std::unique_ptr<tandem::io::Tokenizer> tokenizer = [] {
    auto t = tandem::io::Tokenizer::load(std::string(TANDEM_SOURCE_DIR) +
                                         "/models/decision-tickets/tokenizer/tokenizer.json");
    if (!t.ok()) std::abort();  // the shipped model is part of the tree
    return std::move(t).value();
  }();
  static const BuildLayout built(*tokenizer, {kCls, kSep, kMask}, kBudget);
  return built;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);  // NOLINT: bytes as text
  tandem::coordinator::RequestLimits limits;
  limits.vocab = 1501;
  limits.max_sequences = 64;
  limits.max_questions = 32;
  limits.max_options = 16;
  limits.max_request_tokens = 8192;
  limits.max_sequence_tokens = 512;
  limits.max_sequence_markers = 64;
  limits.max_model_tokens = 512;
  limits.model_limit = "max_len 512";
  (void)tandem::coordinator::parse_score_request(body, limits);
  auto decide = tandem::coordinator::parse_decide_request(body, limits);
  if (!decide.ok()) return 0;
  auto state = layout().encode_state(decide.value().state);
  if (!state.ok()) return 0;
  for (const auto& q : decide.value().questions) {
    auto out = layout()(tandem::io::kQuestionTypes.at(static_cast<size_t>(q.qtype)), q.question, q.options,
                        state.value());
    if (!out.ok()) continue;
    const auto& l = out.value();
    if (l.ids.empty() || l.ids.front() != kCls || l.ids.size() > kBudget.max_len) std::abort();
    if (l.markers.size() != q.options.size()) std::abort();
    for (const uint32_t m : l.markers) {
      if (m >= l.ids.size() || l.ids[m] != kMask) std::abort();
    }
  }
  return 0;
}
